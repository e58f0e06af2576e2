package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/catalog"
	"goldbridge/serving/chlocal"
)

// TestQueryCountAppliesDeletes is issue 37's first observation: over an upsert table
// with equality deletes, ClickHouse 26.7.2 answered a bare count() from the snapshot
// summary (every version ever written: 47,453 where the table holds 30,303 rows).
// goldbridge query must count the rows a scan returns. The oracle is iceberg-go's scan
// of the same snapshot, deletes applied (and one row per key); the summary's
// total-records must differ from it, or the table would not test the shortcut.
func TestQueryCountAppliesDeletes(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts a local ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	state, cfgPath := filepath.Join(dir, "state"), filepath.Join(dir, "pipeline.yaml")
	writeOrdersConfig(t, cfgPath, func(map[string]any) {})
	gb := func(args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"-c", cfgPath, "--state-dir", state, "--log-level", "warn"}, args...)...)
		if code != exitOK {
			t.Fatalf("goldbridge %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	// Two landings, the second updating orders of the first: two Silver runs, the
	// second with equality deletes of the versions it replaced.
	input := filepath.Join(dir, "input")
	gb("demo", "generate", "--events", "4000", "--files", "2", "--seed", "5", "--out", input)
	for _, f := range []string{"orders-00001.jsonl", "orders-00002.jsonl"} {
		landSettled(t, filepath.Join(input, f), filepath.Join(state, "landing", "orders", f))
		gb("ingest")
		gb("silver")
	}

	rows, records, eqDeletes := silverOrdersOracle(t, state)
	if eqDeletes == 0 || records == rows {
		t.Fatalf("precondition: silver.orders has %d equality deletes, %d records in its files and %d rows: no deletes to count around", eqDeletes, records, rows)
	}
	want := strconv.Itoa(rows)
	for _, q := range []string{
		"SELECT count() FROM silver.orders",
		"SELECT count(*) FROM `silver`.`orders`",
		"SELECT count() FROM silver.orders WHERE 1",
		"SELECT count() FROM (SELECT * FROM silver.orders)",
		"SELECT uniqExact(order_id) FROM silver.orders",
	} {
		if got := strings.TrimSpace(gb("query", q+" FORMAT TSV")); got != want {
			t.Errorf("%s: %s, want %s (iceberg-go's scan; %d records in the files)", q, got, want, records)
		}
	}
}

// landSettled copies a landing file into place with a modification time an hour ago,
// older than the source's settle time.
func landSettled(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(b))
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dst, old, old); err != nil {
		t.Fatal(err)
	}
}

// silverOrdersOracle reads silver.orders with iceberg-go: the rows of its current
// snapshot (deletes applied; every key once), and from the snapshot summary the records
// in its data files and its equality delete records.
func silverOrdersOracle(t *testing.T, state string) (rows, records, eqDeletes int) {
	t.Helper()
	lh, err := catalog.Open(context.Background(), catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"),
		Warehouse: "file://" + filepath.Join(state, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	keys := map[string]bool{}
	scanStrings(t, lh, "silver.orders", "order_id", func(s string) {
		rows++
		keys[s] = true
	})
	if len(keys) != rows {
		t.Fatalf("oracle: %d rows hold %d keys", rows, len(keys))
	}
	tbl, err := lh.LoadTable(context.Background(), "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	p := tbl.CurrentSnapshot().Summary.Properties
	records, _ = strconv.Atoi(p["total-records"])
	eqDeletes, _ = strconv.Atoi(p["total-equality-deletes"])
	return rows, records, eqDeletes
}
