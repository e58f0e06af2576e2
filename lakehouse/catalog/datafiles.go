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
	counted, handed := CountRows(records)
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, sch, counted, opts...) {
		if err != nil {
			return files, err
		}
		files = append(files, df)
	}
	return files, HoldAll(files, handed())
}

// CountRows returns records as they are, and a function that tells how many rows they
// have yielded so far (safe to call from another goroutine than the consumer's).
func CountRows(records iter.Seq2[arrow.RecordBatch, error]) (iter.Seq2[arrow.RecordBatch, error], func() int64) {
	var handed atomic.Int64 // a writer's feeder runs on a goroutine of its own
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
	return counted, handed.Load
}

// HoldAll returns an error unless files (data or delete files) hold exactly handed rows:
// what a writer that reported no error must have written (see WriteDataFiles).
func HoldAll(files []iceberg.DataFile, handed int64) error {
	var written int64
	for _, df := range files {
		written += df.Count()
	}
	if written != handed {
		return fmt.Errorf("the files hold %d rows of the %d written, and the writer reported no error", written, handed)
	}
	return nil
}
