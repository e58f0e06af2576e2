package gold

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestCommitConflictWritesOnce: a commit that loses to a concurrent writer is retried by
// committing the files already written, never by writing them again (issue 22). The
// race is a snapshot committed between the attempt's load and its commit, which the SQL
// catalog refuses with the unwrapped "requirement failed: branch main has changed"
// (table.ErrCommitFailed, the other form, goes through the same retry: IsConflict).
// Gold ends equal to a full run, and no data file in the warehouse is unreferenced.
func TestCommitConflictWritesOnce(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		race func(t *testing.T, lh *catalog.Lakehouse, ident string)
	}{
		{"branch changed", func(t *testing.T, lh *catalog.Lakehouse, ident string) {
			if _, err := lh.Seal(ctx, ident, nil); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			lh := lakehousetest.OpenDir(t, dir)
			landing := t.TempDir()
			writeOrders(t, landing, "a.jsonl", 0)
			loadAndSilver(t, lh, landing)
			m := kpiMart("gold.kpi")
			if _, err := Run(ctx, lh, m, Options{}); err != nil {
				t.Fatal(err)
			}
			writeOrders(t, landing, "b.jsonl", 100)
			loadAndSilver(t, lh, landing)
			var attempts []int
			opt := Options{beforeCommit: func(attempt int) {
				attempts = append(attempts, attempt)
				if attempt == 1 {
					c.race(t, lh, m.Table)
				}
			}}
			if _, err := Run(ctx, lh, m, opt); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(attempts, []int{1, 2}) {
				t.Fatalf("commit attempts %v, want [1 2] (the race must cost exactly one retry)", attempts)
			}
			full := kpiMart("gold.kpi_full")
			if _, err := Run(ctx, lh, full, Options{Full: true}); err != nil {
				t.Fatal(err)
			}
			if a, b := goldRows(t, lh, m.Table), goldRows(t, lh, full.Table); !slices.Equal(a, b) {
				t.Fatalf("after the retried commit (%d rows) != full run (%d rows)", len(a), len(b))
			}
			tbl, err := lh.LoadTable(ctx, m.Table)
			if err != nil {
				t.Fatal(err)
			}
			orphans, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(0))
			if err != nil {
				t.Fatal(err)
			}
			var data []string
			for _, f := range orphans.Files() {
				if filepath.Ext(f) == ".parquet" {
					data = append(data, f)
				}
			}
			if len(data) > 0 {
				t.Errorf("%d unreferenced Gold data files after one retried commit: %v", len(data), data)
			}
		})
	}
}

// writeOrders writes 30 orders (ids from first+1) over three days to landing/name.
func writeOrders(t *testing.T, landing, name string, first int) {
	t.Helper()
	var b []byte
	for i := range 30 {
		b = fmt.Appendf(b, `{"order_id":"o%d","user_id":"u%d","amount":%d.25,"country":"US","category":"c%d","created_at":"2026-03-0%dT10:00:00Z","updated_at":"2026-03-04T10:00:00Z","op":"c"}`+"\n",
			first+i+1, i%7, 10+i, i%3, 1+i%3)
	}
	if err := os.WriteFile(filepath.Join(landing, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
