package sync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/gold"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/ddl"
	gbsync "goldbridge/sync"
)

// TestServedMergesAcrossDays: what a dashboard asks of several days, every aggregate's
// FinalExpr over the served rows of all the demo's days grouped by level and dimensions,
// equals ClickHouse's GROUPING SETS over the live Silver rows of those days — for the
// aggregates of groupingMart (states built by goldbridge) and with byMeasures (avg_if,
// max_by and min_by: states built by the server): sums and counts add, distinct counts
// and quantiles merge their states, averages their sums and counts, max_by and min_by
// their (by, value) pairs.
func TestServedMergesAcrossDays(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	oracleTable(t, lh, c, db)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	dims := []string{"country", "category"}
	levels := [][]string{dims, {"country"}, {}}
	for _, by := range []bool{false, true} {
		spec := groupingMart(fmt.Sprintf("across_%v", by), "rollup", nil)
		if by {
			spec.Measures = append(spec.Measures, byMeasures(spec.Measures[7].If)...)
		}
		if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
			t.Fatal(err)
		}
		tbl, err := lh.LoadTable(ctx, spec.Table)
		if err != nil {
			t.Fatal(err)
		}
		m := servedMart(db, spec, "uniqExact")
		if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
			t.Fatal(err)
		}
		if days := scalar[uint64](t, c, fmt.Sprintf("SELECT uniqExact(report_date) FROM %s", ddl.Name(m, m.Table))); days < 3 {
			t.Fatalf("%d days served: nothing to merge across", days)
		}
		// One grain for all the days: the oracle's grain is a constant.
		want := oracleQueryRows(t, c, db, oracleQuery{distinct: "uniqExact", grain: "toDate('2000-01-01')", dims: dims, levels: levels, by: by})
		if got := mergedRows(t, c, m, "2000-01-01 00:00:00"); len(want) == 0 || !sameRows(got, want) {
			t.Fatalf("by=%v: merged across days (%d rows) != GROUPING SETS over Silver (%d rows)\n%s", by, len(got), len(want), diffRows(got, want))
		}
	}
}

// mergedRows reads the served rows of <t> merged across all grains (FinalExpr) per level
// and dimensions, in servedRows' form with grain text day.
func mergedRows(t *testing.T, c *chconn.Client, m *serving.Mart, day string) []string {
	t.Helper()
	q := func(s string) string { return serving.Q(s) }
	var vals, flags, keys []string
	for _, d := range m.Dimensions {
		vals = append(vals, "ifNull(toString("+q(d.Name)+"), '∅')")
		flags = append(flags, "toUInt64("+q("grouping_"+d.Name)+")")
		keys = append(keys, q(d.Name), q("grouping_"+d.Name))
	}
	var sel []string
	for _, ms := range m.Measures {
		e := ddl.FinalExpr(m, ms)
		switch ms.Name {
		case "orders", "customers", "big_paid", "p_amount":
			sel = append(sel, e)
		case "big_paid_revenue":
			sel = append(sel, "toString("+e+")")
		default:
			sel = append(sel, "ifNull(toString("+e+"), 'NULL')")
		}
	}
	view := fmt.Sprintf("SELECT [%s] AS v, [%s] AS f, toString(grouping_level) AS l, %s FROM %s GROUP BY grouping_level, %s",
		strings.Join(vals, ", "), strings.Join(flags, ", "), strings.Join(sel, ", "), ddl.Name(m, m.Table), strings.Join(keys, ", "))
	rows, err := c.Conn().Query(context.Background(), view)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	typ := func(measure string) string {
		i := slices.IndexFunc(m.Measures, func(ms serving.Measure) bool { return ms.Name == measure })
		return strings.ToLower(m.Measures[i].Type)
	}
	hasBy := len(m.Measures) > 8
	var out []string
	for rows.Next() {
		var lv, rev, avg, maxA, bigRev, aif, lastA, cheapest string
		var vs []string
		var fs []uint64
		var orders, cust, big int64
		var qs []float64
		dest := []any{&vs, &fs, &lv, &rev, &orders, &cust, &avg, &maxA, &qs, &big, &bigRev}
		if hasBy {
			dest = append(dest, &aif, &lastA, &cheapest)
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		row := fmt.Sprintf("%s|%v|%v|%s|%s|%d|%d|%s|%s|%v|%d|%s", day, vs, fs, lv,
			valueText(typ("revenue"), 2, true, rev), orders, cust, avgText(typ("avg_amount"), avg), valueText(typ("max_amount"), 2, false, maxA), qs,
			big, valueText(typ("big_paid_revenue"), 2, true, bigRev))
		if hasBy {
			row += byText(avgText(typ("big_paid_avg"), aif), valueText(typ("latest_amount"), 2, false, lastA), cheapest)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
