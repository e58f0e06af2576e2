package silver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/table"

	"goldbridge/demo"
	"goldbridge/lakehouse/lakehousetest"
)

// With sort_by, the table carries the Iceberg sort order and every data file holds its
// rows in that order (what lets a scan on the column skip row groups); the content is
// the same as without it.
func TestSortedSilverFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: dir, Events: 40000, Seed: 9, Files: 2, End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	run := func(sortBy []string) (map[string]string, *table.Table) {
		lh := lakehousetest.Open(t)
		ingest(t, lh, dir)
		spec := ordersSpec()
		spec.SortBy = sortBy
		spec.Buckets = 16 // at least two per winners shard: each file is written from one shard
		if _, err := Run(ctx, lh, spec, "bronze.orders", Options{}); err != nil {
			t.Fatal(err)
		}
		tbl, err := lh.LoadTable(ctx, "silver.orders")
		if err != nil {
			t.Fatal(err)
		}
		return silverRows(t, lh), tbl
	}
	plain, _ := run(nil)
	sorted, st := run([]string{"created_at"})
	if len(sorted) != len(plain) {
		t.Fatalf("%d rows sorted, %d unsorted", len(sorted), len(plain))
	}
	for k, v := range plain {
		if sorted[k] != v {
			t.Fatalf("key %s: sorted %q, unsorted %q", k, sorted[k], v)
		}
	}
	created, _ := st.Schema().FindFieldByName("created_at")
	var orderIDs []int
	for _, f := range st.SortOrder().Fields() {
		orderIDs = append(orderIDs, f.SourceIDs...)
	}
	if len(orderIDs) != 1 || orderIDs[0] != created.ID {
		t.Fatalf("sort order source ids %v, want [%d] (created_at)", orderIDs, created.ID)
	}
	tasks, err := st.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		path := strings.TrimPrefix(task.File.FilePath(), "file://")
		r, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		col := tbl.Column(int(tbl.Schema().FieldIndices("created_at")[0]))
		prev, seenValue := int64(0), false
		for _, ch := range col.Data().Chunks() {
			ts := ch.(*array.Timestamp)
			for i := range ts.Len() {
				if ts.IsNull(i) {
					if seenValue {
						t.Fatalf("%s: a NULL created_at after values (nulls first)", path)
					}
					continue
				}
				v := int64(ts.Value(i))
				if seenValue && v < prev {
					t.Fatalf("%s: created_at %d after %d", path, v, prev)
				}
				prev, seenValue = v, true
			}
		}
		tbl.Release()
		r.Close()
	}
}
