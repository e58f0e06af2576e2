package catalog

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// WriteDataFiles writes records as data files of tbl (table.WriteRecords; nothing is
// committed) and returns them once they hold exactly the rows records yielded. A writer
// that returned fewer rows than it was handed, without an error, is an error here: a
// commit of its files would lose rows silently (iceberg-go v0.7.0 lost the error of a
// partition writer that failed after its last batch; see third_party/README.md, patch
// 0006). On error, the files already written are the caller's to discard.
func WriteDataFiles(ctx context.Context, tbl *table.Table, sch *arrow.Schema, records iter.Seq2[arrow.RecordBatch, error], opts ...table.WriteRecordOption) ([]iceberg.DataFile, error) {
	var handed atomic.Int64 // the writer's feeder runs on a goroutine of its own
	counted := func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range records {
			if err == nil {
				handed.Add(rec.NumRows())
			}
			if !yield(rec, err) {
				return
			}
		}
	}
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, sch, counted, opts...) {
		if err != nil {
			return files, err
		}
		files = append(files, df)
	}
	return files, holdAll(files, handed.Load())
}

// holdAll returns an error unless files hold exactly handed rows.
func holdAll(files []iceberg.DataFile, handed int64) error {
	var written int64
	for _, df := range files {
		written += df.Count()
	}
	if written != handed {
		return fmt.Errorf("the data files hold %d rows of the %d written, and the writer reported no error", written, handed)
	}
	return nil
}
