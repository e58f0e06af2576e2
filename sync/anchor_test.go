package sync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/ddl"
	gbsync "goldbridge/sync"
)

// TestHotWindowAnchor is issue 19's "Why" 6: a backfill (Gold data a year older than the
// clock) served nothing, quietly, and check said "no drift". With the clock anchor the
// sync now fails with a ColdError (nothing pushed) and check reports the same ColdError;
// with hot_window_anchor: data the window counts back from the newest Gold day and _final
// equals Gold over those days; the TTL of the clock-anchored table is drift, so the table
// is rebuilt without it.
func TestHotWindowAnchor(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, false)
	m.TTL = 10000 * 24 * time.Hour // deletes nothing of May 2026 by the server's clock
	days := daysFrom(day0, 14)
	rows := goldRows(genOrders(3, days, 300))
	tbl := writeGold(t, lh, rows, days)
	now := day0.AddDate(1, 0, 0)
	clock := func() time.Time { return now }

	res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
	var cold *gbsync.ColdError
	if !errors.As(err, &cold) || cold.Partitions != 14 || !cold.Newest.Equal(day0.AddDate(0, 0, 13)) || len(res.Pushed) != 0 {
		t.Fatalf("clock anchor, a year later: %v (%+v), pushed %d", err, cold, len(res.Pushed))
	}
	if got := finalRows(t, c, m); len(got) != 0 {
		t.Fatalf("clock anchor served %d rows", len(got))
	}
	// check agrees that nothing is served, and says so: not "no drift".
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); !errors.As(err, &cold) || cold.Partitions != 14 || len(drifts) != 0 {
		t.Fatalf("check, clock anchor, a year later: %v %v", drifts, err)
	}

	m.HotAnchor, m.TTL = serving.AnchorData, 0
	res, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	// Newest day May 14, window 10 days: May 4 .. May 14 (the partition ending after May 4 00:00 is May 4).
	if len(res.Pushed) != 11 || !slices.ContainsFunc(res.Rebuilt, func(ch ddl.Change) bool { return ch.Column == "TTL" }) {
		t.Fatalf("data anchor: %s, rebuilt %v", res.Summary(m.Name), res.Rebuilt)
	}
	if got, want := finalRows(t, c, m), goldStrings(rows, m, time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC)); !slices.Equal(got, want) {
		t.Fatalf("_final differs from Gold over May 4-14: %d vs %d rows", len(got), len(want))
	}
	if engine := scalar[string](t, c, "SELECT engine_full FROM system.tables WHERE database = '"+db+"' AND name = '"+m.Table+"'"); strings.Contains(engine, "TTL") {
		t.Fatalf("served table keeps a TTL: %s", engine)
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check: %v %v", drifts, err)
	}
	if res, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(res.Pushed) != 0 || res.Unchanged != 11 {
		t.Fatalf("rerun: %s %v", res.Summary(m.Name), err)
	}
}
