package compact

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// A table with a sort order (Silver's sort_by: a mart's grain) is written sorted, so
// that readers skip row groups by the sort columns' bounds (Gold's passes and
// incremental scans read only their days). iceberg-go's ExecuteCompactionGroup writes
// the rows in the order it reads them, which concatenates the sorted files of a
// partition into one unsorted file; rewriteSorted sorts the partition's rows first.
// It holds one partition's rows in memory (a Silver bucket: the table's rows divided by
// its buckets), one partition at a time.

// sortKeys returns the sort keys of tbl's sort order over the columns of schema, or nil
// when the table is not sorted (or is sorted by a transform: not preserved).
func sortKeys(tbl *table.Table, schema *arrow.Schema) []compute.SortKey {
	var keys []compute.SortKey
	for _, f := range tbl.SortOrder().Fields() {
		if _, ok := f.Transform.(iceberg.IdentityTransform); !ok {
			return nil
		}
		col, ok := tbl.Schema().FindFieldByID(f.SourceID())
		if !ok {
			return nil
		}
		idx := schema.FieldIndices(col.Name)
		if len(idx) != 1 {
			return nil
		}
		k := compute.SortKey{ColumnIndex: idx[0], Order: compute.SortOrderAscending, NullPlacement: compute.SortNullsAtEnd}
		if f.Direction == table.SortDESC {
			k.Order = compute.SortOrderDescending
		}
		if f.NullOrder == table.NullsFirst {
			k.NullPlacement = compute.SortNullsAtStart
		}
		keys = append(keys, k)
	}
	return keys
}

// rewrite rewrites a group's files into new ones, sorted by the table's sort order when
// it has one.
func rewrite(ctx context.Context, tbl *table.Table, g table.CompactionTaskGroup) (table.CompactionGroupResult, error) {
	if tbl.SortOrder().Len() == 0 {
		return table.ExecuteCompactionGroup(ctx, tbl, g)
	}
	schema, recs, err := tbl.Scan().ReadTasks(ctx, g.Tasks)
	if err != nil {
		return table.CompactionGroupResult{}, fmt.Errorf("read partition %s: %w", g.PartitionKey, err)
	}
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	for rec, err := range recs {
		if err != nil {
			return table.CompactionGroupResult{}, fmt.Errorf("read partition %s: %w", g.PartitionKey, err)
		}
		batches = append(batches, rec)
	}
	keys := sortKeys(tbl, schema)
	if keys == nil {
		return table.ExecuteCompactionGroup(ctx, tbl, g)
	}
	all := array.NewTableFromRecords(schema, batches)
	defer all.Release()
	idx, err := compute.SortIndicesTable(ctx, all, keys)
	if err != nil {
		return table.CompactionGroupResult{}, fmt.Errorf("sort partition %s: %w", g.PartitionKey, err)
	}
	defer idx.Release()
	sorted, err := compute.Take(ctx, *compute.DefaultTakeOptions(), compute.NewDatum(all), compute.NewDatum(idx))
	if err != nil {
		return table.CompactionGroupResult{}, fmt.Errorf("sort partition %s: %w", g.PartitionKey, err)
	}
	st := sorted.(*compute.TableDatum).Value
	defer st.Release()
	res := table.CompactionGroupResult{PartitionKey: g.PartitionKey, BytesBefore: g.TotalSizeBytes,
		SafePosDeletes: table.CollectSafePositionDeletes(g.Tasks), SafeDeletionVectors: table.CollectSafeDeletionVectors(g.Tasks)}
	for _, t := range g.Tasks {
		res.OldDataFiles = append(res.OldDataFiles, t.File)
	}
	reader := array.NewTableReader(st, 1<<16)
	defer reader.Release()
	records := func(yield func(arrow.RecordBatch, error) bool) {
		for reader.Next() {
			rec := reader.RecordBatch()
			rec.Retain() // WriteRecords releases what it consumes
			if !yield(rec, nil) {
				return
			}
		}
		if err := reader.Err(); err != nil {
			yield(nil, err)
		}
	}
	files, err := catalog.WriteDataFiles(ctx, tbl, schema, records, table.WithClusteredWrite())
	res.NewDataFiles = append(res.NewDataFiles, files...)
	if err != nil {
		return res, fmt.Errorf("write partition %s: %w", g.PartitionKey, err)
	}
	for _, df := range files {
		res.BytesAfter += df.FileSizeBytes()
	}
	return res, nil
}
