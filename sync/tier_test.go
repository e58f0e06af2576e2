package sync_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/ddl"
	gbsync "goldbridge/sync"
)

// Orders dated 2200-01-01, 9999-12-31 and 1899-12-31 beside ordinary days: nothing
// wraps into another partition (the grain is Date32), 2200-01-01 is served, 9999-12-31
// (beyond what Date32 holds) is reported and not served, 1899-12-31 is outside the hot
// window, and the ordinary days keep syncing in the same batch; check finds no drift.
func TestFarGrains(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 3)
	far := []time.Time{time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(1899, 12, 31, 0, 0, 0, 0, time.UTC)}
	all := append(slices.Clone(days), far...)
	rows := goldRows(genOrders(7, all, 50))
	tbl := writeGold(t, lh, rows, all)
	now := day0.AddDate(0, 0, 3)
	clock := func() time.Time { return now }
	res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	if len(res.Pushed) != 4 || len(res.Unservable) != 1 || res.Unservable[0].ID != "99991231" {
		t.Fatalf("pushed %v, unservable %v", res.Pushed, res.Unservable)
	}
	if !strings.Contains(res.Summary(m.Name), "not served") {
		t.Fatalf("summary does not report the unserved partition: %s", res.Summary(m.Name))
	}
	ids := scalar[string](t, c, fmt.Sprintf("SELECT arrayStringConcat(arraySort(groupUniqArray(partition_id)), ',') FROM system.parts WHERE database = '%s' AND table = 'daily_revenue_kpi' AND active", db))
	if ids != "20260501,20260502,20260503,22000101" {
		t.Fatalf("served partitions %s", ids)
	}
	served := goldStrings(rows, m, day0)
	served = slices.DeleteFunc(served, func(s string) bool { return strings.HasPrefix(s, "9999-") })
	if got := finalRows(t, c, m); !slices.Equal(got, served) {
		t.Fatalf("_final differs from Gold: %d vs %d rows, first %v", len(got), len(served), head(got))
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check: %v %v", drifts, err)
	}
	// The next sync is a no-change one: the unserved partition does not block anything.
	res, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
	if err != nil || len(res.Pushed) != 0 {
		t.Fatalf("second sync: %s %v", res.Summary(m.Name), err)
	}
}

// A Gold partition that becomes empty (every order of the day deleted) is dropped in
// ClickHouse, alone (in place) or together with a changed day (one exchange).
func TestEmptiedPartitionDropped(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 4)
	orders := genOrders(8, days, 60)
	tbl := writeGold(t, lh, goldRows(orders), days)
	clock := func() time.Time { return day0.AddDate(0, 0, 4) }
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	live := func() string {
		return scalar[string](t, c, fmt.Sprintf("SELECT arrayStringConcat(arraySort(groupUniqArray(partition_id)), ',') FROM system.parts WHERE database = '%s' AND table = 'daily_revenue_kpi' AND active", db))
	}
	// Day 2 emptied alone.
	keep := slices.DeleteFunc(slices.Clone(orders), func(o order) bool { return o.day.Equal(days[1]) })
	tbl = writeGold(t, lh, nil, days[1:2])
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	if got := live(); got != "20260501,20260503,20260504" {
		t.Fatalf("live partitions %s", got)
	}
	// Day 3 emptied, its orders moved to day 4: one publication.
	var moved []order
	for _, o := range keep {
		if o.day.Equal(days[2]) {
			o.day = days[3]
		}
		moved = append(moved, o)
	}
	rows := goldRows(moved)
	d4 := rowsOfDay(rows, days[3])
	tbl = writeGold(t, lh, d4, days[2:4])
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	if got := live(); got != "20260501,20260504" {
		t.Fatalf("live partitions %s", got)
	}
	if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows, m, day0)) {
		t.Fatal("_final differs from Gold")
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check: %v %v", drifts, err)
	}
}

// A served table of an older version with the Date grain, and one with a column
// dropped by hand, are rebuilt from Gold by the next sync (never patched with an empty
// column): afterwards _final equals Gold.
func TestDriftedTableRebuilt(t *testing.T) {
	for _, tc := range []struct{ name, damage string }{
		{"date_grain", ""},
		{"dropped_column", "ALTER TABLE `%s`.daily_revenue_kpi DROP COLUMN avg_order__count"},
		{"retyped_column", "ALTER TABLE `%s`.daily_revenue_kpi MODIFY COLUMN avg_order__sum SimpleAggregateFunction(sum, Float64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := chtest.Database(t)
			c := client(t, db)
			lh := lakehousetest.Open(t)
			m := testMart(db, true)
			days := daysFrom(day0, 3)
			rows := goldRows(genOrders(9, days, 80))
			tbl := writeGold(t, lh, rows, days)
			clock := func() time.Time { return day0.AddDate(0, 0, 3) }
			if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
				t.Fatal(err)
			}
			if tc.damage == "" {
				// The table as older versions created it: a Date grain (which wraps after
				// 2149), holding a stale row.
				old := strings.Replace(ddl.TargetTable(m, m.Table), "`report_date` Date32", "`report_date` Date", 1)
				for _, q := range []string{"DROP TABLE `%s`.daily_revenue_kpi SYNC", old, "INSERT INTO `%s`.daily_revenue_kpi (report_date, grouping_level, revenue) VALUES ('2026-05-01', 'total', 1)"} {
					if strings.Contains(q, "%s") {
						q = fmt.Sprintf(q, db)
					}
					if err := c.Conn().Exec(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
			} else if err := c.Conn().Exec(ctx, fmt.Sprintf(tc.damage, db)); err != nil {
				t.Fatal(err)
			}
			res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
			if err != nil || len(res.Rebuilt) == 0 || len(res.Pushed) != 3 {
				t.Fatalf("sync after damage: %s %v", res.Summary(m.Name), err)
			}
			if drift, err := ddl.TargetDrift(ctx, c.Conn(), m); err != nil || len(drift) > 0 {
				t.Fatalf("table still drifts: %v %v", drift, err)
			}
			if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows, m, day0)) {
				t.Fatal("_final differs from Gold after the rebuild")
			}
		})
	}
}

// TestReadersSeeOneSnapshot queries the served view without pause while 24 incremental
// syncs move orders between days (amounts unchanged: every Gold snapshot has the same
// total), and while forced syncs replace every partition: every answer is that total.
// A second reader's queries last about a second each (sleepEachRow over the days), so
// each spans several publications. On a bitmap mart (serving.DistinctBitmap) the readers
// also merge every day's bitmap of customers: the distinct count over all days is the
// same in every snapshot too. On a server with ClickHouse's defaults (an external
// one), and on one that deletes replaced parts and dropped tables within a second, as
// the embedded server does (chlocal.Options.PromptCleanup): a query holds the parts it
// reads, so none is deleted under it.
func TestReadersSeeOneSnapshot(t *testing.T) {
	prompt := chtest.StartServer(t, chlocal.Options{PromptCleanup: true})
	for _, tc := range []struct {
		name   string
		forced bool
		srv    *chlocal.Server // nil: the package's server
		bitmap bool
	}{{"incremental", false, nil, false}, {"whole", true, nil, false}, {"incremental_prompt_cleanup", false, prompt, false}, {"whole_prompt_cleanup", true, prompt, false},
		{"incremental_bitmap", false, nil, true}, {"whole_bitmap", true, nil, true}} {
		forced := tc.forced
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var db string
			var c, reader, slow *chconn.Client
			if tc.srv == nil {
				db = chtest.Database(t)
				c, reader, slow = client(t, db), client(t, db), client(t, db)
			} else {
				db = "readers_" + tc.name
				if err := clientOf(t, tc.srv, "").Conn().Exec(ctx, "CREATE DATABASE "+db); err != nil {
					t.Fatal(err)
				}
				c, reader, slow = clientOf(t, tc.srv, db), clientOf(t, tc.srv, db), clientOf(t, tc.srv, db)
			}
			lh := lakehousetest.Open(t)
			m := testMart(db, tc.bitmap)
			if tc.bitmap {
				m.Distinct = serving.DistinctBitmap
			}
			days := daysFrom(day0, 8)
			orders := genOrders(11, days, 40)
			tbl := writeGold(t, lh, goldRows(orders), days)
			clock := func() time.Time { return day0.AddDate(0, 0, 8) }
			if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
				t.Fatal(err)
			}
			var cents int64
			for _, o := range orders {
				cents += o.cents
			}
			want := decimal.New(cents, -2)
			// The query: the total revenue over every day, and on a bitmap mart the
			// distinct customers over every day, merged from the states of <t>.
			from := fmt.Sprintf("SELECT toString(sum(revenue)) FROM `%s`.daily_revenue_kpi_final WHERE grouping_level = 'total'", db)
			wantCustomers := ""
			if tc.bitmap {
				customers := map[string]bool{}
				for _, o := range orders {
					customers[o.customer] = true
				}
				wantCustomers = fmt.Sprint(len(customers))
				from = fmt.Sprintf("SELECT concat(toString(sum(revenue)), '/', toString(%s)) FROM `%s`.daily_revenue_kpi WHERE grouping_level = 'total'", ddl.FinalExpr(m, m.Measures[2]), db)
			}
			right := func(s string) bool {
				revenue, customers, _ := strings.Cut(s, "/")
				return decimal.RequireFromString(revenue).Equal(want) && customers == wantCustomers
			}
			var answers, wrong atomic.Int64
			var firstWrong atomic.Value
			stop := make(chan struct{})
			done := make(chan struct{}, 2)
			var slowAnswers atomic.Int64
			read := func(c *chconn.Client, filter string, n *atomic.Int64) {
				defer func() { done <- struct{}{} }()
				q := from + filter
				for {
					select {
					case <-stop:
						return
					default:
					}
					var s string
					if err := c.Conn().QueryRow(ctx, q).Scan(&s); err != nil {
						firstWrong.CompareAndSwap(nil, "query: "+err.Error())
						wrong.Add(1)
						continue
					}
					n.Add(1)
					if !right(s) {
						firstWrong.CompareAndSwap(nil, s)
						wrong.Add(1)
					}
				}
			}
			go read(reader, "", &answers)
			go read(slow, " AND sleepEachRow(0.12) = 0", &slowAnswers) // 8 days: ~1 s a query
			r := rand.New(rand.NewPCG(12, 1))
			for i := range 24 {
				// Move a few orders from one day to another.
				from, to := days[r.IntN(len(days))], days[r.IntN(len(days))]
				if from.Equal(to) {
					to = days[(i+1)%len(days)]
					if from.Equal(to) {
						to = days[(i+2)%len(days)]
					}
				}
				n := 0
				for k := range orders {
					if orders[k].day.Equal(from) && n < 3 {
						orders[k].day = to
						n++
					}
				}
				rows := goldRows(orders)
				var changed []goldRow
				for _, g := range rows {
					if g.day.Equal(from) || g.day.Equal(to) {
						changed = append(changed, g)
					}
				}
				tbl = writeGold(t, lh, changed, []time.Time{from, to})
				if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, Force: forced}); err != nil {
					t.Fatal(err)
				}
			}
			close(stop)
			<-done
			<-done
			t.Logf("%d answers, %d of them slow, %d wrong", answers.Load()+slowAnswers.Load(), slowAnswers.Load(), wrong.Load())
			if wrong.Load() > 0 || answers.Load() < 20 || slowAnswers.Load() < 2 {
				t.Fatalf("%d of %d answers (%d slow) were not the total %s of every Gold snapshot (first: %v)", wrong.Load(), answers.Load()+slowAnswers.Load(), slowAnswers.Load(), want, firstWrong.Load())
			}
			if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(goldRows(orders), m, day0)) {
				t.Fatal("_final differs from Gold")
			}
		})
	}
}

// A NULL sum (every amount of the group NULL) is served as NULL, as Gold and Iceberg
// hold it, never as 0, on both engines' paths; check is clean, and a NULL changed to 0
// in ClickHouse is drift.
func TestNullMeasuresServedNull(t *testing.T) {
	for _, agg := range []bool{false, true} {
		t.Run(fmt.Sprintf("aggregating=%v", agg), func(t *testing.T) {
			ctx := context.Background()
			db := chtest.Database(t)
			c := client(t, db)
			lh := lakehousetest.Open(t)
			m := testMart(db, agg)
			days := daysFrom(day0, 2)
			rows := goldRows(genOrders(10, days, 40))
			nulls := 0
			for i := range rows {
				if rows[i].category != nil && *rows[i].category == "games" {
					rows[i].revenueNull = true
					nulls++
				}
			}
			tbl := writeGold(t, lh, rows, days)
			clock := func() time.Time { return day0.AddDate(0, 0, 2) }
			if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
				t.Fatal(err)
			}
			if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows, m, day0)) {
				t.Fatalf("_final differs from Gold (%d NULL revenues): first %v", nulls, head(got))
			}
			if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
				t.Fatalf("check: %v %v", drifts, err)
			}
			// NULL → 0 in one partition: drift.
			q := fmt.Sprintf("ALTER TABLE `%s`.daily_revenue_kpi UPDATE revenue = 0 WHERE revenue IS NULL AND report_date = '2026-05-01' SETTINGS mutations_sync = 2", db)
			if err := c.Conn().Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
			drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
			if err != nil || !slices.Equal(gbsync.DriftPartitions(drifts), []string{"20260501"}) {
				t.Fatalf("NULL served as 0 is not drift: %v %v", drifts, err)
			}
		})
	}
}
