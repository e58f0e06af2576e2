package sync_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/ddl"
	"goldbridge/serving/push"
	gbsync "goldbridge/sync"
)

// TestRollingWindows: <t>_windows holds, for every end day whose whole window is
// served, each level's values over the window's days equal to ClickHouse's GROUPING
// SETS over the live Silver rows of those days (an oracle that never reads goldbridge's
// output), for the aggregates of groupingMart with uniqExact states, with bitmaps, and
// with max_by and min_by (states built by the server). Then the promise around it: a
// sync with nothing new leaves the table as it is (and drops a next version an update
// left behind); a push that fails after its record (a crash before the windows) is
// followed by a sync that rebuilds them; Check reports a changed window value as drift
// of the windows and a repair mends it; new Gold rows, and a day leaving the hot
// window, update the windows they touch, equal to the oracle again; a mart that no
// longer declares windows has its table dropped.
func TestRollingWindows(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	seed := uint64(8)
	for _, v := range []struct {
		distinct string
		by       bool // with byMeasures (states built by the server)
	}{{serving.DistinctExact, false}, {serving.DistinctBitmap, false}, {serving.DistinctExact, true}} {
		distinct, by := v.distinct, v.by
		t.Run(fmt.Sprintf("%s_by_%v", distinct, by), func(t *testing.T) {
			spec := groupingMart(fmt.Sprintf("windows_%s_%v", strings.ToLower(distinct), by), "rollup", nil)
			if by {
				spec.Measures = append(spec.Measures, byMeasures(spec.Measures[7].If)...)
			}
			if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
				t.Fatal(err)
			}
			m := servedMart(db, spec, distinct)
			m.Windows = serving.Windows{Days: []int{2, 3}}
			target := chtarget.NewClickHouse(c)
			syncOnce := func(target gbsync.Target, opt gbsync.Options) gbsync.Result {
				t.Helper()
				tbl, err := lh.LoadTable(ctx, spec.Table)
				if err != nil {
					t.Fatal(err)
				}
				opt.Now = clock
				res, err := gbsync.Sync(ctx, target, m, tbl, opt)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			check := func() []gbsync.Drift {
				t.Helper()
				tbl, err := lh.LoadTable(ctx, spec.Table)
				if err != nil {
					t.Fatal(err)
				}
				drifts, err := gbsync.Check(ctx, target, m, tbl, gbsync.Options{Now: clock})
				if err != nil {
					t.Fatal(err)
				}
				return drifts
			}
			if res := syncOnce(target, gbsync.Options{}); res.Windows != push.WindowsRebuilt {
				t.Fatalf("the first sync: windows %q, want them built", res.Windows)
			}
			windowsEqualOracle(t, lh, c, db, m, by)
			if d := check(); len(d) > 0 {
				t.Fatalf("drift after the first sync: %v", d)
			}
			// The storage metrics count the windows' parts with the served table's.
			st, err := target.Storage(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			parts := func(table string) int64 {
				return int64(scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.parts WHERE database = %s AND table = %s AND active",
					serving.QS(db), serving.QS(table))))
			}
			if w := parts(m.Table + ddl.WindowsSuffix); w == 0 || st.Parts != parts(m.Table)+w {
				t.Fatalf("storage %+v: want the parts of %s and its %d windows parts", st, m.Table, w)
			}
			win := ddl.Name(m, m.Table+ddl.WindowsSuffix)
			uuid := func() string {
				return scalar[string](t, c, fmt.Sprintf("SELECT toString(uuid) FROM system.tables WHERE database = %s AND name = %s",
					serving.QS(db), serving.QS(m.Table+ddl.WindowsSuffix)))
			}
			before := uuid()
			if res := syncOnce(target, gbsync.Options{}); res.Windows != push.WindowsCurrent || uuid() != before {
				t.Fatalf("a sync with nothing new touched the windows (%q, table %s -> %s)", res.Windows, before, uuid())
			}

			// An update's next version left behind (its exchange done, its end not seen).
			run(t, c, "CREATE TABLE "+ddl.Name(m, m.Table+ddl.WindowsNextSuffix)+" AS "+win)
			syncOnce(target, gbsync.Options{})
			if n := scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.tables WHERE database = %s AND name = %s",
				serving.QS(db), serving.QS(m.Table+ddl.WindowsNextSuffix))); n != 0 {
				t.Fatal("a sync left the windows' next version behind")
			}

			// A push that fails after it recorded its partitions, before the windows.
			crash := errors.New("crash")
			faulty := chtarget.WithFault(chtarget.NewClickHouse(c), func(_, step string) error {
				if step == "cleanup" {
					return crash
				}
				return nil
			})
			tbl, err := lh.LoadTable(ctx, spec.Table)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gbsync.Sync(ctx, faulty, m, tbl, gbsync.Options{Now: clock, Force: true}); !errors.Is(err, crash) {
				t.Fatalf("the faulty push: %v, want the crash", err)
			}
			if res := syncOnce(target, gbsync.Options{}); res.Windows != push.WindowsRebuilt {
				t.Fatalf("the sync after a push that ended before the windows: %q, want them rebuilt", res.Windows)
			}
			windowsEqualOracle(t, lh, c, db, m, by)

			// A window value changed behind goldbridge's back: drift, mended by a repair.
			run(t, c, "ALTER TABLE "+win+" UPDATE orders = orders + 1 WHERE window_days = 3 AND grouping_level = 'total' SETTINGS mutations_sync = 2")
			d := check()
			if len(d) != 1 || d[0].Partition != gbsync.WindowsPartition {
				t.Fatalf("drift after a window value changed: %v, want the windows'", d)
			}
			if res := syncOnce(target, gbsync.Options{Only: gbsync.DriftPartitions(d)}); res.Windows != push.WindowsRebuilt {
				t.Fatalf("the repair: windows %q, want them rebuilt", res.Windows)
			}
			if d := check(); len(d) > 0 {
				t.Fatalf("drift after the repair: %v", d)
			}
			windowsEqualOracle(t, lh, c, db, m, by)

			// New Silver rows (a new day, changes to the others), then the oldest day out
			// of the hot window: each sync updates the windows it touched.
			demoBatch(t, lh, fmt.Sprintf("landing_%d", seed), seed, end.AddDate(0, 0, 1))
			seed++
			if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
				t.Fatal(err)
			}
			clock = func() time.Time { return end.AddDate(0, 0, 2) }
			if res := syncOnce(target, gbsync.Options{}); res.Windows != push.WindowsIncremental || len(res.Pushed) == 0 {
				t.Fatalf("the sync of new Gold rows: windows %q (%d partitions pushed), want them updated", res.Windows, len(res.Pushed))
			}
			if d := check(); len(d) > 0 {
				t.Fatalf("drift after the new rows: %v", d)
			}
			windowsEqualOracle(t, lh, c, db, m, by)
			m.HotWindow = 4 * 24 * time.Hour
			if res := syncOnce(target, gbsync.Options{}); res.Windows != push.WindowsIncremental || len(res.Dropped) == 0 {
				t.Fatalf("the sync of a smaller hot window: windows %q (%d partitions dropped), want them updated", res.Windows, len(res.Dropped))
			}
			windowsEqualOracle(t, lh, c, db, m, by)
			if d := check(); len(d) > 0 {
				t.Fatalf("drift after the updates: %v", d)
			}

			// No windows declared: the table goes.
			m.Windows = serving.Windows{}
			syncOnce(target, gbsync.Options{})
			if n := scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.tables WHERE database = %s AND name = %s",
				serving.QS(db), serving.QS(m.Table+ddl.WindowsSuffix))); n != 0 {
				t.Fatal("the windows' table outlived their declaration")
			}
		})
	}
}

// windowsEqualOracle compares every window of m's <t>_windows with the oracle over the
// live Silver rows (rebuilt into <db>.s first), end day by end day: the end days are
// those whose whole window lies in the served days; by: the mart has byMeasures.
func windowsEqualOracle(t *testing.T, lh *catalog.Lakehouse, c *chconn.Client, db string, m *serving.Mart, by bool) {
	t.Helper()
	run(t, c, "DROP TABLE IF EXISTS "+serving.Q(db)+".s")
	oracleTable(t, lh, c, db)
	first := scalar[time.Time](t, c, fmt.Sprintf("SELECT toDateTime(min(report_date), 'UTC') FROM %s", ddl.Name(m, m.Table)))
	last := scalar[time.Time](t, c, fmt.Sprintf("SELECT toDateTime(max(report_date), 'UTC') FROM %s", ddl.Name(m, m.Table)))
	if days := int(last.Sub(first).Hours()/24) + 1; days < 3 {
		t.Fatalf("%d days served: no window of 3 to check", days)
	}
	win := ddl.Name(m, m.Table+ddl.WindowsSuffix)
	dims := []string{"country", "category"}
	levels := [][]string{dims, {"country"}, {}}
	for _, w := range m.Windows.Days {
		var want []string
		for e := first.AddDate(0, 0, w-1); !e.After(last); e = e.AddDate(0, 0, 1) {
			from, to := e.AddDate(0, 0, 1-w), e.AddDate(0, 0, 1)
			where := fmt.Sprintf("created_at >= toDateTime64('%s', 6, 'UTC') AND created_at < toDateTime64('%s', 6, 'UTC')",
				from.Format(time.DateTime), to.Format(time.DateTime))
			o := oracleQueryRows(t, c, db, oracleQuery{distinct: "uniqExact", grain: fmt.Sprintf("toDateTime('%s', 'UTC')", e.Format(time.DateTime)),
				dims: dims, levels: levels, where: where, by: by})
			if len(o) == 0 {
				t.Fatalf("window %d ending %s: no Silver rows", w, e.Format(time.DateOnly))
			}
			want = append(want, o...)
		}
		got := martRows(t, c, m, "formatDateTime(toDateTime(report_date, 'UTC'), '%F %T')",
			func(ms serving.Measure) string { return serving.Q(ms.Name) }, win, fmt.Sprintf("WHERE window_days = %d", w))
		slices.Sort(want)
		if !sameRows(got, want) {
			t.Fatalf("windows of %d days (%d rows) != GROUPING SETS over Silver (%d rows)\n%s", w, len(got), len(want), diffRows(got, want))
		}
	}
}

// run executes q on c.
func run(t *testing.T, c *chconn.Client, q string) {
	t.Helper()
	if err := c.Conn().Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestWindowsUpdateEqualsRebuild: after rows of some days of <t> changed, updating
// <t>_windows for those days (ddl.WindowsUpdate) gives exactly the windows recomputed
// whole from <t> (ddl.WindowsSelect), for random sets of changed days, middle days
// included (whose windows reach the days after them); and around a day not served, only
// the windows that do not hold it.
func TestWindowsUpdateEqualsRebuild(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	spec := groupingMart("windows_update", "rollup", nil)
	if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, spec.Table)
	if err != nil {
		t.Fatal(err)
	}
	m := servedMart(db, spec, serving.DistinctBitmap)
	m.Windows = serving.Windows{Days: []int{2, 3}, Levels: []string{"detail", "total"}}
	target := chtarget.NewClickHouse(c)
	if _, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: func() time.Time { return end.AddDate(0, 0, 1) }}); err != nil {
		t.Fatal(err)
	}
	first := scalar[time.Time](t, c, fmt.Sprintf("SELECT toDateTime(min(report_date), 'UTC') FROM %s", ddl.Name(m, m.Table)))
	days := int(scalar[uint64](t, c, fmt.Sprintf("SELECT toUInt64(dateDiff('day', min(report_date), max(report_date)) + 1) FROM %s", ddl.Name(m, m.Table))))
	if days < 4 {
		t.Fatalf("%d days served", days)
	}
	rng := rand.New(rand.NewPCG(7, 41))
	for round := range 6 {
		var changed [][2]time.Time
		for _, i := range rng.Perm(days)[:1+rng.IntN(2)] {
			d := first.AddDate(0, 0, i)
			changed = append(changed, [2]time.Time{d, d.AddDate(0, 0, 1)})
			run(t, c, fmt.Sprintf("ALTER TABLE %s DELETE WHERE report_date = toDate32('%s') AND cityHash64(country, category, %d) %% 3 = 0 SETTINGS mutations_sync = 2",
				ddl.Name(m, m.Table), d.Format(time.DateOnly), round))
		}
		for _, q := range ddl.WindowsUpdate(m, nil, changed, "goldbridge windows test") {
			run(t, c, q)
		}
		want, have, err := target.CheckWindows(ctx, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want != have {
			t.Fatalf("round %d, days %v changed: updated windows %s, recomputed %s", round, changed, have, want)
		}
	}

	// A day not served (a hole): no window that holds it, every other whole one.
	hole := first.AddDate(0, 0, 2)
	run(t, c, ddl.WindowsCreate(m, [][2]time.Time{{hole, hole.AddDate(0, 0, 1)}}, "goldbridge windows hole"))
	win := ddl.Name(m, m.Table+ddl.WindowsSuffix)
	got := scalar[string](t, c, "SELECT toString(groupArray((window_days, report_date))) FROM (SELECT DISTINCT window_days, report_date FROM "+win+" ORDER BY ALL)")
	var want []string
	for _, w := range m.Windows.Days {
		for e := first.AddDate(0, 0, w-1); e.Before(first.AddDate(0, 0, days)); e = e.AddDate(0, 0, 1) {
			if e.Before(hole) || !e.AddDate(0, 0, 1-w).Before(hole.AddDate(0, 0, 1)) {
				want = append(want, fmt.Sprintf("(%d,'%s')", w, e.Format(time.DateOnly)))
			}
		}
	}
	if w := "[" + strings.Join(want, ",") + "]"; got != w {
		t.Fatalf("windows around a hole on %s: %s, want %s", hole.Format(time.DateOnly), got, w)
	}
}
