package silver

import (
	"context"
	"fmt"
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
	checkSorted(t, tasks, "created_at")
}

// checkSorted fails unless every file of tasks holds its rows in col's order (a
// timestamp column, nulls first).
func checkSorted(t *testing.T, tasks []table.FileScanTask, col string) {
	t.Helper()
	ctx := context.Background()
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
		c := tbl.Column(tbl.Schema().FieldIndices(col)[0])
		prev, seenValue := int64(0), false
		for _, ch := range c.Data().Chunks() {
			ts := ch.(*array.Timestamp)
			for i := range ts.Len() {
				if ts.IsNull(i) {
					if seenValue {
						t.Fatalf("%s: a NULL %s after values (nulls first)", path, col)
					}
					continue
				}
				v := int64(ts.Value(i))
				if seenValue && v < prev {
					t.Fatalf("%s: %s %d after %d", path, col, v, prev)
				}
				prev, seenValue = v, true
			}
		}
		tbl.Release()
		r.Close()
	}
}

// A pass writes one data file per partition, with the same rows as unsorted, in the
// sort_by order across batches: where each bucket is one shard's (the fanout, one
// worker: several had handed a bucket's batches over in any order), where the shards
// share buckets, and where they share days (an append table partitioned by day, sorted
// by another column); in the last two the shards' runs are merged (writeData).
func TestOneFilePerPartition(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: dir, Events: 20000, Seed: 5, Files: 2, Days: 20, End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spec  func() EntitySpec
		parts int // at least
	}{
		{"buckets", func() EntitySpec {
			spec := ordersSpec()
			spec.Buckets = 16
			return spec
		}, 16},
		{"shared buckets", func() EntitySpec {
			spec := ordersSpec()
			spec.Buckets = 2 // fewer than two a shard: every shard has rows of both
			return spec
		}, 2},
		{"days", func() EntitySpec {
			spec := ordersSpec()
			spec.Mode, spec.EventTime, spec.UpdatedAt, spec.Op = ModeAppend, "created_at", "", ""
			return spec
		}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(sortBy []string) ([]string, []table.FileScanTask) {
				lh := lakehousetest.Open(t)
				ingest(t, lh, dir)
				spec := tc.spec()
				spec.SortBy = sortBy
				// Batches of 500 rows: a day's rows span batches, which iceberg-go sorts
				// each on its own.
				if _, err := Run(ctx, lh, spec, "bronze.orders", Options{writeBatch: 500}); err != nil {
					t.Fatal(err)
				}
				tbl, err := lh.LoadTable(ctx, spec.Table)
				if err != nil {
					t.Fatal(err)
				}
				tasks, err := tbl.Scan().PlanFiles(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return tableRows(t, lh, spec.Table, ColRunID, ColUpdatedTS, ColEventID), tasks
			}
			plain, _ := run(nil)
			sorted, tasks := run([]string{"updated_at"})
			if len(plain) == 0 || len(sorted) != len(plain) {
				t.Fatalf("%d rows sorted, %d unsorted", len(sorted), len(plain))
			}
			for i := range plain {
				if sorted[i] != plain[i] {
					t.Fatalf("row %d sorted\n %s\nunsorted\n %s", i, sorted[i], plain[i])
				}
			}
			parts := map[string]string{}
			for _, task := range tasks {
				p := fmt.Sprint(task.File.Partition())
				if other, ok := parts[p]; ok {
					t.Fatalf("partition %s in two files: %s and %s", p, other, task.File.FilePath())
				}
				parts[p] = task.File.FilePath()
			}
			if len(parts) < min(10, tc.parts) {
				t.Fatalf("%d partitions: the test would prove little", len(parts))
			}
			checkSorted(t, tasks, "updated_at")
		})
	}
}
