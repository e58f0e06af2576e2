package sync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/shopspring/decimal"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	gbsync "goldbridge/sync"
)

// paidCond selects the paid orders of two countries: every other country's groups
// match no row.
const paidCond = `status == "paid" && country in ["DE", "FR"]`

// paidMart: revenue and number of the paid DE/FR orders, orders of at least 100 (a
// NULL amount is not), all orders, and the average paid DE/FR order (avg_if), per day
// and country with the day's total.
func paidMart() gold.MartSpec {
	spec := groupingMart("paid", "rollup", nil)
	spec.Dims = spec.Dims[:1] // country
	spec.Measures = []gold.MeasureSpec{
		{Name: "paid_revenue", Agg: "sum_if", Column: "amount", InputType: silverType("decimal(18,2)"), If: paidCond},
		{Name: "paid_orders", Agg: "count_if", If: paidCond},
		{Name: "big_orders", Agg: "count_if", If: "amount >= 100"},
		{Name: "orders", Agg: "count"},
		{Name: "paid_avg", Agg: "avg_if", Column: "amount", InputType: silverType("decimal(18,2)"), If: paidCond},
	}
	return spec
}

// paidOracle computes paidMart in Go from the live Silver rows (not deleted, with a
// grain), as day|country|level|paid_revenue|paid_orders|big_orders|orders|paid_avg: the
// average of the matched non-NULL amounts rounded half away from zero at 8 places, NULL
// where there is none.
func paidOracle(t *testing.T, lh *catalog.Lakehouse) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	type agg struct {
		rev               decimal.Decimal
		paid, big, orders int64
		paidAmounts       int64 // matched rows with an amount: avg_if's divisor
	}
	groups := map[string]*agg{}
	forRows(t, tbl, func(col func(string) arrow.Array, i int) {
		if col(silver.ColIsDeleted).(*array.Boolean).Value(i) || col("created_at").IsNull(i) {
			return
		}
		day := time.UnixMicro(int64(col("created_at").(*array.Timestamp).Value(i))).UTC().Format(time.DateOnly)
		country, status := "∅", ""
		if !col("country").IsNull(i) {
			country = col("country").ValueStr(i)
		}
		if !col("status").IsNull(i) {
			status = col("status").ValueStr(i)
		}
		var amount *decimal.Decimal
		if !col("amount").IsNull(i) {
			d := decimal.RequireFromString(col("amount").ValueStr(i))
			amount = &d
		}
		for _, key := range []string{day + "|" + country + "|detail", day + "|∅|total"} {
			g := groups[key]
			if g == nil {
				g = &agg{}
				groups[key] = g
			}
			g.orders++
			if status == "paid" && (country == "DE" || country == "FR") {
				g.paid++
				if amount != nil {
					g.rev = g.rev.Add(*amount)
					g.paidAmounts++
				}
			}
			if amount != nil && amount.GreaterThanOrEqual(decimal.NewFromInt(100)) {
				g.big++
			}
		}
	})
	var out []string
	for k, g := range groups {
		avg := "NULL"
		if g.paidAmounts > 0 {
			avg = g.rev.DivRound(decimal.NewFromInt(g.paidAmounts), 8).StringFixed(8)
		}
		out = append(out, fmt.Sprintf("%s|%s|%d|%d|%d|%s", k, g.rev.StringFixed(2), g.paid, g.big, g.orders, avg))
	}
	slices.Sort(out)
	return out
}

// forRows calls f for every row of tbl's current snapshot.
func forRows(t *testing.T, tbl *table.Table, f func(col func(string) arrow.Array, i int)) {
	t.Helper()
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		for i := range int(rec.NumRows()) {
			f(col, i)
		}
		rec.Release()
	}
}

// goldPaidRows reads gold.paid in the oracle's form.
func goldPaidRows(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	var out []string
	forRows(t, tbl, func(col func(string) arrow.Array, i int) {
		country := "∅"
		if !col("country").IsNull(i) {
			country = col("country").ValueStr(i)
		}
		rev := "NULL"
		if !col("paid_revenue").IsNull(i) {
			rev = decimal.RequireFromString(col("paid_revenue").ValueStr(i)).StringFixed(2)
		}
		avg := "NULL"
		if !col("paid_avg").IsNull(i) {
			avg = decimal.RequireFromString(col("paid_avg").ValueStr(i)).StringFixed(8)
		}
		n := func(c string) int64 { return col(c).(*array.Int64).Value(i) }
		out = append(out, fmt.Sprintf("%s|%s|%s|%s|%d|%d|%d|%s", col("report_date").(*array.Date32).Value(i).FormattedString(),
			country, col("grouping_level").ValueStr(i), rev, n("paid_orders"), n("big_orders"), n("orders"), avg))
	})
	slices.Sort(out)
	return out
}

// servedPaidRows reads <t>_final in the oracle's form.
func servedPaidRows(t *testing.T, c *chconn.Client, m *serving.Mart) []string {
	t.Helper()
	rows, err := c.Conn().Query(context.Background(), fmt.Sprintf(`SELECT toString(report_date), ifNull(country, '∅'),
		toString(grouping_level), ifNull(toString(paid_revenue), 'NULL'), paid_orders, big_orders, orders,
		ifNull(toString(paid_avg), 'NULL') FROM %s.%s`,
		serving.Q(m.Database), serving.Q(m.Table+"_final")))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d, co, lv, rev, avg string
		var paid, big, orders int64
		if err := rows.Scan(&d, &co, &lv, &rev, &paid, &big, &orders, &avg); err != nil {
			t.Fatal(err)
		}
		if rev != "NULL" {
			rev = decimal.RequireFromString(rev).StringFixed(2)
		}
		if avg != "NULL" {
			avg = decimal.RequireFromString(avg).StringFixed(8)
		}
		out = append(out, fmt.Sprintf("%s|%s|%s|%s|%d|%d|%d|%s", d, co, lv, rev, paid, big, orders, avg))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestConditionalAggregates: count_if, sum_if and avg_if, computed by Gold in a first run, an
// incremental run after a second stream moved and changed orders, and a full run, equal
// in Gold and in <t>_final an oracle computed here from the live Silver rows — 0 (not
// NULL) in the groups no row matches, and a NULL average there — and check is clean.
func TestConditionalAggregates(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	clock := func() time.Time { return end.AddDate(0, 0, 3) }
	spec := paidMart()
	m := servedMart(db, spec, "uniqExact")
	for _, step := range []struct {
		name string
		opt  gold.Options
		more bool // merge a second stream into Silver first
	}{{"first", gold.Options{}, false}, {"incremental", gold.Options{}, true}, {"full", gold.Options{Full: true}, false}} {
		if step.more {
			demoBatch(t, lh, "landing2", 8, end.AddDate(0, 0, 2))
		}
		res, err := gold.Run(ctx, lh, spec, step.opt)
		if err != nil {
			t.Fatalf("%s: gold: %v", step.name, err)
		}
		if step.more && (res.Full || len(res.Partitions) == 0) {
			t.Fatalf("%s: not an incremental run: full %v, partitions %v", step.name, res.Full, res.Partitions)
		}
		want := paidOracle(t, lh)
		zero := 0
		for _, w := range want {
			if strings.Contains(w, "|detail|0.00|0|") {
				zero++
			}
		}
		if zero == 0 {
			t.Fatalf("%s: no group without a matching row in %v", step.name, head(want))
		}
		tbl, err := lh.LoadTable(ctx, spec.Table)
		if err != nil {
			t.Fatal(err)
		}
		if got := goldPaidRows(t, tbl); !slices.Equal(got, want) {
			t.Fatalf("%s: Gold (%d rows) != oracle (%d rows)\n%s", step.name, len(got), len(want), diffRows(got, want))
		}
		if err := m.CheckSchema(tbl.Schema()); err != nil {
			t.Fatal(err)
		}
		if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
			t.Fatalf("%s: sync: %v", step.name, err)
		}
		if got := servedPaidRows(t, c, m); !slices.Equal(got, want) {
			t.Fatalf("%s: _final (%d rows) != oracle (%d rows)\n%s", step.name, len(got), len(want), diffRows(got, want))
		}
		if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
			t.Fatalf("%s: check: %v %v", step.name, drifts, err)
		}
		t.Logf("%s: %d rows, %d groups without a match, partitions %d", step.name, len(want), zero, len(res.Partitions))
	}
}
