package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
)

// TestShardedServingCLI runs the orders pipeline against a real 2-shard × 2-node
// ClickHouse (clickhouse.shards, no Keeper): after `run`, every hot partition of the
// mart is on its home shard only and on both of its nodes with the same rows, <t>_final
// reads the same rows through every node, and `check` is clean. With one node stopped,
// a `run` with new events fails its sync (exit 1) without touching the other nodes'
// answers, and the `sync` after the node is back converges: check clean again.
func TestShardedServingCLI(t *testing.T) {
	cl := chtest.StartCluster(t, 2, 2)
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	pwFile := filepath.Join(dir, "clickhouse.password")
	if err := os.WriteFile(pwFile, []byte(cl.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "pipeline.yaml")
	// Retries outlast a node's restart: libchdb aborts on routine client socket errors and
	// the nodes are supervised (chtest.StartCluster), as a real server would be restarted.
	writeOrdersConfig(t, cfg, func(c map[string]any) {
		c["clickhouse"] = map[string]any{"embedded": false, "database": "marts", "user": cl.User, "password_file": pwFile,
			"cluster": cl.Name, "shards": cl.Addresses(), "max_retries": 3, "retry_backoff": "500ms", "dial_timeout": "2s"}
		// Rolling windows need a single server (validate refuses them on shards).
		delete(c["marts"].(map[string]any)["daily_revenue_kpi"].(map[string]any)["serving"].(map[string]any), "windows")
	})
	gb := func(args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append([]string{"-c", cfg, "--state-dir", state}, args...)...).CombinedOutput()
		return exitCode(err), string(out)
	}
	must := func(args ...string) {
		t.Helper()
		if code, out := gb(args...); code != 0 {
			t.Fatalf("%s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	clients := cl.Clients(t)
	strs := func(c *chconn.Client, q string) []string {
		t.Helper()
		return chtest.Strings(t, c.Conn(), q)
	}
	const tbl = "marts.daily_revenue_kpi"
	// placed: each partition on its home shard only, the same rows on both nodes, and
	// the same <t>_final through every node.
	placed := func() {
		t.Helper()
		final := strs(clients[0][0], "SELECT toString(tuple(*)) FROM "+tbl+"_final ORDER BY 1")
		if len(final) == 0 {
			t.Fatal("nothing served")
		}
		shards := map[int]bool{}
		for s, nodes := range clients {
			var ids [2][]string
			for r, c := range nodes {
				ids[r] = strs(c, "SELECT DISTINCT _partition_id FROM "+tbl+" ORDER BY 1")
				if got := strs(c, "SELECT toString(tuple(*)) FROM "+tbl+"_final ORDER BY 1"); !slices.Equal(got, final) {
					t.Fatalf("<t>_final through shard %d node %d: %d rows, through the first node %d", s+1, r+1, len(got), len(final))
				}
			}
			if !slices.Equal(ids[0], ids[1]) {
				t.Fatalf("shard %d: partitions %v on one node, %v on the other", s+1, ids[0], ids[1])
			}
			for _, id := range ids[0] {
				if chtarget.Home(id, 2) != s {
					t.Fatalf("partition %s on shard %d, its home is shard %d", id, s+1, chtarget.Home(id, 2)+1)
				}
				a := strs(nodes[0], fmt.Sprintf("SELECT toString(tuple(*)) FROM %s WHERE _partition_id = '%s' ORDER BY 1", tbl, id))
				b := strs(nodes[1], fmt.Sprintf("SELECT toString(tuple(*)) FROM %s WHERE _partition_id = '%s' ORDER BY 1", tbl, id))
				if !slices.Equal(a, b) {
					t.Fatalf("partition %s differs between the nodes of shard %d", id, s+1)
				}
				shards[s] = true
			}
		}
		if len(shards) != 2 {
			t.Fatalf("only shards %v serve", shards)
		}
	}

	must("validate")
	mustRun(t, bin, "--state-dir", state, "demo", "generate", "--events", "3000", "--seed", "5")
	must("run")
	placed()
	must("check")

	cl.StopNode(t, 1, 0)
	more := filepath.Join(dir, "more")
	mustRun(t, bin, "--state-dir", state, "demo", "generate", "--events", "500", "--seed", "6", "--out", more)
	if err := os.Rename(filepath.Join(more, "orders-00001.jsonl"), filepath.Join(state, "landing", "orders", "orders-more.jsonl")); err != nil {
		t.Fatal(err)
	}
	if code, out := gb("run"); code == 0 {
		t.Fatalf("run with a node down: exit 0\n%s", out)
	}
	cl.StartNode(t, 1, 0)
	must("sync")
	placed()
	must("check")
}
