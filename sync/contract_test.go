package sync_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/hot"
	"goldbridge/serving/hot/hotfake"
	gbsync "goldbridge/sync"
)

// contract is the hot tier's contract suite (serving/hot's promise), run against every
// Target: Ensure on an empty tier serves nothing; Publish records each pushed partition
// with the Gold snapshot and checksum it came from and serves its Gold rows; a batch
// that pushes one partition and drops another does both; ReadBack reads per partition
// and level exactly Gold's statistics; Ensure with rebuild empties the served table
// (keeping or forgetting each recorded state as it was).
func contract(t *testing.T, tgt hot.Target, m *serving.Mart, tbl *table.Table) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	gold, err := gbsync.GoldPartitions(ctx, m, tbl)
	if err != nil || len(gold) < 5 {
		t.Fatalf("gold partitions %d, %v", len(gold), err)
	}
	if out, err := tgt.Ensure(ctx, m, tbl, false); err != nil || out.Rebuild {
		t.Fatalf("ensure on an empty tier: %+v, %v", out, err)
	}
	expect := func(step string, want []hot.Partition, live bool) {
		t.Helper()
		served, err := tgt.Partitions(ctx, m)
		if err != nil {
			t.Fatalf("%s: partitions: %v", step, err)
		}
		if got := slices.Sorted(maps.Keys(served.States)); !slices.Equal(got, partIDs(want)) {
			t.Fatalf("%s: recorded %v, want %v", step, got, partIDs(want))
		}
		for _, p := range want {
			if s := served.States[p.ID]; s.SnapshotID != p.SnapshotID || s.Checksum != p.Checksum || s.Rows != uint64(p.Rows) || !s.PushedAt.Equal(now) {
				t.Fatalf("%s: partition %s recorded %+v, pushed %+v at %s", step, p.ID, s, p, now)
			}
		}
		wantLive := map[string]uint64{}
		if live {
			for _, p := range want {
				wantLive[p.ID] = uint64(p.Rows)
			}
		}
		if !maps.Equal(served.Live, wantLive) {
			t.Fatalf("%s: serving %v, want %v", step, served.Live, wantLive)
		}
	}
	expect("empty", nil, true)

	pub, err := tgt.Publish(ctx, m, tbl, hot.Batch{Push: gold[:3], Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if pub.Push.Rows != gold[0].Rows+gold[1].Rows+gold[2].Rows {
		t.Fatalf("published %d rows, gold %d+%d+%d", pub.Push.Rows, gold[0].Rows, gold[1].Rows, gold[2].Rows)
	}
	expect("three pushed", gold[:3], true)

	if _, err := tgt.Publish(ctx, m, tbl, hot.Batch{Push: gold[3:4], Drop: []string{gold[0].ID}, Now: clock}); err != nil {
		t.Fatal(err)
	}
	expect("one pushed, one dropped", gold[1:4], true)

	rb, err := tgt.ReadBack(ctx, m, gold[1:4])
	if err != nil || len(rb.Columns) > 0 {
		t.Fatalf("read back: columns %v, %v", rb.Columns, err)
	}
	want, err := gbsync.GoldStats(ctx, m, tbl, gold[1:4])
	if err != nil {
		t.Fatal(err)
	}
	if got, w := statsText(rb.Stats), statsText(want); got != w {
		t.Fatalf("read back\n%s\ngold\n%s", got, w)
	}

	if _, err := tgt.Ensure(ctx, m, tbl, true); err != nil {
		t.Fatal(err)
	}
	// Nothing is served after a rebuild; a recorded state may stay (a single server
	// keeps them) or go (a sharded target knows a state only where it is served).
	served, err := tgt.Partitions(ctx, m)
	if err != nil || len(served.Live) > 0 {
		t.Fatalf("rebuilt: serving %v, %v", served.Live, err)
	}
	var kept []hot.Partition
	for _, p := range gold[1:4] {
		if _, ok := served.States[p.ID]; ok {
			kept = append(kept, p)
		}
	}
	if len(kept) != len(served.States) {
		t.Fatalf("rebuilt: recorded %v, pushed %v", slices.Sorted(maps.Keys(served.States)), partIDs(gold[1:4]))
	}
	expect("rebuilt", kept, false)
}

func partIDs(ps []hot.Partition) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.ID)
	}
	slices.Sort(out)
	return out
}

// statsText renders per-level statistics canonically (decimals by value, doubles to
// nine significant digits: their sums depend on the order of addition).
func statsText(st map[string]map[string]*hot.LevelStats) string {
	var s string
	for _, id := range slices.Sorted(maps.Keys(st)) {
		for _, l := range slices.Sorted(maps.Keys(st[id])) {
			ls := st[id][l]
			s += fmt.Sprintf("%s %s rows=%d hash=%d", id, l, ls.Rows, ls.Hash)
			for _, k := range slices.Sorted(maps.Keys(ls.Sums)) {
				s += fmt.Sprintf(" %s=%s", k, ls.Sums[k].String())
			}
			for _, k := range slices.Sorted(maps.Keys(ls.Weighted)) {
				s += fmt.Sprintf(" %s~%.9g", k, ls.Weighted[k])
			}
			for _, k := range slices.Sorted(maps.Keys(ls.States)) {
				s += fmt.Sprintf(" %s#%d", k, ls.States[k])
			}
			s += "\n"
		}
	}
	return s
}

// contractGold is a Gold table of six days for the contract suite.
func contractGold(t *testing.T) *table.Table {
	t.Helper()
	days := daysFrom(day0, 6)
	return writeGold(t, lakehousetest.Open(t), goldRows(genOrders(5, days, 200)), days)
}

// TestContractFake runs the contract suite against the in-memory target (the fake the
// planner tests use), with ReadBack answered from Gold.
func TestContractFake(t *testing.T) {
	tbl := contractGold(t)
	fake := &hotfake.Target{ReadBackFunc: func(ctx context.Context, m *serving.Mart, parts []hot.Partition) (hot.ReadBack, error) {
		st, err := gbsync.GoldStats(ctx, m, tbl, parts)
		return hot.ReadBack{Stats: st}, err
	}}
	contract(t, fake, testMart("marts", true), tbl)
}

// TestContractClickHouse runs the contract suite against a single ClickHouse server,
// for a summing and an aggregating mart.
func TestContractClickHouse(t *testing.T) {
	for _, agg := range []bool{false, true} {
		t.Run(fmt.Sprint("aggregating=", agg), func(t *testing.T) {
			db := chtest.Database(t)
			contract(t, chtarget.NewClickHouse(client(t, db)), testMart(db, agg), contractGold(t))
		})
	}
}
