package gold

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
)

// grainCounts returns a Gold table's rows per grain value (days for a date grain,
// microseconds for a timestamp) from its manifests, without opening a data file: Gold
// is partitioned by identity on the grain and replaces whole files, so a partition's
// record count is its row count. ok is false when a partition has delete files or the
// table is not partitioned by the grain (then the caller scans the grain column).
func grainCounts(ctx context.Context, tbl *table.Table, grain string) (counts map[int64]int64, ok bool, err error) {
	counts = map[int64]int64{}
	if tbl.CurrentSnapshot() == nil {
		return counts, true, nil
	}
	rr, err := tbl.Inspect().Partitions(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("gold partitions of %s: %w", tbl.Identifier(), err)
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		sch := rec.Schema()
		col := func(name string) *array.Int64 {
			ix := sch.FieldIndices(name)
			if len(ix) == 0 {
				return nil
			}
			c, _ := rec.Column(ix[0]).(*array.Int64)
			return c
		}
		pix := sch.FieldIndices("partition")
		rc, pd, ed := col("record_count"), col("position_delete_record_count"), col("equality_delete_record_count")
		if len(pix) == 0 || rc == nil || pd == nil || ed == nil {
			return nil, false, nil
		}
		pcol, isStruct := rec.Column(pix[0]).(*array.Struct)
		if !isStruct {
			return nil, false, nil
		}
		fi, found := pcol.DataType().(*arrow.StructType).FieldIdx(grain)
		if !found {
			return nil, false, nil
		}
		vals := pcol.Field(fi)
		for i := range int(rec.NumRows()) {
			if pd.Value(i) > 0 || ed.Value(i) > 0 {
				return nil, false, nil
			}
			if vals.IsNull(i) {
				continue
			}
			var g int64
			switch v := vals.(type) {
			case *array.Date32:
				g = int64(v.Value(i))
			case *array.Int32:
				g = int64(v.Value(i))
			case *array.Timestamp:
				g = int64(v.Value(i))
			case *array.Int64:
				g = v.Value(i)
			default:
				return nil, false, nil
			}
			counts[g] += rc.Value(i)
		}
	}
	if err := rr.Err(); err != nil {
		return nil, false, fmt.Errorf("gold partitions of %s: %w", tbl.Identifier(), err)
	}
	return counts, true, nil
}
