package silver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/bronze"
)

// Data files are read here with the Parquet reader directly rather than through the
// table scan: iceberg-go's reader grows each string column of every batch by doubling
// (copy + zeroing, ~25% of Silver's CPU at 10M events), while the Parquet reader can
// size it once from the row group's metadata (PreAllocBinaryData). Delete files are not
// applied. Bronze is append-only and `forget` rewrites files (copy-on-write), so its
// tasks carry none (a task that does is read through the table scan instead); the
// lookup of stored Silver versions does not need them (see storedRows).

// directReadable reports whether every task is a Parquet data file (or a split of one)
// without deletes.
func directReadable(tasks []table.FileScanTask) bool {
	for _, t := range tasks {
		if len(t.DeleteFiles) > 0 || len(t.EqualityDeleteFiles) > 0 || len(t.DeletionVectorFiles) > 0 ||
			t.File.FileFormat() != iceberg.ParquetFile {
			return false
		}
	}
	return true
}

// readBronzeFiles yields the Bronze columns of each task's file in batches of
// bronzeReadBatch rows, in task order.
func readBronzeFiles(ctx context.Context, bt *table.Table, tasks []table.FileScanTask, mem memory.Allocator) iter.Seq2[arrow.RecordBatch, error] {
	check := func(f arrow.Field) error {
		if !bronzeType(f.Name, f.Type) {
			return fmt.Errorf("bronze column %s has type %s", f.Name, f.Type)
		}
		return nil
	}
	return readTaskFiles(ctx, bt, tasks, bronzeFields, check, mem)
}

// readTaskFiles yields the columns fields (top-level, by name) of each task's data file
// as written, without applying delete files, in task order; check vets each column's
// Arrow type.
func readTaskFiles(ctx context.Context, tbl *table.Table, tasks []table.FileScanTask, fields []string,
	check func(arrow.Field) error, mem memory.Allocator) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		fs, err := tbl.FS(ctx)
		if err != nil {
			yield(nil, fmt.Errorf("%s file system: %w", tbl.Identifier(), err))
			return
		}
		for _, t := range tasks {
			if !readTaskFile(ctx, fs, t, fields, check, mem, yield) {
				return
			}
		}
	}
}

// readTaskFile yields one file's batches; false means stop (the consumer said so, or
// an error was yielded).
func readTaskFile(ctx context.Context, fs icebergio.IO, t table.FileScanTask, fields []string, check func(arrow.Field) error,
	mem memory.Allocator, yield func(arrow.RecordBatch, error) bool) bool {
	path := t.File.FilePath()
	fail := func(err error) bool {
		yield(nil, fmt.Errorf("read %s: %w", path, err))
		return false
	}
	f, err := fs.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		return fail(err)
	}
	defer pr.Close()
	cols := make([]int, 0, len(fields))
	for _, name := range fields {
		i := pr.MetaData().Schema.ColumnIndexByName(name)
		if i < 0 {
			return fail(fmt.Errorf("no column %s", name))
		}
		cols = append(cols, i)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: bronzeReadBatch, PreAllocBinaryData: true}, mem)
	if err != nil {
		return fail(err)
	}
	rgs := taskRowGroups(pr, t)
	if rgs != nil && len(rgs) == 0 { // no row group of the file starts in the task's split
		return true
	}
	rr, err := fr.GetRecordReader(ctx, cols, rgs)
	if err != nil {
		return fail(err)
	}
	defer rr.Release()
	for _, fld := range rr.Schema().Fields() {
		if err := check(fld); err != nil {
			return fail(err)
		}
	}
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		if !yield(rec, nil) {
			return false
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fail(err)
	}
	return true
}

// taskRowGroups returns the row groups of a split task: those starting in
// [Start, Start+Length), like iceberg-go's reader; nil (all) for a whole-file task.
func taskRowGroups(pr *file.Reader, t table.FileScanTask) []int {
	if t.Start == 0 && (t.Length == 0 || t.Length == t.File.FileSizeBytes()) {
		return nil
	}
	md := pr.MetaData()
	planned := t.File.SplitOffsets()
	rgs := []int{}
	for i := range pr.NumRowGroups() {
		off := rowGroupOffset(md.RowGroup(i))
		if len(planned) == pr.NumRowGroups() {
			off = planned[i]
		}
		if off >= t.Start && off < t.Start+t.Length {
			rgs = append(rgs, i)
		}
	}
	return rgs
}

// rowGroupOffset is where a row group starts in its file: its first column chunk's
// dictionary or first data page.
func rowGroupOffset(rg *metadata.RowGroupMetaData) int64 {
	if rg.NumColumns() > 0 {
		if cc, err := rg.ColumnChunk(0); err == nil {
			off := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() >= 0 && (off < 0 || cc.DictionaryPageOffset() < off) {
				off = cc.DictionaryPageOffset()
			}
			if off >= 0 {
				return off
			}
		}
	}
	return rg.FileOffset()
}

// bronzeType reports whether a Bronze column was read with the Arrow type Silver expects.
func bronzeType(name string, t arrow.DataType) bool {
	if name == bronze.ColIngestTS {
		_, ok := t.(*arrow.TimestampType)
		return ok
	}
	return t.ID() == arrow.STRING
}
