package sync_test

import (
	"context"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/push"
	gbsync "goldbridge/sync"
)

// TestStorage: what the target reports of a mart's served table on disk (the metrics
// after a sync), on a server with ClickHouse's defaults, which deletes nothing within
// the test: one active part per partition, and after a push of two of eight days eight
// inactive parts: the two days were replaced twice, in <t>__prev while the next
// version was built there and in the old <t> when it was settled after the exchange,
// and each REPLACE PARTITION leaves the old part and the empty part ClickHouse writes
// over its range (the batch table's parts went with the dropped table).
func TestStorage(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 8)
	orders := genOrders(41, days, 30)
	tbl := writeGold(t, lh, goldRows(orders), days)
	clock := func() time.Time { return day0.AddDate(0, 0, 8) }
	target := chtarget.NewClickHouse(c)
	storage := func() push.Storage {
		t.Helper()
		s, err := target.Storage(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	activeBytes := func() int64 {
		return int64(scalar[uint64](t, c, "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '"+db+"' AND table = 'daily_revenue_kpi' AND active"))
	}
	if _, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	if got, want := storage(), (push.Storage{Parts: 8, Bytes: activeBytes()}); got != want {
		t.Fatalf("after the first push: %+v, want %+v", got, want)
	}
	changed := days[2:4]
	tbl = writeGold(t, lh, goldRows(genOrders(42, changed, 20)), changed)
	if _, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	got := storage()
	inactive := int64(scalar[uint64](t, c, "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '"+db+"' AND startsWith(table, 'daily_revenue_kpi') AND NOT active"))
	if want := (push.Storage{Parts: 8, Bytes: activeBytes(), InactiveParts: 8, InactiveBytes: inactive}); got != want || inactive == 0 {
		t.Fatalf("after a push of two days: %+v, want %+v", got, want)
	}
}
