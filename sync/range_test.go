package sync_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// rangeOrders is demoOrders with a date (ship_date) and a timestamp (promised_at).
func rangeOrders() silver.EntitySpec {
	e := demoOrders()
	e.Columns = append(slices.Clone(e.Columns),
		silver.ColumnSpec{Name: "ship_date", Path: "$.ship_date", Type: silverType("date")},
		silver.ColumnSpec{Name: "promised_at", Path: "$.promised_at", Type: silverType("timestamp")})
	return e
}

// rangeMart: orders per day and ship date with the earliest and latest promise.
func rangeMart() gold.MartSpec {
	cols := map[string]silver.Type{silver.ColIsDeleted: {Kind: silver.Bool}}
	for _, c := range rangeOrders().Columns {
		cols[c.Name] = c.Type
	}
	ts := silverType("timestamp")
	return gold.MartSpec{
		Name: "promises", Table: "gold.promises", SourceTable: "silver.orders", SourceKey: []string{"order_id"},
		SourceColumns: cols, Filter: "not is_deleted", GrainColumn: "created_at", GrainUnit: "day", GrainAs: "report_date",
		Dims: []gold.Dim{{Name: "ship_date", Type: silverType("date")}}, Grouping: "rollup",
		Measures: []gold.MeasureSpec{
			{Name: "orders", Agg: "count"},
			{Name: "first_promise", Agg: "min", Column: "promised_at", InputType: ts},
			{Name: "last_promise", Agg: "max", Column: "promised_at", InputType: ts},
		},
	}
}

// rangeOrder is one landed order: created on day, shipped on ship, promised at promise.
type rangeOrder struct {
	id            string
	day           time.Time
	ship, promise time.Time
	updated       time.Time
}

// landRange lands orders through Bronze source src into silver.orders.
func landRange(t *testing.T, lh *catalog.Lakehouse, src string, orders []rangeOrder) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var b strings.Builder
	for _, o := range orders {
		fmt.Fprintf(&b, `{"order_id":%q,"user_id":"u1","amount":"10.00","country":"DE","category":"books","status":"paid","created_at":%q,"updated_at":%q,"op":"u","ship_date":%q,"promised_at":%q}`+"\n",
			o.id, o.day.Add(time.Hour).Format(time.RFC3339), o.updated.Format(time.RFC3339), o.ship.Format(time.DateOnly), o.promise.Format(time.RFC3339))
	}
	if err := os.WriteFile(filepath.Join(dir, "orders.jsonl"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := bronze.FileSource{Name: src, System: "shop_file", Dir: dir}
	if _, err := bronze.IngestFiles(ctx, lh, "bronze.orders", []bronze.FileSource{fs}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := silver.Run(ctx, lh, rangeOrders(), "bronze.orders", silver.Options{}); err != nil {
		t.Fatal(err)
	}
}

// rangeOracle computes the promises mart from the orders as landed (the last version of
// each id): day|ship_date|level|orders|first|last, and the days holding a ship date or
// a promise outside 1900-01-01..2299-12-31, which must not be served.
func rangeOracle(orders []rangeOrder) (rows []string, outside map[string]bool) {
	last := map[string]rangeOrder{}
	for _, o := range orders {
		last[o.id] = o
	}
	type agg struct {
		n           int
		first, last time.Time
	}
	groups := map[string]*agg{}
	outside = map[string]bool{}
	lo, hi := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, o := range last {
		day := o.day.Format(time.DateOnly)
		for _, v := range []time.Time{o.ship, o.promise} {
			if v.Before(lo) || !v.Before(hi) {
				outside[day] = true
			}
		}
		for _, k := range []string{day + "|" + o.ship.Format(time.DateOnly) + "|detail", day + "|∅|total"} {
			g := groups[k]
			if g == nil {
				g = &agg{first: o.promise, last: o.promise}
				groups[k] = g
			}
			g.n++
			if o.promise.Before(g.first) {
				g.first = o.promise
			}
			if o.promise.After(g.last) {
				g.last = o.promise
			}
		}
	}
	f := func(t time.Time) string { return t.Format("2006-01-02 15:04:05") + ".000000" }
	for k, g := range groups {
		if !outside[k[:10]] {
			rows = append(rows, fmt.Sprintf("%s|%d|%s|%s", k, g.n, f(g.first), f(g.last)))
		}
	}
	slices.Sort(rows)
	return rows, outside
}

// servedPromises reads <t>_final in the oracle's form, as ClickHouse prints the values.
func servedPromises(t *testing.T, c *chconn.Client, m *serving.Mart) []string {
	t.Helper()
	q := fmt.Sprintf("SELECT concat(toString(report_date), '|', ifNull(toString(ship_date), '∅'), '|', toString(grouping_level), '|', toString(orders), '|', toString(first_promise), '|', toString(last_promise)) FROM %s.%s ORDER BY 1",
		serving.Q(m.Database), serving.Q(m.Table+"_final"))
	return chtest.Strings(t, c.Conn(), q)
}

// TestValuesOutsideServedRange: orders whose ship date (a date dimension) or promise (a
// min/max timestamp measure) is 2200-01-01, 9999-12-31 or 1899-12-31. 2200-01-01 is
// served as is; a day holding 9999-12-31 or 1899-12-31 is not served — dropped from
// ClickHouse where it was served, reported with the column and value — while the other
// days keep syncing; _final equals an oracle computed here from the landed orders, check
// finds no drift, and a correction of the value serves the day again.
func TestValuesOutsideServedRange(t *testing.T) {
	chtest.Require(t)
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	db := chtest.Database(t)
	c := client(t, db)
	spec := rangeMart()
	m := servedMart(db, spec, "uniqExact")
	clock := func() time.Time { return day0.AddDate(0, 0, 6) }
	date := func(y int, mo time.Month, d int) time.Time { return time.Date(y, mo, d, 0, 0, 0, 0, time.UTC) }
	days := daysFrom(day0, 5)
	var orders, initial []rangeOrder
	for i := range 40 {
		d := days[i%len(days)]
		initial = append(initial, rangeOrder{id: fmt.Sprintf("o%02d", i), day: d, ship: d.AddDate(0, 0, 2),
			promise: d.Add(time.Duration(i) * time.Hour), updated: d.Add(2 * time.Hour)})
	}
	step := func(name string, src string, batch []rangeOrder, wantOutside map[string]string) {
		t.Helper()
		orders = append(orders, batch...)
		landRange(t, lh, src, batch)
		if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
			t.Fatalf("%s: gold: %v", name, err)
		}
		tbl, err := lh.LoadTable(ctx, spec.Table)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.CheckSchema(tbl.Schema()); err != nil {
			t.Fatal(err)
		}
		res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
		if err != nil {
			t.Fatalf("%s: sync: %v", name, err)
		}
		want, outside := rangeOracle(orders)
		got := map[string]string{}
		for _, u := range res.Unservable {
			got[u.ID] = u.Unservable
		}
		for id, reason := range wantOutside {
			if !strings.Contains(got[id], reason) {
				t.Errorf("%s: partition %s: reason %q, want %q", name, id, got[id], reason)
			}
		}
		if len(got) != len(wantOutside) || len(outside) != len(wantOutside) {
			t.Errorf("%s: not served %v, want %v (oracle: %v)", name, got, wantOutside, outside)
		}
		if len(res.Unservable) > 0 && !strings.Contains(res.Summary(m.Name), "not served") {
			t.Errorf("%s: summary does not report the unserved days: %s", name, res.Summary(m.Name))
		}
		if served := servedPromises(t, c, m); !slices.Equal(served, want) {
			t.Fatalf("%s: _final (%d rows) != oracle (%d rows)\n%s", name, len(served), len(want), diffRows(served, want))
		}
		if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
			t.Fatalf("%s: check: %v %v", name, drifts, err)
		}
		t.Logf("%s: %s", name, res.Summary(m.Name))
	}
	step("ordinary", "l1", initial, nil)
	at := func(d time.Time) time.Time { return d.Add(3 * time.Hour) }
	step("far values", "l2", []rangeOrder{
		{id: "f1", day: days[0], ship: date(2200, 1, 1), promise: date(2200, 1, 1), updated: at(days[0])},
		{id: "f2", day: days[1], ship: days[1], promise: date(9999, 12, 31), updated: at(days[1])},
		{id: "f3", day: days[2], ship: date(1899, 12, 31), promise: days[2], updated: at(days[2])},
		{id: "f4", day: days[3], ship: date(9999, 12, 31), promise: date(1899, 12, 31), updated: at(days[3])},
		{id: "o04", day: days[4], ship: days[4], promise: days[4].Add(5 * time.Hour), updated: at(days[4])}, // an ordinary change
	}, map[string]string{
		"20260502": "last_promise 9999-12-31T00:00:00Z outside 1900-01-01..2299-12-31",
		"20260503": "ship_date 1899-12-31",
		"20260504": "ship_date 9999-12-31",
	})
	// Corrections serve the days again.
	step("corrected", "l3", []rangeOrder{
		{id: "f2", day: days[1], ship: days[1], promise: date(2299, 12, 31), updated: at(days[1]).Add(time.Hour)},
		{id: "f4", day: days[3], ship: days[3], promise: date(1900, 1, 1), updated: at(days[3]).Add(time.Hour)},
	}, map[string]string{"20260503": "ship_date 1899-12-31"})
}
