package sync_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// TestSyncPurge: after pushes that remove a customer's orders from two days (published
// by exchange) and then from a third (replaced in place), ClickHouse still keeps the old
// rows on disk (outdated parts, the exchanged-out table) until a sync with Purge, which
// leaves no inactive part and no dropped table of the mart, and no file under the
// server's data directory holding the customer's uniqExact hash; <t>_final still equals
// Gold and check is clean.
func TestSyncPurge(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 6)
	orders := genOrders(3, days, 50)
	const secret = "c-forget-me"
	for i := range orders {
		if i%40 == 0 && i/50 < 3 { // days 0..2
			orders[i].customer = secret
		}
	}
	tbl := writeGold(t, lh, goldRows(orders), days)
	now := day0.AddDate(0, 0, 6).Add(time.Hour)
	opt := gbsync.Options{Now: func() time.Time { return now }}
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, opt); err != nil {
		t.Fatal(err)
	}
	hash := scalar[string](t, c, "SELECT unhex(substring(hex(uniqExactState('"+secret+"')), 3))")
	dataDir := chtest.Server(t).Path()
	holding := func() []string {
		var out []string
		_ = filepath.Walk(dataDir, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(hash)) {
					out = append(out, p)
				}
			}
			return nil
		})
		return out
	}
	if len(holding()) == 0 {
		t.Fatal("no file holds the customer's hash after the first push: the scan cannot see it")
	}
	var kept []order
	for _, o := range orders {
		if o.customer != secret {
			kept = append(kept, o)
		}
	}
	inactive := func() uint64 {
		return scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.parts WHERE database = '%s' AND NOT active", db))
	}
	dropped := func() uint64 {
		return scalar[uint64](t, c, fmt.Sprintf("SELECT count() FROM system.dropped_tables WHERE database = '%s'", db))
	}
	// Days 1 and 2 (exchange), then day 0 alone (in place), without Purge.
	on := func(ds []time.Time) []order {
		var out []order
		for _, o := range kept {
			if slices.ContainsFunc(ds, o.day.Equal) {
				out = append(out, o)
			}
		}
		return out
	}
	tbl = writeGold(t, lh, goldRows(on(days[1:3])), days[1:3])
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, opt); err != nil {
		t.Fatal(err)
	}
	tbl = writeGold(t, lh, goldRows(on(days[:1])), days[:1])
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, opt); err != nil {
		t.Fatal(err)
	}
	if inactive() == 0 || dropped() == 0 || len(holding()) == 0 {
		t.Fatalf("before the purge: %d inactive parts, %d dropped tables, %d files with the hash (want some of each)", inactive(), dropped(), len(holding()))
	}
	opt.Purge = true
	res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary(m.Name))
	if res.Purged.DroppedTables == 0 || res.Purged.OutdatedParts == 0 || len(res.Pushed) != 0 {
		t.Errorf("purge: %+v, pushed %d", res.Purged, len(res.Pushed))
	}
	if files := holding(); len(files) > 0 {
		t.Errorf("after the purge %d files hold the customer's hash: %v", len(files), files)
	}
	if n := dropped(); n != 0 {
		t.Errorf("%d dropped tables left", n)
	}
	want := goldStrings(goldRows(kept), m, gbsync.Cutoff(m, now, nil))
	if got := finalRows(t, c, m); !slices.Equal(got, want) {
		t.Errorf("_final differs from Gold after the purge: %d vs %d rows", len(got), len(want))
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, opt); err != nil || len(drifts) > 0 {
		t.Errorf("check: %v %v", drifts, err)
	}
}

// TestSyncPurgePromptCleanup: on a server that deletes dropped tables and replaced
// parts by itself within a second (the embedded server), a purge right after each push
// races that cleanup for the tables the push just dropped; it never fails, and leaves no
// dropped table and no inactive part of the mart.
func TestSyncPurgePromptCleanup(t *testing.T) {
	ctx := context.Background()
	srv := chtest.StartServer(t, chlocal.Options{PromptCleanup: true})
	const db = "purge_prompt"
	if err := clientOf(t, srv, "").Conn().Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	c := clientOf(t, srv, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 6)
	orders := genOrders(5, days, 30)
	tbl := writeGold(t, lh, goldRows(orders), days)
	now := day0.AddDate(0, 0, 6).Add(time.Hour)
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		changed := []time.Time{days[i%len(days)], days[(i+1)%len(days)]}
		orders = slices.DeleteFunc(orders, func(o order) bool { return slices.ContainsFunc(changed, o.day.Equal) })
		more := genOrders(uint64(50+i), changed, 25)
		orders = append(orders, more...)
		tbl = writeGold(t, lh, goldRows(more), changed)
		// The push drops its batch tables, then the purge lists and undrops them.
		if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: func() time.Time { return now }, Purge: true}); err != nil {
			t.Fatalf("sync %d with purge: %v", i, err)
		}
	}
	for _, q := range []string{
		"SELECT count() FROM system.dropped_tables WHERE database = '" + db + "'",
		"SELECT count() FROM system.parts WHERE database = '" + db + "' AND startsWith(table, 'daily_revenue_kpi') AND NOT active",
	} {
		if n := scalar[uint64](t, c, q); n != 0 {
			t.Errorf("%s: %d", q, n)
		}
	}
	if got, want := finalRows(t, c, m), goldStrings(goldRows(orders), m, gbsync.Cutoff(m, now, nil)); !slices.Equal(got, want) {
		t.Errorf("_final (%d rows) differs from Gold (%d rows)", len(got), len(want))
	}
}
