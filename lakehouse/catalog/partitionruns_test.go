package catalog_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/lakehousetest"
)

// TestPartitionRuns checks iceberg-go patch 0005 (a row whose partition source values
// equal the row before's goes to that row's partition without a transform): one batch
// whose rows come in runs of a day, of a name and of nulls, with runs that return to
// an earlier partition, written to a table partitioned by day(ts) and one partitioned
// by name. The oracle is each row's own partition, computed here from the file's rows:
// every data file holds one partition's rows, no two files the same, and every row is
// written once.
func TestPartitionRuns(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	names := []string{"a", "a", "", "", "b", "a", "a", "", "b", "b", "c", ""}
	var rows []row
	for i, n := range names {
		// days in runs: 0 0 0 1 1 0 0 2 2 2 1 1
		day := []int{0, 0, 0, 1, 1, 0, 0, 2, 2, 2, 1, 1}[i]
		rows = append(rows, row{int64(i), n, day0.Add(time.Duration(day)*24*time.Hour + time.Duration(i)*time.Second), "1.00"})
	}
	specs := map[string]iceberg.PartitionSpec{
		"silver.by_day": testSpec(),
		"silver.by_name": iceberg.NewPartitionSpec(iceberg.PartitionField{
			SourceIDs: []int{2}, FieldID: 1000, Name: "name", Transform: iceberg.IdentityTransform{},
		}),
	}
	for ident, spec := range specs {
		tbl, _, err := lh.LoadOrCreateTable(ctx, ident, testSchema(), spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		files := writeFiles(t, tbl, rows)
		seen, total := map[string]string{}, 0
		for _, df := range files {
			part := map[string]bool{}
			for _, r := range fileRows(t, df.FilePath()) {
				if ident == "silver.by_day" {
					part[r.TS.Format(time.DateOnly)] = true
				} else {
					part[fmt.Sprintf("%q", r.Name)] = true
				}
				total++
			}
			if len(part) != 1 {
				t.Fatalf("%s: file %s holds the rows of partitions %v", ident, df.FilePath(), part)
			}
			for p := range part {
				if other, ok := seen[p]; ok {
					t.Fatalf("%s: partition %s in two files: %s and %s", ident, p, other, df.FilePath())
				}
				seen[p] = df.FilePath()
			}
		}
		if total != len(rows) || len(seen) != map[string]int{"silver.by_day": 3, "silver.by_name": 4}[ident] {
			t.Fatalf("%s: %d rows in %d partitions, want %d rows", ident, total, len(seen), len(rows))
		}
	}
}

// fileRows reads a data file's rows.
func fileRows(t *testing.T, path string) []row {
	t.Helper()
	f, err := os.Open(strings.TrimPrefix(path, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := pqarrow.ReadTable(context.Background(), f, parquet.NewReaderProperties(memory.DefaultAllocator),
		pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Release()
	return arrowRows(t, tab)
}
