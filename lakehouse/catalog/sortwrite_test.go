package catalog_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/lakehousetest"
)

// A table with a sort order gets each written batch in that order: a batch in order
// already is written as it is (third_party patch 0004 skips the copy), one out of order
// is sorted (iceberg-go's Take), with the same rows either way.
func TestWriteSortsEachBatch(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	sch := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "k", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "v", Type: iceberg.PrimitiveTypes.String, Required: true})
	order, err := table.NewSortOrder(1, []table.SortField{{SourceIDs: []int{1}, Transform: iceberg.IdentityTransform{}, Direction: table.SortASC, NullOrder: table.NullsFirst}})
	if err != nil {
		t.Fatal(err)
	}
	tbl, _, err := lh.LoadOrCreateTable(ctx, "silver.sorted", sch, *iceberg.UnpartitionedSpec, iceberg.Properties{}, icecat.WithSortOrder(order))
	if err != nil {
		t.Fatal(err)
	}
	asch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.BinaryTypes.String}}, nil)
	for _, tc := range []struct {
		name string
		keys []int64
	}{
		{"in order", []int64{1, 2, 2, 5, 9}},
		{"out of order", []int64{9, 2, 5, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
			defer b.Release()
			for _, k := range tc.keys {
				b.Field(0).(*array.Int64Builder).Append(k)
				b.Field(1).(*array.StringBuilder).Append(strings.Repeat("x", int(k)))
			}
			rec := b.NewRecordBatch()
			defer rec.Release()
			batches := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
			var got []int64
			for df, err := range table.WriteRecords(ctx, tbl, asch, batches) {
				if err != nil {
					t.Fatal(err)
				}
				r, err := file.OpenParquetFile(strings.TrimPrefix(df.FilePath(), "file://"), false)
				if err != nil {
					t.Fatal(err)
				}
				fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
				if err != nil {
					t.Fatal(err)
				}
				read, err := fr.ReadTable(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, ch := range read.Column(0).Data().Chunks() {
					ks := ch.(*array.Int64)
					vs := read.Column(1).Data().Chunk(0).(*array.String)
					for i := range ks.Len() {
						got = append(got, ks.Value(i))
						if len(vs.Value(i)) != int(ks.Value(i)) {
							t.Fatalf("row %d: key %d with value %q: a column left behind", i, ks.Value(i), vs.Value(i))
						}
					}
				}
				read.Release()
				r.Close()
			}
			want := slices.Sorted(slices.Values(tc.keys))
			if !slices.Equal(got, want) {
				t.Fatalf("written %v, want %v", got, want)
			}
		})
	}
}
