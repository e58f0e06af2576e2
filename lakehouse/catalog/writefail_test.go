package catalog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// A partition writer that fails reports its error however the batches fall: its
// partition's directory is blocked (a regular file where the writer makes it), it gets
// the last batch or an earlier one, and the other partition's files are written. Without
// third_party patch 0006, a writer that failed after its last batch was dropped with its
// error, and the write ended with the other partition's files only.
func TestPartitionWriterFailureIsReported(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	sch := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "p", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 2, Name: "v", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "p", Transform: iceberg.IdentityTransform{}})
	tbl, _, err := lh.LoadOrCreateTable(ctx, "silver.parts", sch, spec, iceberg.Properties{})
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(strings.TrimPrefix(tbl.Location(), "file://"), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "p=bad"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	asch := arrow.NewSchema([]arrow.Field{{Name: "p", Type: arrow.BinaryTypes.String}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	batch := func(p string, n int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		defer b.Release()
		for i := range n {
			b.Field(0).(*array.StringBuilder).Append(p)
			b.Field(1).(*array.Int64Builder).Append(int64(i))
		}
		return b.NewRecordBatch()
	}
	for _, order := range [][]string{{"ok", "bad"}, {"bad", "ok"}, {"ok", "ok", "bad"}, {"bad"}} {
		for round := range 10 { // whether an Add sees the failure first depends on timing
			t.Run(fmt.Sprintf("%s/%d", strings.Join(order, "-"), round), func(t *testing.T) {
				records := func(yield func(arrow.RecordBatch, error) bool) {
					for _, p := range order {
						if !yield(batch(p, 100), nil) {
							return
						}
					}
				}
				var files []iceberg.DataFile
				var werr error
				for df, err := range table.WriteRecords(ctx, tbl, asch, records) {
					if err != nil {
						werr = err
						break
					}
					files = append(files, df)
				}
				if werr == nil || !strings.Contains(werr.Error(), "not a directory") {
					t.Fatalf("table.WriteRecords: error %v with %d files, want the blocked partition's error", werr, len(files))
				}
				if _, err := catalog.WriteDataFiles(ctx, tbl, asch, records); err == nil || !strings.Contains(err.Error(), "not a directory") {
					t.Fatalf("WriteDataFiles: error %v, want the blocked partition's error", err)
				}
			})
		}
	}
}
