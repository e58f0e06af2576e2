package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/serving/chlocal"
)

// TestQueryAsOf is issue 42's "what did the lake say at 9:00": goldbridge query read
// the current snapshot only. Three landings, each ingested and built into Silver, make
// three snapshots of bronze.orders and silver.orders. Read as of a Silver snapshot id
// (one with the equality deletes of its updates) and as of a commit time, the query
// returns what iceberg-go reads at that snapshot; Bronze as of a time and through the
// FOR VERSION / FOR TIMESTAMP clauses counts the lines of the files landed by then. After
// maintenance expires the older Bronze snapshots, the same references are refused
// (exit 2) naming the retention, never answered from another snapshot.
func TestQueryAsOf(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts a local ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	state, cfgPath := filepath.Join(dir, "state"), filepath.Join(dir, "pipeline.yaml")
	writeOrdersConfig(t, cfgPath, func(map[string]any) {})
	cli := func(args ...string) (int, string, string) {
		return runCLI(t, append([]string{"-c", cfgPath, "--state-dir", state, "--log-level", "warn"}, args...)...)
	}
	gb := func(args ...string) string {
		t.Helper()
		code, out, errs := cli(args...)
		if code != exitOK {
			t.Fatalf("goldbridge %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return strings.TrimSpace(out)
	}
	input := filepath.Join(dir, "input")
	gb("demo", "generate", "--events", "3000", "--files", "3", "--seed", "5", "--out", input)
	var (
		lines          []int // Bronze rows after each landing: the lines landed so far
		bronze, silver []table.Snapshot
	)
	for i := range 3 {
		f := fmt.Sprintf("orders-%05d.jsonl", i+1)
		landSettled(t, filepath.Join(input, f), filepath.Join(state, "landing", "orders", f))
		b, err := os.ReadFile(filepath.Join(input, f))
		if err != nil {
			t.Fatal(err)
		}
		prev := 0
		if i > 0 {
			prev = lines[i-1]
		}
		lines = append(lines, prev+bytes.Count(b, []byte("\n")))
		gb("ingest")
		time.Sleep(20 * time.Millisecond) // distinct commit milliseconds
		gb("silver")
		time.Sleep(20 * time.Millisecond)
		bronze = append(bronze, currentSnapshot(t, state, "bronze.orders"))
		silver = append(silver, currentSnapshot(t, state, "silver.orders"))
	}
	at := func(s table.Snapshot) string { return time.UnixMilli(s.TimestampMs).UTC().Format(time.RFC3339Nano) }
	id := func(s table.Snapshot) string { return strconv.FormatInt(s.SnapshotID, 10) }
	rowsQ := "SELECT order_id, status FROM silver.orders ORDER BY order_id, status FORMAT TSV"
	oracle := func(s table.Snapshot) string { return silverRowsAt(t, state, s.SnapshotID) }
	if oracle(silver[1]) == oracle(silver[2]) || silver[1].Summary.Properties["total-equality-deletes"] == "0" {
		t.Fatal("precondition: silver.orders at its second snapshot equals the current one, or has no deletes")
	}

	if got := gb("query", "--as-of", id(silver[1]), rowsQ); got != oracle(silver[1]) {
		t.Errorf("silver as of snapshot %d differs from iceberg-go's scan of it", silver[1].SnapshotID)
	}
	if got := gb("query", "--as-of", at(silver[0]), rowsQ); got != oracle(silver[0]) {
		t.Errorf("silver as of %s differs from iceberg-go's scan of snapshot %d", at(silver[0]), silver[0].SnapshotID)
	}
	both := "SELECT (SELECT count() FROM bronze.orders), (SELECT count() FROM silver.orders) FORMAT TSV"
	if got, want := gb("query", "--as-of", at(silver[0]), both), fmt.Sprintf("%d\t%d", lines[0], strings.Count(oracle(silver[0]), "\n")+1); got != want {
		t.Errorf("bronze and silver as of %s: %s, want %s", at(silver[0]), got, want)
	}
	clauses := fmt.Sprintf("SELECT (SELECT count() FROM bronze.orders FOR VERSION AS OF %d), (SELECT count() FROM `bronze`.`orders` for timestamp as of '%s'), (SELECT count() FROM bronze.orders) FORMAT TSV",
		bronze[0].SnapshotID, at(bronze[1]))
	if got, want := gb("query", clauses), fmt.Sprintf("%d\t%d\t%d", lines[0], lines[1], lines[2]); got != want {
		t.Errorf("bronze per clause: %s, want %s", got, want)
	}

	// Maintenance keeping one snapshot expires Bronze's first two (Silver starts from the third).
	writeOrdersConfig(t, cfgPath, func(cfg map[string]any) {
		cfg["maintenance"] = map[string]any{"retain_age": "0s", "retain_min": 1}
	})
	gb("maintain", "bronze.orders")
	for _, ref := range []string{id(bronze[0]), at(bronze[1])} {
		code, out, errs := cli("query", "--as-of", ref, "SELECT count() FROM bronze.orders FORMAT TSV")
		if code != exitUsage || out != "" || !strings.Contains(errs, "bronze.orders as of ") ||
			!strings.Contains(errs, "maintenance.retain_age (0s for it) beyond its 1 newest (retain_min)") {
			t.Errorf("as of expired %s: exit %d, out %q\n%s", ref, code, out, errs)
		}
	}
	if got := gb("query", "--as-of", id(bronze[2]), "SELECT count() FROM bronze.orders FORMAT TSV"); got != strconv.Itoa(lines[2]) {
		t.Errorf("bronze as of its kept snapshot: %s, want %d", got, lines[2])
	}
}

// currentSnapshot is a table's current snapshot, read by iceberg-go.
func currentSnapshot(t *testing.T, state, ident string) table.Snapshot {
	t.Helper()
	lh := openStateLake(t, state)
	defer lh.Close()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return *tbl.CurrentSnapshot()
}

// silverRowsAt reads silver.orders at a snapshot with iceberg-go (deletes applied):
// "order_id\tstatus" lines, sorted.
func silverRowsAt(t *testing.T, state string, snapshot int64) string {
	t.Helper()
	ctx := context.Background()
	lh := openStateLake(t, state)
	defer lh.Close()
	tbl, err := lh.LoadTable(ctx, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan(table.WithSnapshotID(snapshot), table.WithSelectedFields("order_id", "status")).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		ids, st := rec.Column(rec.Schema().FieldIndices("order_id")[0]).(*array.String), rec.Column(rec.Schema().FieldIndices("status")[0]).(*array.String)
		for i := range ids.Len() {
			out = append(out, ids.Value(i)+"\t"+st.Value(i))
		}
		rec.Release()
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

func openStateLake(t *testing.T, state string) *catalog.Lakehouse {
	t.Helper()
	lh, err := catalog.Open(context.Background(), catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"),
		Warehouse: "file://" + filepath.Join(state, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	return lh
}
