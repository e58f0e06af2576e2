package gold

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/arrowmem"
	"goldbridge/lakehouse/filescan"
)

// readSilverDirect reads the live Silver rows of tasks (columns fields, in that order)
// with filescan instead of iceberg-go's scan, which regrows its buffers per batch and
// runs a filter kernel over every batch it applies deletes to (~1.5 µs a row: most of an
// incremental Gold run at 10M events). Row groups whose statistics of column grain
// miss every range [lo, hi) are skipped (Silver sorted on the grain, see silver
// sort_by), and so are the rows outside the ranges in a sorted file (in an unsorted one
// the caller skips them); rows without a grain value are kept with nulls. The equality
// deletes attached to each task are applied: a row whose key is in one of them is
// dropped.
//
// ok is false, and nothing is read, when the tasks need the table scan: an evolved
// schema, a file that is not Parquet, positional deletes or deletion vectors, or
// equality deletes on other columns than one shared key.
func readSilverDirect(ctx context.Context, tbl *table.Table, tasks []table.FileScanTask, fields []string, grain string, ranges [][2]int64, nulls bool) (iter.Seq2[arrow.RecordBatch, error], bool) {
	if filescan.Evolved(tbl) {
		return nil, false
	}
	var keyIDs []int
	deletes := map[string]iceberg.DataFile{}
	for _, t := range tasks {
		if len(t.DeleteFiles) > 0 || len(t.DeletionVectorFiles) > 0 || t.File.FileFormat() != iceberg.ParquetFile {
			return nil, false
		}
		for _, df := range t.EqualityDeleteFiles {
			ids := df.EqualityFieldIDs()
			if df.FileFormat() != iceberg.ParquetFile || len(ids) == 0 || keyIDs != nil && !slices.Equal(ids, keyIDs) {
				return nil, false
			}
			keyIDs = ids
			deletes[df.FilePath()] = df
		}
	}
	var keys []string
	for _, id := range keyIDs {
		f, ok := tbl.Schema().FindFieldByID(id)
		if !ok {
			return nil, false
		}
		keys = append(keys, f.Name)
	}
	read := append([]string(nil), fields...)
	for _, k := range keys {
		if !slices.Contains(read, k) {
			read = append(read, k)
		}
	}
	// Batches are decoded into recycled buffers: the consumer copies what outlives a
	// batch (interned dimension values, distinct-count keys, min/max strings).
	opt := filescan.Options{BatchRows: 16384, Mem: arrowmem.NewPool(readPoolIdle)}
	if ranges != nil {
		opt.KeepRowGroup = func(rg *metadata.RowGroupMetaData) bool { return rowGroupInRanges(rg, grain, ranges, nulls) }
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		// The keys each equality delete file removes, loaded once.
		deleted := make(map[string]map[string]struct{}, len(deletes))
		for path, df := range deletes {
			set := map[string]struct{}{}
			for rec, err := range filescan.Read(ctx, tbl, []table.FileScanTask{{File: df}}, keys, filescan.Options{}) {
				if err != nil {
					yield(nil, fmt.Errorf("equality deletes %s: %w", path, err))
					return
				}
				cols := keyColumns(rec, keys)
				var buf []byte
				for r := range int(rec.NumRows()) {
					buf = appendKey(buf[:0], cols, r)
					set[string(buf)] = struct{}{}
				}
				rec.Release()
			}
			deleted[path] = set
		}
		// One reader per core; the batches come in any order (Gold's aggregation does
		// not depend on it).
		type result struct {
			rec arrow.RecordBatch
			err error
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		todo := make(chan table.FileScanTask)
		results := make(chan result, 4)
		var wg sync.WaitGroup
		for range max(1, min(runtime.GOMAXPROCS(0), len(tasks))) {
			wg.Go(func() {
				for t := range todo {
					sets := make([]map[string]struct{}, 0, len(t.EqualityDeleteFiles))
					for _, df := range t.EqualityDeleteFiles {
						sets = append(sets, deleted[df.FilePath()])
					}
					for rec, err := range filescan.Read(rctx, tbl, []table.FileScanTask{t}, read, opt) {
						var out []arrow.RecordBatch
						if err == nil {
							out, err = liveRows(rctx, rec, grain, ranges, nulls, keys, sets, fields)
							rec.Release()
						}
						if err != nil {
							select {
							case results <- result{err: err}:
							case <-rctx.Done():
							}
							return
						}
						for i, o := range out {
							select {
							case results <- result{rec: o}:
							case <-rctx.Done():
								for _, rest := range out[i:] {
									rest.Release()
								}
								return
							}
						}
					}
				}
			})
		}
		go func() {
			defer close(todo)
			for _, t := range tasks {
				select {
				case todo <- t:
				case <-rctx.Done():
					return
				}
			}
		}()
		go func() {
			wg.Wait()
			close(results)
		}()
		defer func() { // on an early stop: release what the readers still hand over
			cancel()
			for r := range results {
				if r.rec != nil {
					r.rec.Release()
				}
			}
		}()
		for r := range results {
			if r.err != nil {
				yield(nil, r.err)
				return
			}
			if !yield(r.rec, nil) {
				return
			}
		}
	}, true
}

// readPoolIdle bounds the freed batch buffers the direct read keeps for reuse.
const readPoolIdle = 64 << 20

// maxRuns is the most in-range runs a batch is cut into.
const maxRuns = 8

// liveRows returns rec's columns fields, cut to the runs of rows whose grain is inside
// one of ranges, or NULL with nulls (all rows without ranges, or when they are scattered
// over more than maxRuns runs; zero-copy slices: Silver sorted on the grain keeps them
// contiguous) and without the rows whose key is in one of sets.
func liveRows(ctx context.Context, rec arrow.RecordBatch, grain string, ranges [][2]int64, nulls bool, keys []string, sets []map[string]struct{}, fields []string) ([]arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	runs := [][2]int{{0, n}}
	if ranges != nil {
		ix := rec.Schema().FieldIndices(grain)
		if len(ix) == 0 {
			return nil, fmt.Errorf("silver file has no column %s", grain)
		}
		g := rec.Column(ix[0])
		switch g.(type) {
		case *array.Timestamp, *array.Date32: // the values grainValue reads
		default:
			return nil, fmt.Errorf("silver grain column %s: unexpected Arrow type %s", grain, g.DataType())
		}
		runs = runs[:0]
		start := -1
		for r := range n {
			in := nulls && g.IsNull(r)
			if !g.IsNull(r) {
				v := grainValue(g, r)
				for _, rg := range ranges {
					if v >= rg[0] && v < rg[1] {
						in = true
						break
					}
				}
			}
			switch {
			case in && start < 0:
				start = r
			case !in && start >= 0:
				runs = append(runs, [2]int{start, r})
				start = -1
			}
		}
		if start >= 0 {
			runs = append(runs, [2]int{start, n})
		}
		if len(runs) > maxRuns {
			// Scattered (a file not sorted on the grain): slices would cost more than
			// they save; the caller skips the other grains row by row.
			runs = [][2]int{{0, n}}
		}
	}
	var out []arrow.RecordBatch
	release := func() {
		for _, o := range out {
			o.Release()
		}
	}
	for _, run := range runs {
		part := rec
		if run[0] != 0 || run[1] != n {
			part = rec.NewSlice(int64(run[0]), int64(run[1]))
		} else {
			part.Retain()
		}
		live, err := dropDeleted(ctx, part, keys, sets)
		part.Release()
		if err != nil {
			release()
			return nil, err
		}
		p, err := filescan.Project(live, fields)
		live.Release()
		if err != nil {
			release()
			return nil, fmt.Errorf("silver file: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// dropDeleted returns rec without the rows whose key is in one of sets (retained:
// release it).
func dropDeleted(ctx context.Context, rec arrow.RecordBatch, keys []string, sets []map[string]struct{}) (arrow.RecordBatch, error) {
	if len(sets) > 0 {
		cols := keyColumns(rec, keys)
		mask := array.NewBooleanBuilder(memory.DefaultAllocator)
		defer mask.Release()
		var buf []byte
		dropped := 0
		for r := range int(rec.NumRows()) {
			buf = appendKey(buf[:0], cols, r)
			live := true
			for _, s := range sets {
				if _, del := s[string(buf)]; del {
					live = false
					break
				}
			}
			if !live {
				dropped++
			}
			mask.Append(live)
		}
		if dropped > 0 {
			m := mask.NewBooleanArray()
			defer m.Release()
			f, err := compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
			if err != nil {
				return nil, fmt.Errorf("drop deleted rows: %w", err)
			}
			return f, nil
		}
	}
	rec.Retain()
	return rec, nil
}

func keyColumns(rec arrow.RecordBatch, keys []string) []arrow.Array {
	cols := make([]arrow.Array, len(keys))
	for i, k := range keys {
		cols[i] = rec.Column(rec.Schema().FieldIndices(k)[0])
	}
	return cols
}

// appendKey appends row r's key (its columns' values, length-prefixed; NULL apart).
func appendKey(buf []byte, cols []arrow.Array, r int) []byte {
	for _, c := range cols {
		if c.IsNull(r) {
			buf = append(buf, 0)
			continue
		}
		var v string
		if s, ok := c.(*array.String); ok {
			v = s.Value(r)
		} else {
			v = c.ValueStr(r)
		}
		buf = append(buf, 1, byte(len(v)), byte(len(v)>>8), byte(len(v)>>16))
		buf = append(buf, v...)
	}
	return buf
}

// rowGroupInRanges reports whether rg may hold a value of column name inside one of
// ranges (microseconds for a timestamp, days for a date), or, with nulls, a NULL: true
// without statistics.
func rowGroupInRanges(rg *metadata.RowGroupMetaData, name string, ranges [][2]int64, nulls bool) bool {
	for i := range rg.NumColumns() {
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			return true
		}
		if p := cc.PathInSchema(); len(p) != 1 || p[0] != name {
			continue
		}
		if ok, err := cc.StatsSet(); !ok || err != nil {
			return true
		}
		st, err := cc.Statistics()
		if err != nil || st == nil || !st.HasMinMax() || nulls && (!st.HasNullCount() || st.NullCount() > 0) {
			return true
		}
		var lo, hi int64
		switch s := st.(type) {
		case *metadata.Int64Statistics:
			lo, hi = s.Min(), s.Max()
		case *metadata.Int32Statistics:
			lo, hi = int64(s.Min()), int64(s.Max())
		default:
			return true
		}
		for _, r := range ranges {
			if hi >= r[0] && lo < r[1] {
				return true
			}
		}
		return false
	}
	return true
}
