package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"goldbridge/serving/chlocal"
)

// TestEmbeddedDiskBounded (issue 36): the orders example run as from cron, each run
// landing one new file of 1,000 events, 12 times against the embedded ClickHouse, which
// lives for the seconds of each run. Afterwards its data directory holds at most 3× the
// part directories and 2× the bytes of the one of a lake that got the same files in one
// run (before PromptCleanup, ClickHouse deleted neither replaced parts nor dropped
// tables: 180 such runs left 546 MB for 5.5 MB of live parts), the last run's metrics
// report that directory as measured and the served table's parts, and check is clean.
func TestEmbeddedDiskBounded(t *testing.T) {
	const runs, events = 12, 1000
	inc := newExampleEnv(t, "orders.yaml", func(cfg map[string]any) {
		cfg["metrics"] = map[string]any{"textfile": "${STATE_DIR}/goldbridge.prom"}
	})
	gen := t.TempDir()
	inc.run("demo", "generate", "--events", strconv.Itoa(runs*events), "--files", strconv.Itoa(runs), "--days", "80", "--seed", "36", "--out", gen)
	files, err := filepath.Glob(filepath.Join(gen, "orders-*.jsonl"))
	if err != nil || len(files) != runs {
		t.Fatalf("%d landing files (%v), want %d", len(files), err, runs)
	}
	land := func(e *forgetEnv, f string) {
		t.Helper()
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(e.landing(), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(e.landing(), filepath.Base(f)), string(b))
	}
	usage := func(e *forgetEnv) chlocal.Usage {
		t.Helper()
		u, err := chlocal.DiskUsage(filepath.Join(e.state, "clickhouse"))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for i, f := range files {
		land(inc, f)
		inc.run("run")
		if i%4 == 3 {
			u := usage(inc)
			t.Logf("after run %d: %d part directories, %d bytes", i+1, u.PartDirs, u.Bytes)
		}
	}
	got := usage(inc)

	one := newExampleEnv(t, "orders.yaml")
	for _, f := range files {
		land(one, f)
	}
	one.run("run")
	want := usage(one)
	t.Logf("%d runs: %d part directories, %d bytes; one run: %d, %d", runs, got.PartDirs, got.Bytes, want.PartDirs, want.Bytes)
	if got.PartDirs > 3*want.PartDirs || got.Bytes > 2*want.Bytes {
		t.Errorf("after %d runs the embedded ClickHouse holds %d part directories and %d bytes; one run over the same files: %d and %d (bounds 3× and 2×)",
			runs, got.PartDirs, got.Bytes, want.PartDirs, want.Bytes)
	}

	prom := textfileValues(t, filepath.Join(inc.state, "goldbridge.prom"))
	for name, v := range map[string]int64{
		"goldbridge_clickhouse_data_part_directories": int64(got.PartDirs),
		"goldbridge_clickhouse_data_bytes":            got.Bytes,
	} {
		if s, ok := prom[name]; !ok || s != strconv.FormatFloat(float64(v), 'g', -1, 64) {
			t.Errorf("%s = %q (present %v), measured %d", name, s, ok, v)
		}
	}
	const mart = `{mart="daily_revenue_kpi"}`
	// About one part a partition after a push: a partition whose grains span two insert
	// blocks gets two parts until a background merge (serving/push groups.go; CI saw 86
	// parts for 80 partitions once).
	parts, hot := prom["goldbridge_clickhouse_parts"+mart], prom[`goldbridge_hot_partitions{mart="daily_revenue_kpi",tier="clickhouse"}`]
	np, errP := strconv.Atoi(parts)
	nh, errH := strconv.Atoi(hot)
	if errP != nil || errH != nil || nh == 0 || np < nh || np > 2*nh {
		t.Errorf("goldbridge_clickhouse_parts = %q, hot partitions %q: want one or two parts a partition", parts, hot)
	}
	for _, name := range []string{"goldbridge_clickhouse_bytes", "goldbridge_clickhouse_inactive_parts", "goldbridge_clickhouse_inactive_bytes"} {
		if _, ok := prom[name+mart]; !ok {
			t.Errorf("%s missing from the textfile", name)
		}
	}

	if out := inc.stdout("check"); out != "check daily_revenue_kpi: no drift\n" {
		t.Errorf("check: %q", out)
	}
}

// textfileValues reads a Prometheus text file: series (name and labels) → value.
func textfileValues(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("%s: line %q", path, line)
		}
		out[line[:i]] = line[i+1:]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	return out
}
