package sync_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/push"
	gbsync "goldbridge/sync"
)

// TestClickHouseTargetContract checks each method of hot.Target against its stated
// contract, on the ClickHouse implementation, with the test's own generator as the
// oracle: what Partitions lists after a Publish, what ReadBack reads, that a failed
// Publish leaves the recorded state saying what is served, that a Drop is gone from
// both, and that Ensure with rebuild leaves nothing served.
func TestClickHouseTargetContract(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 3)
	orders := genOrders(11, days, 300)
	rows := goldRows(orders)
	tbl := writeGold(t, lh, rows, days)
	parts, err := gbsync.GoldPartitions(ctx, m, tbl)
	if err != nil || len(parts) != 3 {
		t.Fatalf("gold partitions: %d, %v", len(parts), err)
	}
	ids := []string{"20260501", "20260502", "20260503"}
	clock := func() time.Time { return day0.AddDate(0, 0, 3) }
	var target gbsync.Target = chtarget.NewClickHouse(c)

	served := func() gbsync.Served {
		t.Helper()
		s, err := target.Partitions(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Oracle: Gold rows per day and level, and the day's revenue (cents) and orders.
	type want struct {
		rows    map[string]int64
		cents   int64
		nOrders int64
	}
	wants := map[string]*want{}
	for _, r := range rows {
		id := r.day.Format("20060102")
		if wants[id] == nil {
			wants[id] = &want{rows: map[string]int64{}}
		}
		wants[id].rows[r.level]++
	}
	for _, o := range orders {
		w := wants[o.day.Format("20060102")]
		w.cents += o.cents
		w.nOrders++
	}

	// Ensure creates the tables; again, it finds nothing to change.
	for i := range 2 {
		out, err := target.Ensure(ctx, m, tbl, false)
		if err != nil || out.Rebuild || len(out.Changes) > 0 {
			t.Fatalf("ensure %d: %+v, %v", i, out, err)
		}
	}
	if s := served(); len(s.States) != 0 || len(s.Live) != 0 {
		t.Fatalf("fresh target serves %+v", s)
	}

	// Publish: Partitions lists each partition with the Gold state it was pushed from.
	if _, err := target.Publish(ctx, m, tbl, gbsync.Batch{Push: parts, Now: clock}); err != nil {
		t.Fatal(err)
	}
	s := served()
	if got := slices.Sorted(maps.Keys(s.Live)); !slices.Equal(got, ids) {
		t.Fatalf("live partitions %v, want %v", got, ids)
	}
	for _, p := range parts {
		st, ok := s.States[p.ID]
		if !ok || st.SnapshotID != p.SnapshotID || st.Checksum != p.Checksum || st.Deleted {
			t.Fatalf("state of %s: %+v (%v), want snapshot %d checksum %s", p.ID, st, ok, p.SnapshotID, p.Checksum)
		}
	}

	// ReadBack: the served rows per partition and level, and the measure sums.
	readBack := func(hot []push.Partition) gbsync.ReadBack {
		t.Helper()
		rb, err := target.ReadBack(ctx, m, hot)
		if err != nil || len(rb.Columns) > 0 {
			t.Fatalf("read back: %v %v", rb.Columns, err)
		}
		return rb
	}
	rb := readBack(parts)
	for _, id := range ids {
		w, got := wants[id], rb.Stats[id]
		for level, n := range w.rows {
			if got[level] == nil || got[level].Rows != n {
				t.Fatalf("%s %s: read back %+v, want %d rows", id, level, got[level], n)
			}
		}
		total := got["total"]
		if !total.Sums["revenue"].Equal(decimal.New(w.cents, -2)) || !total.Sums["orders"].Equal(decimal.NewFromInt(w.nOrders)) {
			t.Fatalf("%s total: revenue %s orders %s, want %d cents and %d orders", id, total.Sums["revenue"], total.Sums["orders"], w.cents, w.nOrders)
		}
	}

	// A Publish that fails midway: the recorded state still says what is served.
	faulty := chtarget.WithFault(chtarget.NewClickHouse(c), func(p, step string) error {
		if step == push.StepReplace {
			return push.ErrFault
		}
		return nil
	})
	if _, err := faulty.Publish(ctx, m, tbl, gbsync.Batch{Push: parts[:1], Drop: ids[2:], Now: clock}); !errors.Is(err, push.ErrFault) {
		t.Fatalf("faulty publish: %v", err)
	}
	if after := served(); !maps.Equal(after.Live, s.Live) || len(after.States) != 3 {
		t.Fatalf("after a failed publish: %+v, want %+v", after, s)
	}

	// Drop: gone from the served partitions and from the recorded state.
	if _, err := target.Publish(ctx, m, tbl, gbsync.Batch{Drop: ids[2:], Now: clock}); err != nil {
		t.Fatal(err)
	}
	s = served()
	if got := slices.Sorted(maps.Keys(s.Live)); !slices.Equal(got, ids[:2]) {
		t.Fatalf("live after the drop: %v", got)
	}
	if _, ok := s.States[ids[2]]; ok || len(s.States) != 2 {
		t.Fatalf("states after the drop: %v", slices.Sorted(maps.Keys(s.States)))
	}
	if rb := readBack(parts); rb.Stats[ids[2]] != nil || rb.Stats[ids[0]] == nil {
		t.Fatalf("read back after the drop: %v", slices.Sorted(maps.Keys(rb.Stats)))
	}

	// Ensure with rebuild: the tables are new and empty; the recorded states stay, so
	// each recorded partition plans as missing.
	if _, err := target.Ensure(ctx, m, tbl, true); err != nil {
		t.Fatal(err)
	}
	if s := served(); len(s.Live) != 0 {
		t.Fatalf("after a rebuild the target serves %v", s.Live)
	}
}
