package sync_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/shopspring/decimal"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/ddl"
	"goldbridge/serving/push"
	gbsync "goldbridge/sync"
)

func TestMain(m *testing.M) {
	if os.Getenv("GB_TEST_PUSHER") != "" {
		os.Exit(runPusher())
	}
	chtest.Main(m)
}

var day0 = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

func client(t testing.TB, db string) *chconn.Client {
	t.Helper()
	return clientOf(t, chtest.Server(t), db)
}

// clientOf connects to database db of srv as its admin.
func clientOf(t testing.TB, srv *chlocal.Server, db string) *chconn.Client {
	t.Helper()
	c, err := chconn.Open(context.Background(), chconn.Options{Addresses: []string{srv.TCPAddr()}, User: srv.User(), Password: srv.Password(), Database: db, MaxRetries: 3, RetryBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// finalRows reads <t>_final as canonical strings, one per row.
func finalRows(t testing.TB, c *chconn.Client, m *serving.Mart) []string {
	t.Helper()
	q := fmt.Sprintf("SELECT toString(report_date), ifNull(country, '∅'), ifNull(category, '∅'), grouping_country, grouping_category, toString(grouping_level), ifNull(toString(revenue), 'NULL'), orders %s FROM `%s`.`%s_final`",
		map[bool]string{true: ", customers, toString(avg_order)", false: ""}[m.Aggregating()], m.Database, m.Table)
	rows, err := c.Conn().Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d, co, ca, lv, rev, avg string
		var gc, gk uint8
		var orders, cust int64
		dest := []any{&d, &co, &ca, &gc, &gk, &lv, &rev, &orders}
		if m.Aggregating() {
			dest = append(dest, &cust, &avg)
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		if rev != "NULL" {
			rev = decimal.RequireFromString(rev).StringFixed(2)
		}
		s := fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s|%d", d, co, ca, gc, gk, lv, rev, orders)
		if m.Aggregating() {
			s += fmt.Sprintf("|%d|%s", cust, decimal.RequireFromString(avg).StringFixed(8))
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func goldStrings(rows []goldRow, m *serving.Mart, from time.Time) []string {
	var out []string
	for _, r := range rows {
		if r.day.Before(from) {
			continue
		}
		n := func(p *string) string {
			if p == nil {
				return "∅"
			}
			return *p
		}
		rev := decimal.New(r.revenue, -2).StringFixed(2)
		if r.revenueNull {
			rev = "NULL"
		}
		s := fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s|%d", r.day.Format("2006-01-02"), n(r.country), n(r.category), r.gCountry, r.gCategory, r.level,
			rev, r.orders)
		if m.Aggregating() {
			s += fmt.Sprintf("|%d|%s", r.customers, decimal.New(r.avgOrder, -8).StringFixed(8))
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func scalar[T any](t testing.TB, c *chconn.Client, q string) T {
	t.Helper()
	var v T
	if err := c.Conn().QueryRow(context.Background(), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

func TestSyncAcceptance(t *testing.T) {
	for _, variant := range []string{"aggregating", "summing", serving.DistinctBitmap} {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			db := chtest.Database(t)
			c := client(t, db)
			lh := lakehousetest.Open(t)
			agg := variant != "summing"
			m := testMart(db, agg)
			if variant == serving.DistinctBitmap {
				m.Distinct = serving.DistinctBitmap
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			days := daysFrom(day0, 14)
			orders := genOrders(1, days, 400)
			rows := goldRows(orders)
			tbl := writeGold(t, lh, rows, days)
			now := day0.AddDate(0, 0, 14).Add(5 * time.Hour) // hot: days >= May 5 (10 days)
			clock := func() time.Time { return now }
			hotFrom := gbsync.Cutoff(m, now, nil)

			res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Pushed) != 10 {
				t.Fatalf("pushed %d partitions, want 10: %s", len(res.Pushed), res.Summary(m.Name))
			}
			want := goldStrings(rows, m, hotFrom)
			if got := finalRows(t, c, m); !slices.Equal(got, want) {
				t.Fatalf("_final differs from Gold: %d vs %d rows\nfirst got %v\nfirst want %v", len(got), len(want), head(got), head(want))
			}
			if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
				t.Fatalf("check: %v %v", drifts, err)
			}
			// Unique customers over days by merging daily states = distinct of the union.
			distinctOver := func(orders []order, from time.Time, days int) {
				t.Helper()
				if !agg {
					return
				}
				to := from.AddDate(0, 0, days)
				got := scalar[int64](t, c, fmt.Sprintf("SELECT %s FROM `%s`.daily_revenue_kpi WHERE grouping_level = 'total' AND report_date >= '%s' AND report_date < '%s'",
					ddl.FinalExpr(m, m.Measures[2]), db, from.Format("2006-01-02"), to.Format("2006-01-02")))
				set := map[string]bool{}
				for _, o := range orders {
					if !o.day.Before(from) && o.day.Before(to) {
						set[o.customer] = true
					}
				}
				if got != int64(len(set)) {
					t.Fatalf("%d-day unique customers from %s: clickhouse %d, orders %d", days, from.Format("2006-01-02"), got, len(set))
				}
			}
			distinctOver(orders, day0.AddDate(0, 0, 7), 7)

			parts := func() uint64 {
				return scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.parts WHERE database = '%s' AND table = 'daily_revenue_kpi' AND active", db))
			}
			total := func() string {
				return scalar[string](t, c, fmt.Sprintf("SELECT toString(sum(revenue)) FROM `%s`.daily_revenue_kpi_final", db))
			}
			p0, t0 := parts(), total()
			if p0 != 10 {
				// Each stream's blocks hold whole days and are inserted as sent (no
				// squashing): one part per partition, as ClickHouse's own load makes; a
				// bitmap mart's states, built by the server, are squashed to the same
				// (push.statesSettingsOf).
				t.Fatalf("%d active parts after pushing 10 partitions, want 10", p0)
			}

			// Sync twice: nothing pushed, parts stable.
			start := time.Now()
			res, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
			if err != nil || len(res.Pushed) != 0 || len(res.Dropped) != 0 {
				t.Fatalf("second sync pushed %v dropped %v err %v", res.Pushed, res.Dropped, err)
			}
			t.Logf("no-change sync over %d partitions: %s", res.Unchanged, time.Since(start))
			if parts() != p0 || total() != t0 {
				t.Fatalf("second sync changed parts %d→%d or totals %s→%s", p0, parts(), t0, total())
			}

			// Forced re-push keeps totals.
			res, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, Force: true})
			if err != nil || len(res.Pushed) != 10 {
				t.Fatalf("forced: %v %v", len(res.Pushed), err)
			}
			if total() != t0 || !slices.Equal(finalRows(t, c, m), want) {
				t.Fatalf("forced re-push changed totals %s → %s", t0, total())
			}

			// A late change to an old day re-pushes that day only.
			late := day0.AddDate(0, 0, 6)
			orders2 := append(slices.Clone(orders), order{late, strp("DE"), "books", 12345, "late-customer"})
			rows2 := goldRows(orders2)
			lateRows := rowsOfDay(rows2, late)
			tbl = writeGold(t, lh, lateRows, []time.Time{late})
			res, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
			if err != nil || len(res.Pushed) != 1 || res.Pushed[0].ID != "20260507" || res.Pushed[0].Reason != "changed" {
				t.Fatalf("late change: %s %v", res.Summary(m.Name), err)
			}
			if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows2, m, hotFrom)) {
				t.Fatal("_final differs from Gold after the late change")
			}
			// The re-pushed day's states merge with those of the days pushed before it
			// (a bitmap's new key took the next id of the dictionary).
			distinctOver(orders2, hotFrom, 10)
			distinctOver(orders2, late, 4)

			// A day leaving the window is dropped in ClickHouse (and kept in Iceberg).
			now = now.AddDate(0, 0, 2)
			res, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
			if err != nil || !slices.Equal(res.Dropped, []string{"20260505", "20260506"}) || len(res.Pushed) != 0 {
				t.Fatalf("window move: %s %v", res.Summary(m.Name), err)
			}
			if n := scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM `%s`.daily_revenue_kpi WHERE report_date < '2026-05-07'", db)); n != 0 {
				t.Fatalf("%d rows left outside the window", n)
			}
			if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows2, m, gbsync.Cutoff(m, now, nil))) {
				t.Fatal("_final differs from Gold after the window moved")
			}
			if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
				t.Fatalf("check: %v %v", drifts, err)
			}
			gp, _ := gbsync.GoldPartitions(ctx, m, tbl)
			if len(gp) != 14 {
				t.Fatalf("gold lost partitions: %d", len(gp))
			}

			// Drift is found and repaired.
			if err := c.Conn().Exec(ctx, fmt.Sprintf("ALTER TABLE `%s`.daily_revenue_kpi DROP PARTITION ID '20260510'", db)); err != nil {
				t.Fatal(err)
			}
			drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
			if err != nil || !slices.Equal(gbsync.DriftPartitions(drifts), []string{"20260510"}) {
				t.Fatalf("check after damage: %v %v", drifts, err)
			}
			if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, Only: gbsync.DriftPartitions(drifts)}); err != nil {
				t.Fatal(err)
			}
			if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
				t.Fatalf("check after repair: %v %v", drifts, err)
			}
		})
	}
}

func head(s []string) []string { return s[:min(3, len(s))] }

// TestFaultSweep injects a failure before every step of a push, in a batch that is the
// whole table (every day changed: the table is exchanged) and in one that is not (one
// day changed: REPLACE PARTITION). After each failure ClickHouse holds old or new per
// partition (the rows of each day are the old or the new ones), and the next sync
// converges with zero drift and leaves no batch table behind; on a bitmap mart too,
// whose key dictionary gets its new ids in the states step.
func TestFaultSweep(t *testing.T) {
	for _, tc := range []struct {
		whole  bool
		bitmap bool // serving.DistinctBitmap: the key dictionary's ids are given in the states step
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		whole := tc.whole
		name := map[bool]string{true: "whole", false: "partial"}[whole]
		if tc.bitmap {
			name += "_bitmap"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := chtest.Database(t)
			c := client(t, db)
			lh := lakehousetest.Open(t)
			m := testMart(db, true)
			if tc.bitmap {
				m.Distinct = serving.DistinctBitmap
			}
			days := daysFrom(day0, 3)
			gold := goldRows(genOrders(2, days, 100))
			tbl := writeGold(t, lh, gold, days)
			now := day0.AddDate(0, 0, 3)
			clock := func() time.Time { return now }
			if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
				t.Fatal(err)
			}
			version := 0
			for _, step := range push.Steps {
				version++
				// New Gold content for every day, or for 2026-05-02 only.
				rows := goldRows(genOrders(uint64(10+version), days, 100))
				if whole {
					gold = rows
					tbl = writeGold(t, lh, rows, days)
				} else {
					day := day0.AddDate(0, 0, 1)
					var next []goldRow
					for _, r := range gold {
						if !r.day.Equal(day) {
							next = append(next, r)
						}
					}
					changed := rowsOfDay(rows, day)
					gold = append(next, changed...)
					tbl = writeGold(t, lh, changed, []time.Time{day})
				}
				before := finalRows(t, c, m)
				faulty := chtarget.WithFault(chtarget.NewClickHouse(c), func(p, s string) error {
					if p == "20260502" && s == step {
						return push.ErrFault
					}
					return nil
				})
				_, err := gbsync.Sync(ctx, faulty, m, tbl, gbsync.Options{Now: clock, Parallelism: 1})
				if !errors.Is(err, push.ErrFault) {
					t.Fatalf("step %s: want the injected fault, got %v", step, err)
				}
				// Every partition is old or new, never a mix.
				mid := finalRows(t, c, m)
				for _, d := range days {
					day := d.Format("2006-01-02")
					newDay := filterDay(goldStrings(gold, m, day0), day)
					oldDay := filterDay(before, day)
					gotDay := filterDay(mid, day)
					if !slices.Equal(gotDay, newDay) && !slices.Equal(gotDay, oldDay) {
						t.Fatalf("step %s: partition %s is neither old nor new", step, day)
					}
				}
				if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
					t.Fatalf("step %s: converge: %v", step, err)
				}
				if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
					t.Fatalf("step %s: drift after converge: %v %v", step, drifts, err)
				}
				if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(gold, m, day0)) {
					t.Fatalf("step %s: _final differs from Gold", step)
				}
				if n := scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.tables WHERE database = '%s' AND name LIKE '%%\\_\\_push%%'", db)); n != 0 {
					t.Fatalf("step %s: %d batch tables left after a successful sync", step, n)
				}
			}
		})
	}
}

func filterDay(rows []string, day string) []string {
	var out []string
	for _, r := range rows {
		if strings.HasPrefix(r, day+"|") {
			out = append(out, r)
		}
	}
	return out
}

// TestSyncOverHTTP pushes through the HTTP interface (Native-format bodies).
func TestSyncOverHTTP(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c, err := chconn.Open(ctx, chconn.Options{Addresses: []string{chtest.Server(t).HTTPAddr()}, User: chtest.Server(t).User(), Password: chtest.Server(t).Password(), HTTP: true, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 3)
	rows := goldRows(genOrders(3, days, 200))
	tbl := writeGold(t, lh, rows, days)
	clock := func() time.Time { return day0.AddDate(0, 0, 3) }
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, BatchRows: 50}); err != nil {
		t.Fatal(err)
	}
	if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows, m, day0)) {
		t.Fatal("_final differs from Gold")
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check: %v %v", drifts, err)
	}
}

// Tables ensured ahead (ClickHouse.Prepare, as `run` does while the lakehouse stages
// work) are trusted by the next Sync only, and only while the Gold schema they came from
// is still the table's.
func TestSyncEnsuredAhead(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 3)
	rows := goldRows(genOrders(5, days, 200))
	tbl := writeGold(t, lh, rows, days)
	clock := func() time.Time { return day0.AddDate(0, 0, 3) }
	views := func() uint64 {
		return scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.tables WHERE database = '%s' AND name = 'daily_revenue_kpi_final'", db))
	}
	dropView := func() {
		if err := c.Conn().Exec(ctx, fmt.Sprintf("DROP TABLE `%s`.daily_revenue_kpi_final", db)); err != nil {
			t.Fatal(err)
		}
	}

	target := chtarget.NewClickHouse(c)
	if err := target.Prepare(ctx, testMart(db, true), tbl); err != nil {
		t.Fatal(err)
	}
	if views() != 1 {
		t.Fatal("Prepare did not create the mart's view")
	}
	// Prepared for another schema than the table's: Sync ensures again (the view comes back).
	dropView()
	chtarget.SetPrepared(target, m.Name, iceberg.NewSchema(99, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int32}))
	if _, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	if views() != 1 {
		t.Fatal("Sync with tables ensured for another schema did not ensure them again")
	}
	if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows, m, day0)) {
		t.Fatal("_final differs from Gold")
	}
	// Prepared for the table's schema: the next Sync skips its DDL (the dropped view
	// stays away) and pushes.
	if err := target.Prepare(ctx, m, tbl); err != nil {
		t.Fatal(err)
	}
	dropView()
	res, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock, Force: true})
	if err != nil || len(res.Pushed) != 3 {
		t.Fatalf("sync with tables ensured ahead: pushed %d, %v", len(res.Pushed), err)
	}
	if views() != 0 {
		t.Fatal("Sync ran its DDL although the tables were ensured ahead for this schema")
	}
	// Only that one: the Sync after it ensures again.
	if _, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	if views() != 1 {
		t.Fatal("a second Sync trusted the tables ensured ahead of the first")
	}
}
