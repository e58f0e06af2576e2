package sync_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// TestShardedServing serves a mart on a real 2-shard × 2-node topology with no Keeper
// (sync.Sharded): every hot partition lives on exactly one shard, its home, and on both
// of that shard's nodes with the same rows; <t>_final read through any node (the
// Distributed table) equals Gold; check is clean. With one node stopped, reads still
// return Gold's rows (failover to the other node of the shard), a push fails cleanly,
// and the first push after the node is back converges, check clean again. The contract
// suite (contract_test.go) runs on the same cluster.
func TestShardedServing(t *testing.T) {
	ctx := context.Background()
	cl := chtest.StartCluster(t, 2, 2)
	clients := cl.Clients(t)
	target, err := chtarget.NewSharded(clients)
	if err != nil {
		t.Fatal(err)
	}
	m := testMart("sharded", true)
	m.Cluster, m.Sharded = cl.Name, true
	lh := lakehousetest.Open(t)
	days := daysFrom(day0, 6)
	rows := goldRows(genOrders(21, days, 150))
	tbl := writeGold(t, lh, rows, days)
	clock := func() time.Time { return day0.AddDate(0, 0, 6) }

	// placed checks that each hot partition is on its home shard only, on both nodes
	// with the same rows, and that both shards serve some.
	placed := func(clients [][]*chconn.Client) {
		t.Helper()
		perShard := map[int]int{}
		for _, d := range days {
			id := d.Format("20060102")
			home := chtarget.Home(id, 2)
			perShard[home]++
			for s, nodes := range clients {
				var counts []uint64
				for _, c := range nodes {
					counts = append(counts, scalar[uint64](t, c, fmt.Sprintf(
						"SELECT count() FROM sharded.daily_revenue_kpi WHERE toString(toYYYYMMDD(report_date)) = '%s'", id)))
				}
				switch {
				case s == home && (counts[0] == 0 || counts[0] != counts[1]):
					t.Fatalf("partition %s on its home shard %d: rows per node %v", id, s+1, counts)
				case s != home && (counts[0] != 0 || counts[1] != 0):
					t.Fatalf("partition %s (home shard %d) also on shard %d: %v", id, home+1, s+1, counts)
				}
			}
		}
		if len(perShard) != 2 {
			t.Fatalf("every partition on one shard: %v", perShard)
		}
	}
	served := func(c *chconn.Client, want []goldRow) {
		t.Helper()
		if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(want, m, day0)) {
			t.Fatalf("%s: <t>_final (%d rows) differs from Gold (%d rows)", c, len(got), len(want))
		}
	}
	clean := func() {
		t.Helper()
		if drifts, err := gbsync.Check(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
			t.Fatalf("check: %v %v", drifts, err)
		}
	}

	res, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock})
	if err != nil || len(res.Pushed) != len(days) {
		t.Fatalf("sync: pushed %d, %v", len(res.Pushed), err)
	}
	placed(clients)
	for _, nodes := range clients {
		for _, c := range nodes {
			served(c, rows)
		}
	}
	clean()
	if res, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil || len(res.Pushed) != 0 {
		t.Fatalf("second sync pushed %d, %v", len(res.Pushed), err)
	}

	// A node of the shard that holds the first day goes down.
	home := chtarget.Home(days[0].Format("20060102"), 2)
	other := clients[1-home][0]
	cl.StopNode(t, home, 1)
	served(other, rows) // the Distributed read fails over to the shard's other node
	changed := goldRows(genOrders(22, days[:1], 150))
	var next []goldRow
	for _, r := range rows {
		if !r.day.Equal(days[0]) {
			next = append(next, r)
		}
	}
	next = append(next, changed...)
	tbl = writeGold(t, lh, changed, days[:1])
	if _, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock}); err == nil {
		t.Fatal("sync with a node down succeeded")
	}
	cl.StartNode(t, home, 1)
	if _, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatalf("sync after the node is back: %v", err)
	}
	placed(clients)
	for _, nodes := range clients {
		for _, c := range nodes {
			served(c, next)
		}
	}
	clean()

	// A copy that differs on one node of its shard is drift, and a sync repairs it.
	c := clients[home][1]
	if err := c.Conn().Exec(ctx, fmt.Sprintf("ALTER TABLE sharded.daily_revenue_kpi DROP PARTITION ID '%s'", days[0].Format("20060102"))); err != nil {
		t.Fatal(err)
	}
	drifts, err := gbsync.Check(ctx, target, m, tbl, gbsync.Options{Now: clock})
	if err != nil || len(drifts) == 0 {
		t.Fatalf("check missed a partition gone from one node: %v %v", drifts, err)
	}
	if _, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock, Only: gbsync.DriftPartitions(drifts)}); err != nil {
		t.Fatal(err)
	}
	placed(clients)
	clean()

	// The shards in the other order: every partition's home changes. One sync moves each
	// to its new home and drops the copy left behind; readers get Gold's rows after it.
	swapped := [][]*chconn.Client{clients[1], clients[0]}
	if target, err = chtarget.NewSharded(swapped); err != nil {
		t.Fatal(err)
	}
	if drifts, err := gbsync.Check(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) == 0 {
		t.Fatalf("check with the shards swapped found no misplaced copy: %v", err)
	}
	if res, err := gbsync.Sync(ctx, target, m, tbl, gbsync.Options{Now: clock}); err != nil || len(res.Pushed) != len(days) {
		t.Fatalf("sync after the swap: pushed %d of %d, %v", len(res.Pushed), len(days), err)
	}
	placed(swapped)
	served(other, next)
	clean()

	// The hot tier's contract suite, on the same cluster (a mart of its own).
	mc := testMart("sharded_contract", true)
	mc.Cluster, mc.Sharded = cl.Name, true
	contract(t, target, mc, contractGold(t))
}
