package sync_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// TestNextVersionFromPrev: an incremental push builds the next version of <t> in
// <t>__prev, the version before the last exchange, replacing only the partitions that
// differ from <t>. Whatever <t>__prev holds — rows added by hand to a day no push
// touches, a day dropped, a day Gold never had, a partly built version left by a crash —
// the published table equals Gold, partition for partition; a <t>__prev of another
// structure is not used (the push attaches every partition to a fresh table instead).
// After each push <t>__prev holds exactly <t>'s parts (settlePrev): no old row.
func TestNextVersionFromPrev(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 8)
	orders := genOrders(31, days, 40)
	tbl := writeGold(t, lh, goldRows(orders), days)
	clock := func() time.Time { return day0.AddDate(0, 0, 8) }
	exec := func(q string) {
		t.Helper()
		if err := c.Conn().Exec(ctx, fmt.Sprintf(q, "`"+db+"`.daily_revenue_kpi__prev")); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	seed := uint64(100)
	// change regenerates the orders of days i and j and syncs them.
	change := func(name string, i, j int) {
		t.Helper()
		changed := []time.Time{days[i], days[j]}
		seed++
		orders = slices.DeleteFunc(orders, func(o order) bool { return slices.ContainsFunc(changed, o.day.Equal) })
		more := genOrders(seed, changed, 30)
		orders = append(orders, more...)
		tbl = writeGold(t, lh, goldRows(more), changed)
		res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
		if err != nil || len(res.Pushed) != 2 || !slices.Equal(res.Dropped, []string(nil)) {
			t.Fatalf("%s: %s %v", name, res.Summary(m.Name), err)
		}
		if got, want := finalRows(t, c, m), goldStrings(goldRows(orders), m, day0); !slices.Equal(got, want) {
			t.Fatalf("%s: _final (%d rows) differs from Gold (%d rows)\n%s", name, len(got), len(want), diffRows(got, want))
		}
		if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
			t.Fatalf("%s: check: %v %v", name, drifts, err)
		}
		ids := scalar[string](t, c, fmt.Sprintf("SELECT arrayStringConcat(arraySort(groupUniqArray(partition_id)), ',') FROM system.parts WHERE database = '%s' AND table = 'daily_revenue_kpi' AND active", db))
		if ids != "20260501,20260502,20260503,20260504,20260505,20260506,20260507,20260508" {
			t.Fatalf("%s: live partitions %s", name, ids)
		}
		// The push settled <t>__prev: the same parts as <t> (hard links), no old rows.
		parts := func(table string) string {
			return scalar[string](t, c, fmt.Sprintf("SELECT arrayStringConcat(arraySort(groupArray(concat(partition_id, ':', hash_of_all_files))), ',') FROM system.parts WHERE database = '%s' AND table = '%s' AND active", db, table))
		}
		if got, want := parts("daily_revenue_kpi__prev"), parts("daily_revenue_kpi"); got != want {
			t.Fatalf("%s: <t>__prev holds %s, <t> %s", name, got, want)
		}
	}
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	change("first incremental", 0, 1)
	change("from prev", 2, 3)
	// Rows added by hand to an untouched day, a day dropped, a day Gold never had.
	exec("INSERT INTO %s SELECT * FROM " + "`" + db + "`.daily_revenue_kpi WHERE report_date = '2026-05-06'")
	exec("ALTER TABLE %s DROP PARTITION ID '20260507'")
	exec("INSERT INTO %s SELECT * REPLACE (toDate32('2026-04-20') AS report_date) FROM " + "`" + db + "`.daily_revenue_kpi WHERE report_date = '2026-05-08'")
	change("tampered prev", 4, 5)
	// A partly built next version (a crash during the build): a day copied from <t>,
	// a day to be pushed dropped.
	exec("ALTER TABLE %s REPLACE PARTITION ID '20260505' FROM `" + db + "`.daily_revenue_kpi, DROP PARTITION ID '20260501'")
	change("partly built prev", 0, 6)
	// Another structure: not used.
	exec("ALTER TABLE %s ADD COLUMN stray Int32")
	change("prev of another structure", 1, 7)
	if n := scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.columns WHERE database = '%s' AND table = 'daily_revenue_kpi' AND name = 'stray'", db)); n != 0 {
		t.Fatal("the served table took the stray column of __prev")
	}
	change("prev again", 2, 4)
}
