package silver

import (
	"context"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/filescan"
)

// Bronze files are read with filescan (the Parquet reader directly). Bronze is
// append-only and `forget` rewrites files (copy-on-write), so its tasks carry no
// deletes (a task that does is read through the table scan instead); the lookup of
// stored Silver versions does not need them (see storedRows).

// readBronzeFiles yields the Bronze columns fields of each task's file in batches of
// bronzeReadBatch rows, in task order.
func readBronzeFiles(ctx context.Context, bt *table.Table, tasks []table.FileScanTask, fields []string, mem memory.Allocator) iter.Seq2[arrow.RecordBatch, error] {
	check := func(f arrow.Field) error {
		if !bronzeType(f.Name, f.Type) {
			return fmt.Errorf("bronze column %s has type %s", f.Name, f.Type)
		}
		return nil
	}
	return filescan.Read(ctx, bt, tasks, fields, filescan.Options{BatchRows: bronzeReadBatch, Check: check, Mem: mem})
}

// bronzeType reports whether a Bronze column was read with the Arrow type Silver expects.
func bronzeType(name string, t arrow.DataType) bool {
	switch name {
	case bronze.ColIngestTS:
		_, ok := t.(*arrow.TimestampType)
		return ok
	case bronze.ColSourcePos:
		return t.ID() == arrow.INT64
	}
	return t.ID() == arrow.STRING
}
