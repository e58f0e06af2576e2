package silver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/zeebo/xxh3"
	"golang.org/x/sync/errgroup"

	"goldbridge/lakehouse/arrowmem"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/filescan"
)

// pruneMaxKeys is the number of keys up to which the stored-version lookup prunes the
// files and row groups it reads to those that can hold one (see keyPruner); a delta of
// more keys than that reads the whole table (it touches most of it anyway, and sorting
// the keys would cost more than it saves).
const pruneMaxKeys = 1 << 20

// resolve decides each winner's fate against what Silver (or the keys table) holds.
func (e *engine) resolve(ctx context.Context, silverTbl, keysTbl *table.Table) error {
	if e.append {
		return e.resolveAppend(ctx, silverTbl, keysTbl)
	}
	return e.resolveAgainstStored(ctx, silverTbl)
}

// pruner returns the keyPruner of tbl for keys (each the key column values of one key),
// or nil when there are none or too many to prune by (pruneMaxKeys); the run keeps it
// for the counts it logs.
func (e *engine) pruner(tbl *table.Table, keys [][]Value) *keyPruner {
	if len(keys) == 0 || len(keys) > pruneMaxKeys {
		return nil
	}
	p, ok := newKeyPruner(tbl.Schema(), keyColumns(e.cols, e.spec.Key), keys)
	if !ok {
		return nil
	}
	e.lookupPruner = p
	return p
}

// winnerKeyValues returns the key column values of every winner, for the pruner (the
// strings point into the winners' storage).
func (e *engine) winnerKeyValues() [][]Value {
	n, width := e.winnerCount(), len(e.keyIdx)
	if n > pruneMaxKeys {
		return nil
	}
	flat := make([]Value, n*width)
	out := make([][]Value, 0, n)
	for _, w := range e.ws {
		for slot := range w.len() {
			k := flat[:width:width]
			flat = flat[width:]
			for i, ki := range e.keyIdx {
				k[i] = w.get(ki, slot)
			}
			out = append(out, k)
		}
	}
	return out
}

// plan plans a scan of tbl and keeps the tasks whose files can hold one of the
// pruner's keys (all of them when p is nil).
func plan(ctx context.Context, tbl *table.Table, scan *table.Scan, p *keyPruner) ([]prunedTask, error) {
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	if p == nil {
		out := make([]prunedTask, len(tasks))
		for i, t := range tasks {
			out[i] = prunedTask{task: t}
		}
		return out, nil
	}
	return p.prune(tbl.Metadata(), tasks), nil
}

// scanKeys reads the key columns (and extra columns) of tbl's data files that can hold
// one of p's keys (all if p is nil), filtered, and calls fn with each row's rendered
// key and row (key cells and extra cells filled).
func (e *engine) scanKeys(ctx context.Context, tbl *table.Table, p *keyPruner, filter iceberg.BooleanExpression, extra []int, fn func(key string, row []Value)) error {
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	var fields []string
	for _, k := range e.keyIdx {
		fields = append(fields, e.cols[k].Name)
	}
	for _, x := range extra {
		fields = append(fields, e.cols[x].Name)
	}
	opts := []table.ScanOption{table.WithSelectedFields(fields...)}
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	scan := tbl.Scan(opts...)
	kept, err := plan(ctx, tbl, scan, p)
	if err != nil {
		return fmt.Errorf("plan %s: %w", tbl.Identifier(), err)
	}
	tasks := make([]table.FileScanTask, len(kept))
	for i, t := range kept {
		tasks[i] = t.task
	}
	_, recs, err := scan.ReadTasks(ctx, tasks)
	if err != nil {
		return fmt.Errorf("scan %s: %w", tbl.Identifier(), err)
	}
	row := make([]Value, len(e.cols))
	idx := append(slices.Clone(e.keyIdx), extra...)
	for rec, err := range recs {
		if err != nil {
			return fmt.Errorf("scan %s: %w", tbl.Identifier(), err)
		}
		sch := rec.Schema()
		arrs := make([]arrow.Array, len(idx))
		for i, c := range idx {
			arrs[i] = rec.Column(sch.FieldIndices(e.cols[c].Name)[0])
		}
		for r := range int(rec.NumRows()) {
			for i, c := range idx {
				row[c] = ValueAt(arrs[i], r, e.cols[c].Type)
			}
			fn(e.key(row), row)
		}
		rec.Release()
	}
	return nil
}

// resolveAppend is the anti-join of an append entity: a winner whose event key is
// already stored is a duplicate (fateSame), the others are appended (fateInsert).
// Stored means, in order of preference: in the keys table (or read from a range Silver
// processed before this run); in Silver with an event time at most Lookback before the
// winner's (a day-partition-pruned scan from min(event time) - Lookback); or anywhere in
// Silver (a projected scan of the key columns).
func (e *engine) resolveAppend(ctx context.Context, silverTbl, keysTbl *table.Table) error {
	if e.keys != nil {
		ks := e.keys
		if len(ks.fresh) == 0 {
			return nil
		}
		err := e.scanKeys(ctx, keysTbl, e.pruner(keysTbl, ks.values()), nil, nil, func(key string, _ []Value) {
			if slot, ok := ks.slot(keyHash(key)); ok {
				ks.fresh[slot] = false
			}
		})
		if err != nil {
			return err
		}
		for _, w := range e.ws {
			for slot := range w.len() {
				if k, _ := ks.slot(keyHash(w.key(slot))); !ks.fresh[k] || ks.pre[k] {
					w.fate[slot] = fateSame
				}
			}
		}
		return nil
	}
	if e.winnerCount() == 0 {
		return nil
	}
	p := e.pruner(silverTbl, e.winnerKeyValues())
	if e.spec.Lookback <= 0 || e.etIdx < 0 {
		return e.scanKeys(ctx, silverTbl, p, nil, nil, func(key string, _ []Value) {
			if w, slot, ok := e.lookupKey(key); ok {
				w.fate[slot] = fateSame
			}
		})
	}
	lb := e.lookbackUnits()
	lo := int64(math.MaxInt64)
	for _, w := range e.ws {
		for slot := range w.len() {
			lo = min(lo, w.get(e.etIdx, slot).I)
		}
	}
	ref := iceberg.Reference(e.cols[e.etIdx].Name)
	var window iceberg.BooleanExpression
	if e.cols[e.etIdx].Type.Kind == Date {
		window = iceberg.GreaterThanEqual(ref, iceberg.Date(lo-lb))
	} else {
		window = iceberg.GreaterThanEqual(ref, iceberg.Timestamp(lo-lb))
	}
	return e.scanKeys(ctx, silverTbl, p, window, []int{e.etIdx}, func(key string, row []Value) {
		w, slot, ok := e.lookupKey(key)
		if ok && !row[e.etIdx].Null && row[e.etIdx].I >= w.get(e.etIdx, slot).I-lb {
			w.fate[slot] = fateSame
		}
	})
}

// lookbackUnits is Lookback in the event time column's unit: µs, or whole days for a date.
func (e *engine) lookbackUnits() int64 {
	if e.cols[e.etIdx].Type.Kind == Date {
		return int64(e.spec.Lookback / (24 * time.Hour))
	}
	return e.spec.Lookback.Microseconds()
}

// resolveAgainstStored decides each winner's fate against the version stored in Silver:
// insert (new key), update (newer), same (a re-delivery) or older (a late event).
func (e *engine) resolveAgainstStored(ctx context.Context, tbl *table.Table) error {
	e.refill = nil
	if e.winnerCount() == 0 || tbl.CurrentSnapshot() == nil {
		return nil
	}
	// A table with the key hash columns is matched on them (two fixed-width columns to
	// decode instead of every stored key); an older one on the key columns.
	fields := []string{ColCDCOp, ColVersion}
	if e.keyHashCols {
		fields = append(fields, ColKeyHashHi, ColKeyHashLo)
	} else {
		for _, k := range e.keyIdx {
			fields = append(fields, e.cols[k].Name)
		}
	}
	fields = append(fields, e.cols[e.uaIdx].Name)
	if e.seqIdx >= 0 {
		fields = append(fields, e.cols[e.seqIdx].Name)
	}
	// The columns a Debezium winner lacks take the stored version's value.
	fillCols := e.toastColumns()
	for _, c := range fillCols {
		if !slices.Contains(fields, e.cols[c].Name) {
			fields = append(fields, e.cols[c].Name)
		}
	}
	carried := e.carriedIdx >= 0 && hasColumn(tbl, ColCDCCarried)
	if carried {
		fields = append(fields, ColCDCCarried)
	}
	// The sort_by columns of the versions replaced are recorded in the summary.
	tracked := e.listedSortBy()
	for _, c := range tracked {
		if !slices.Contains(fields, e.cols[c].Name) {
			fields = append(fields, e.cols[c].Name)
		}
	}
	if e.replaced == nil { // one map for every pass of the run
		e.replaced = make(map[int]map[int64]bool, len(tracked))
		for _, c := range tracked {
			e.replaced[c] = map[int64]bool{}
		}
	}
	p := e.pruner(tbl, e.winnerKeyValues())
	streams, err := e.storedRows(ctx, tbl, p, fields)
	if err != nil {
		return err
	}
	// The stored version of a key is the newest of its rows read: the table scan applies
	// the equality deletes (one row per key), the direct read does not, and a key's
	// older rows are exactly the versions its deletes remove (Silver only ever writes a
	// newer version, see storedRows). Each stream is read on its own goroutine (the
	// winners are only read), into its own map; the maps are merged after.
	type stored struct {
		v       version
		tracked []Value // the sort_by columns of that row
		fill    storedFill
		carried string // _cdc_carried
	}
	type slotID struct {
		w    *winners
		slot int
	}
	var held hashFilter // the winners' key hashes: most stored rows are rejected by one bit
	if e.keyHashCols {
		held = newHashFilter(e.winnerCount())
		for _, w := range e.ws {
			w.index.addTo(held)
		}
	}
	read := func(recs iter.Seq2[arrow.RecordBatch, error]) (map[slotID]*stored, error) {
		found := map[slotID]*stored{}
		row := make([]Value, len(e.cols))
		var keyBuf []byte
		for rec, err := range recs {
			if err != nil {
				return nil, fmt.Errorf("scan stored versions: %w", err)
			}
			sch := rec.Schema()
			col := func(name string) arrow.Array { return rec.Column(sch.FieldIndices(name)[0]) }
			var match func(r int) (slotID, bool) // the winner whose key row r holds
			if e.keyHashCols {
				hi, lo := col(ColKeyHashHi).(*array.Int64).Int64Values(), col(ColKeyHashLo).(*array.Int64).Int64Values()
				match = func(r int) (slotID, bool) {
					if !held.has(uint64(lo[r])) {
						return slotID{}, false
					}
					w, slot, ok := e.lookupHash(xxh3.Uint128{Hi: uint64(hi[r]), Lo: uint64(lo[r])})
					return slotID{w, slot}, ok
				}
			} else {
				keyCols := make([]arrow.Array, len(e.keyIdx))
				for i, k := range e.keyIdx {
					keyCols[i] = col(e.cols[k].Name)
				}
				match = func(r int) (slotID, bool) {
					for i, k := range e.keyIdx {
						row[k] = ValueAt(keyCols[i], r, e.cols[k].Type)
					}
					keyBuf = e.appendKey(keyBuf[:0], row)
					w, slot, ok := e.lookupKey(unsafeString(keyBuf))
					return slotID{w, slot}, ok
				}
			}
			ua := col(e.cols[e.uaIdx].Name)
			var seq *array.Int64
			if e.seqIdx >= 0 {
				seq = col(e.cols[e.seqIdx].Name).(*array.Int64)
			}
			trackedCols := make([]arrow.Array, len(tracked))
			for i, c := range tracked {
				trackedCols[i] = col(e.cols[c].Name)
			}
			fillArrs := make([]arrow.Array, len(fillCols))
			for i, c := range fillCols {
				fillArrs[i] = col(e.cols[c].Name)
			}
			var carriedCol *array.String
			if carried {
				carriedCol = col(ColCDCCarried).(*array.String)
			}
			ops := col(ColCDCOp).(*array.String)
			hashes := col(ColVersion).(*array.Int64)
			for r := range int(rec.NumRows()) {
				id, ok := match(r)
				if !ok {
					continue
				}
				v := version{ua: ValueAt(ua, r, e.cols[e.uaIdx].Type).I, rank: opRank(ops.Value(r)[0]), hash: uint64(hashes.Value(r))}
				if seq != nil {
					v.seq = uint64(seq.Value(r))
				}
				st := found[id]
				if st == nil {
					st = &stored{tracked: make([]Value, len(tracked))}
					found[id] = st
				} else if v.cmp(st.v) <= 0 {
					continue
				}
				st.v = v
				for i, tc := range tracked {
					st.tracked[i] = ValueAt(trackedCols[i], r, e.cols[tc].Type)
				}
				st.carried = ""
				if carriedCol != nil && carriedCol.IsValid(r) {
					st.carried = strings.Clone(carriedCol.Value(r))
				}
				if len(fillCols) > 0 && id.w.toast != nil && len(id.w.toast.fill[id.slot]) > 0 {
					st.fill = storedFill{cols: fillCols, vals: make([]Value, len(fillCols))}
					for i, c := range fillCols {
						st.fill.vals[i] = cloneValue(ValueAt(fillArrs[i], r, e.cols[c].Type))
					}
				}
			}
			rec.Release()
		}
		return found, nil
	}
	results := make([]map[slotID]*stored, len(streams))
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, recs := range streams {
		wg.Go(func() { results[i], errs[i] = read(recs) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	found := results[0]
	for _, more := range results[1:] {
		for id, st := range more {
			if cur := found[id]; cur == nil || st.v.cmp(cur.v) > 0 {
				found[id] = st
			}
		}
	}
	for id, st := range found {
		w, slot := id.w, id.slot
		switch c := w.version(slot).cmp(st.v); {
		case c > 0:
			w.fate[slot] = fateUpdate
			e.fillFromStored(w, slot, st.v, st.fill, st.carried)
			for i, tc := range tracked {
				if v := st.tracked[i]; !v.Null {
					k, _ := replacedKey(v, e.cols[tc].Type.Kind)
					e.replaced[tc][k] = true
				}
			}
		case c == 0:
			w.fate[slot] = fateSame
		default:
			w.fate[slot] = fateOlder
			if st.carried != "" {
				e.lateFill(w, slot, st.v, st.carried)
			}
		}
	}
	if len(e.refill) > 0 {
		return e.rewriteStored(ctx, tbl, p)
	}
	return nil
}

// storedRows reads the columns fields of the rows stored in Silver that may hold the
// winners' keys: the data files the keyPruner cannot rule out. When the table's schema
// never changed, those files are read directly, without applying the equality deletes
// (iceberg-go's scan of a deleted-from file costs a filter kernel per batch and regrows
// every string buffer): that is correct for the lookup of stored versions because a
// run only writes a version newer than the stored one, deleting the stored one, so the
// newest row of a key is its current version. Otherwise (columns added or renamed
// since some files were written) the table scan reads them, deletes applied.
func (e *engine) storedRows(ctx context.Context, tbl *table.Table, p *keyPruner, fields []string) ([]iter.Seq2[arrow.RecordBatch, error], error) {
	if !filescan.Evolved(tbl) {
		kept, err := plan(ctx, tbl, tbl.Scan(), p)
		if err != nil {
			return nil, fmt.Errorf("plan stored versions: %w", err)
		}
		for i := range kept {
			t := &kept[i].task
			t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles = nil, nil, nil
		}
		// One stream per core, the tasks dealt out largest first.
		slices.SortFunc(kept, func(a, b prunedTask) int { return cmp.Compare(b.task.Length, a.task.Length) })
		n := max(1, min(runtime.GOMAXPROCS(0), len(kept)))
		parts := make([][]prunedTask, n)
		for i, t := range kept {
			parts[i%n] = append(parts[i%n], t)
		}
		pool := arrowmem.NewPool(scanPoolIdle)
		streams := make([]iter.Seq2[arrow.RecordBatch, error], n)
		for i, part := range parts {
			streams[i] = readPruned(ctx, tbl, part, fields, p, pool)
		}
		return streams, nil
	}
	scan := tbl.Scan(table.WithSelectedFields(fields...))
	kept, err := plan(ctx, tbl, scan, p)
	if err != nil {
		return nil, fmt.Errorf("plan stored versions: %w", err)
	}
	tasks := make([]table.FileScanTask, len(kept))
	for i, t := range kept {
		tasks[i] = t.task
	}
	_, recs, err := scan.ReadTasks(ctx, tasks)
	if err != nil {
		return nil, fmt.Errorf("scan stored versions: %w", err)
	}
	return []iter.Seq2[arrow.RecordBatch, error]{recs}, nil
}

// readPruned reads the columns fields of the data files of tasks directly (filescan),
// each file's row groups pruned to those whose key statistics can hold one of the keys
// the pruner kept the file for (all row groups when p is nil).
func readPruned(ctx context.Context, tbl *table.Table, tasks []prunedTask, fields []string, p *keyPruner, mem memory.Allocator) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, t := range tasks {
			opt := filescan.Options{BatchRows: bronzeReadBatch, Mem: mem}
			if p != nil {
				opt.KeepRowGroup = p.rowGroupFilter(t)
			}
			for rec, err := range filescan.Read(ctx, tbl, []table.FileScanTask{t.task}, fields, opt) {
				if !yield(rec, err) || err != nil {
					return
				}
			}
		}
	}
}

// ValueAt reads one cell of an Arrow column of a Silver (or Gold) table as a Value;
// the Arrow type decides, t only names the column's declared type for messages.
func ValueAt(a arrow.Array, i int, t Type) Value {
	if a.IsNull(i) {
		return Value{Null: true}
	}
	switch arr := a.(type) {
	case *array.String:
		return Value{S: arr.Value(i)}
	case *array.Int32:
		return Value{I: int64(arr.Value(i))}
	case *array.Int64:
		return Value{I: arr.Value(i)}
	case *array.Date32:
		return Value{I: int64(arr.Value(i))}
	case *array.Timestamp:
		return Value{I: int64(arr.Value(i))}
	case *array.Float64:
		return Value{F: arr.Value(i)}
	case *array.Decimal128:
		return Value{D: arr.Value(i)}
	case *array.Boolean:
		return Value{B: arr.Value(i)}
	}
	panic(fmt.Sprintf("silver: unsupported Arrow type %s for a %s column", a.DataType(), t))
}

// finishCounts adds the accounting of this pass's winners (their fates and payload
// hashes) to the run's, and returns the rows the pass writes.
func (e *engine) finishCounts() int64 {
	n := int64(e.winnerCount())
	var valid int64 // the rows offered to this pass's winners
	for _, w := range e.ws {
		valid += w.offered
	}
	if e.append {
		var stored int64
		for _, w := range e.ws {
			for _, f := range w.fate {
				if f == fateSame {
					stored++
				}
			}
		}
		e.counts.Current += n - stored
		e.counts.Inserted += n - stored
		e.counts.Duplicates += valid - n + stored
		return n - stored
	}
	distinct := make([]int64, len(e.ws))
	var wg sync.WaitGroup
	for i, w := range e.ws {
		wg.Go(func() { distinct[i] = w.distinctPayloads() })
	}
	wg.Wait()
	var ndistinct int64
	for _, d := range distinct {
		ndistinct += d
	}
	var same, older, current int64
	for _, w := range e.ws {
		for slot, f := range w.fate {
			switch f {
			case fateInsert:
				e.counts.Inserted++
			case fateUpdate:
				e.counts.Updated++
			case fateSame:
				same++
				continue
			case fateOlder:
				older++
				continue
			}
			current++
			if w.op(slot) == 'd' {
				e.counts.Deleted++
			}
		}
	}
	e.counts.Current += current
	e.counts.Duplicates += valid - ndistinct + same
	e.counts.Superseded += ndistinct - n + older
	return current
}

const batchRows = 65536

// writeQueue is the number of record batches queued per Parquet writer of a Silver write.
const writeQueue = 2

// writeData writes the rows of this pass (inserts and updates) to data files of tbl.
// Where each bucket is one shard's, the shards' batches go to iceberg-go's fanout (a
// writer per partition), with one worker when the table is sorted: several hand a
// partition's batches over in any order. Elsewhere the fanout would keep a file open
// per partition with its buffered row group until the end (for the taxi's 92 days, the
// whole pass's output) and mix the shards' rows of a partition, so the rows go in one
// stream per shard, each holding whole partitions in partition order and, within one,
// in writeOrder (the shards' runs merged), written in parallel with one open file a
// stream (iceberg-go's clustered write). Measured (docs/silver.md): 2M taxi trips,
// peak RSS 1.83-1.97 GB -> 1.42-1.48 GB; the orders' 16 buckets at 10M, the fanout's
// write 5.5-5.8 s against the clustered 6.0. A table partitioned otherwise than
// goldbridge creates it gets the fanout, its files sorted batch by batch.
func (e *engine) writeData(ctx context.Context, tbl *table.Table, sch *arrow.Schema) ([]iceberg.DataFile, error) {
	part := e.partitionOf(tbl)
	if part == nil {
		// A few batches queued per partition writer, not iceberg-go's default 64: with
		// one writer per bucket the queues held more memory than the winners.
		opts := []table.WriteRecordOption{table.WithRecordBatchBufferSize(writeQueue)}
		if len(e.sortBy) > 0 {
			opts = append(opts, table.WithMaxWriteWorkers(1))
		}
		return catalog.WriteDataFiles(ctx, tbl, sch, e.winnerBatches(sch, nil), opts...)
	}
	streams := e.partitionStreams(part)
	perStream := make([][]iceberg.DataFile, len(streams))
	g, gctx := errgroup.WithContext(ctx)
	for i, refs := range streams {
		if len(refs) == 0 {
			continue
		}
		g.Go(func() error {
			batches := e.winnerBatches(sch, [][]rowRef{e.orderStream(refs)})
			var err error
			perStream[i], err = catalog.WriteDataFiles(gctx, tbl, sch, batches, table.WithClusteredWrite(), table.WithRecordBatchBufferSize(writeQueue))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.Concat(perStream...), nil
}

// rowRef is a row to write: its partition (partitionOf), shard and slot.
type rowRef struct {
	part  int32
	shard uint8
	slot  int32
}

// partitionOf returns the function that gives a row's partition in tbl when tbl's
// spec is one goldbridge creates (partitionSpec), else nil; nil too where each bucket
// is one shard's (shardOfKey; see writeData).
func (e *engine) partitionOf(tbl *table.Table) func(w *winners, slot int) int32 {
	spec := tbl.Spec()
	if spec.NumFields() != 1 {
		return nil
	}
	f := spec.Field(0)
	src, ok := tbl.Schema().FindFieldByID(f.SourceIDs[0])
	if !ok {
		return nil
	}
	col := slices.IndexFunc(e.cols, func(c ColumnSpec) bool { return c.Name == src.Name })
	if col < 0 {
		return nil
	}
	kind := e.cols[col].Type.Kind
	switch t := f.Transform.(type) {
	case iceberg.BucketTransform:
		if col != e.keyIdx[0] || len(e.ws) == 1 || e.bucketShards && t.NumBuckets == e.spec.Buckets {
			return nil
		}
		if _, ok := icebergBucket("", kind, t.NumBuckets); !ok {
			return nil
		}
		return func(w *winners, slot int) int32 {
			first, _, _ := strings.Cut(w.key(slot), "\x1f")
			b, _ := icebergBucket(first, kind, t.NumBuckets)
			return int32(b)
		}
	case iceberg.DayTransform:
		if kind != Timestamp && kind != Date {
			return nil
		}
		return func(w *winners, slot int) int32 {
			v := w.get(col, slot)
			switch {
			case v.Null:
				return math.MinInt32
			case kind == Date:
				return int32(v.I)
			}
			const day = 86_400_000_000 // µs; Iceberg's day transform floors
			d := v.I / day
			if v.I%day < 0 {
				d--
			}
			return int32(d)
		}
	}
	return nil
}

// partitionStreams spreads the rows to write over one stream per shard, a partition's
// rows all in one stream, in partition order, and within a partition each shard's rows
// in writeOrder, the lower shard's first (the shards' orders computed in parallel; a
// counting sort places them: a stream holds few partitions).
func (e *engine) partitionStreams(part func(w *winners, slot int) int32) [][]rowRef {
	n := len(e.ws)
	byShard := make([][]rowRef, n)
	var wg sync.WaitGroup
	for s, w := range e.ws {
		wg.Go(func() {
			order := e.writeOrder(w)
			refs := make([]rowRef, len(order))
			for i, slot := range order {
				refs[i] = rowRef{part: part(w, slot), shard: uint8(s), slot: int32(slot)}
			}
			byShard[s] = refs
		})
	}
	wg.Wait()
	at := map[int32]int{} // rows of a partition, then where its next row goes
	for _, refs := range byShard {
		for _, r := range refs {
			at[r.part]++
		}
	}
	size := make([]int, n)
	for _, p := range slices.Sorted(maps.Keys(at)) {
		i := streamOf(p, n)
		size[i], at[p] = size[i]+at[p], size[i]
	}
	streams := make([][]rowRef, n)
	for i := range streams {
		streams[i] = make([]rowRef, size[i])
	}
	for _, refs := range byShard {
		for _, r := range refs {
			streams[streamOf(r.part, n)][at[r.part]] = r
			at[r.part]++
		}
	}
	return streams
}

// streamOf is the stream of n that writes partition p.
func streamOf(p int32, n int) int { return int(uint32(p) % uint32(n)) }

// orderStream orders a stream's rows (partitionStreams) within each partition by
// writeOrder (the sort_by order, nulls first, or else slot order), merging the shards'
// runs where a partition has rows of several.
func (e *engine) orderStream(refs []rowRef) []rowRef {
	if len(e.sortBy) == 0 {
		return refs
	}
	for lo := 0; lo < len(refs); {
		hi := lo + 1
		for hi < len(refs) && refs[hi].part == refs[lo].part {
			hi++
		}
		if refs[lo].shard != refs[hi-1].shard {
			e.mergeRuns(refs[lo:hi])
		}
		lo = hi
	}
	return refs
}

// mergeRuns orders refs, one run per shard each in the sort_by order, by sort_by
// (ties: the lower shard first).
func (e *engine) mergeRuns(refs []rowRef) {
	var heads []int // start of each shard's run, then its next row
	for i := range refs {
		if i == 0 || refs[i].shard != refs[i-1].shard {
			heads = append(heads, i)
		}
	}
	ends := append(heads[1:len(heads):len(heads)], len(refs))
	less := func(a, b rowRef) bool {
		for _, c := range e.sortBy {
			if r := CompareValues(e.ws[a.shard].get(c, int(a.slot)), e.ws[b.shard].get(c, int(b.slot)), e.cols[c].Type.Kind); r != 0 {
				return r < 0
			}
		}
		return false
	}
	out := make([]rowRef, 0, len(refs))
	for len(out) < len(refs) {
		best := -1
		for r := range heads {
			if heads[r] < ends[r] && (best < 0 || less(refs[heads[r]], refs[heads[best]])) {
				best = r
			}
		}
		out = append(out, refs[heads[best]])
		heads[best]++
	}
	copy(refs, out)
}

// winnerBatches yields the rows to write as Arrow batches: each of streams built on its
// own goroutine, in its order; with streams nil, each shard's rows in writeOrder.
func (e *engine) winnerBatches(sch *arrow.Schema, streams [][]rowRef) func(func(arrow.RecordBatch, error) bool) {
	return func(yield func(arrow.RecordBatch, error) bool) {
		n := len(streams)
		if streams == nil {
			n = len(e.ws)
		}
		out := make(chan arrow.RecordBatch, n)
		done := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				var refs []rowRef
				if streams == nil {
					refs = e.shardRefs(i)
				} else {
					refs = streams[i]
				}
				e.streamBatches(refs, sch, out, done)
			})
		}
		go func() {
			wg.Wait()
			close(out)
		}()
		for rec := range out {
			if !yield(rec, nil) {
				close(done)
				for rec := range out {
					rec.Release()
				}
				return
			}
		}
	}
}

// shardRefs is shard i's rows to write, in writeOrder.
func (e *engine) shardRefs(i int) []rowRef {
	order := e.writeOrder(e.ws[i])
	refs := make([]rowRef, len(order))
	for j, slot := range order {
		refs[j] = rowRef{shard: uint8(i), slot: int32(slot)}
	}
	return refs
}

// streamBatches sends the rows refs as batches of batchRows to out, until done is
// closed.
func (e *engine) streamBatches(order []rowRef, sch *arrow.Schema, out chan<- arrow.RecordBatch, done <-chan struct{}) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	// Room for the shard's rows, at most a batch: an incremental run's shard holds a few
	// hundred, and reserving whole batches made ~60 MB of garbage per run.
	rows := cmp.Or(e.writeBatch, batchRows)
	b.Reserve(min(rows, len(order)))
	dataLen := make([]int, len(b.Fields())) // string bytes of the last batch per column
	sent := 0                               // rows sent
	send := func() bool {
		for i, f := range b.Fields() {
			if sb, ok := f.(*array.StringBuilder); ok {
				dataLen[i] = sb.DataLen()
			}
		}
		rec := b.NewRecordBatch()
		sent += int(rec.NumRows())
		// The next batch is about as large (or the rest): no growing by doubling.
		if next := min(rows, len(order)-sent); next > 0 {
			b.Reserve(next)
			for i, f := range b.Fields() {
				if sb, ok := f.(*array.StringBuilder); ok {
					sb.ReserveData(dataLen[i] + dataLen[i]/8)
				}
			}
		}
		select {
		case out <- rec:
			return true
		case <-done:
			rec.Release()
			return false
		}
	}
	n := 0
	nc := len(e.cols)
	ts := arrow.Timestamp(e.now.UnixMicro())
	var id []byte
	for _, ref := range order {
		w, slot := e.ws[ref.shard], int(ref.slot)
		for i := range w.kinds {
			w.appendTo(i, b.Field(i), slot)
		}
		id = w.appendEventID(id[:0], slot)
		if e.append {
			b.Field(nc).(*array.StringBuilder).BinaryBuilder.Append(id)
			b.Field(nc + 1).(*array.StringBuilder).Append(e.runID)
			b.Field(nc + 2).(*array.TimestampBuilder).Append(ts)
		} else {
			b.Field(nc).(*array.BooleanBuilder).Append(w.op(slot) == 'd')
			b.Field(nc + 1).(*array.StringBuilder).Append(string(w.op(slot)))
			b.Field(nc + 2).(*array.Int64Builder).Append(int64(w.version(slot).hash))
			b.Field(nc + 3).(*array.StringBuilder).BinaryBuilder.Append(id)
			b.Field(nc + 4).(*array.StringBuilder).Append(e.runID)
			b.Field(nc + 5).(*array.TimestampBuilder).Append(ts)
			if e.keyHashCols {
				h := keyHash(w.key(slot))
				b.Field(nc + 6).(*array.Int64Builder).Append(int64(h.Hi))
				b.Field(nc + 7).(*array.Int64Builder).Append(int64(h.Lo))
			}
		}
		if n++; n == rows {
			n = 0
			if !send() {
				return
			}
		}
	}
	if n > 0 {
		send()
	}
}

// writeOrder returns the slots of w to write (inserts and updates), in the order of
// the sort_by columns (nulls first) or else in slot order.
func (e *engine) writeOrder(w *winners) []int {
	slots := make([]int, 0, w.len())
	for slot, f := range w.fate {
		if f == fateInsert || f == fateUpdate {
			slots = append(slots, slot)
		}
	}
	if len(e.sortBy) == 0 {
		return slots
	}
	if k := w.kinds[e.sortBy[0]]; len(e.sortBy) == 1 && k != String && k != Float64 && k != Decimal && k != Bool {
		// One integer-like column: sort (value, slot) pairs.
		type pair struct{ v, slot int64 }
		pairs := make([]pair, len(slots))
		for i, slot := range slots {
			v := w.get(e.sortBy[0], slot)
			pairs[i] = pair{v.I, int64(slot)}
			if v.Null {
				pairs[i].v = math.MinInt64
			}
		}
		slices.SortFunc(pairs, func(a, b pair) int { return cmp.Or(cmp.Compare(a.v, b.v), cmp.Compare(a.slot, b.slot)) })
		for i, p := range pairs {
			slots[i] = int(p.slot)
		}
		return slots
	}
	slices.SortStableFunc(slots, func(a, b int) int {
		for _, c := range e.sortBy {
			if r := CompareValues(w.get(c, a), w.get(c, b), w.kinds[c]); r != 0 {
				return r
			}
		}
		return 0
	})
	return slots
}

// CompareValues orders two cells of a column of kind k: NULL first, then by value
// (floats by <, so a NaN ties with everything).
func CompareValues(a, b Value, k Kind) int {
	switch {
	case a.Null || b.Null:
		return cmp.Compare(btoi(!a.Null), btoi(!b.Null))
	}
	switch k {
	case String:
		return strings.Compare(a.S, b.S)
	case Float64:
		switch {
		case a.F < b.F:
			return -1
		case b.F < a.F:
			return 1
		}
		return 0
	case Decimal:
		return a.D.Cmp(b.D)
	case Bool:
		return cmp.Compare(btoi(a.B), btoi(b.B))
	}
	return cmp.Compare(a.I, b.I)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// deleteBatches yields the keys of updated rows, for equality deletes of their old versions.
func (e *engine) deleteBatches(sch *arrow.Schema) func(func(arrow.RecordBatch, error) bool) {
	return func(yield func(arrow.RecordBatch, error) bool) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		defer b.Release()
		n := 0
		for _, w := range e.ws {
			for slot, f := range w.fate {
				if f != fateUpdate {
					continue
				}
				for i, k := range e.keyIdx {
					w.appendTo(k, b.Field(i), slot)
				}
				if n++; n == batchRows {
					n = 0
					if !yield(b.NewRecordBatch(), nil) {
						return
					}
				}
			}
		}
		if n > 0 {
			yield(b.NewRecordBatch(), nil)
		}
	}
}

func (e *engine) summary(res Result) (iceberg.Properties, error) {
	counts, err := json.Marshal(e.counts)
	if err != nil {
		return nil, err
	}
	quality, err := json.Marshal(e.quality)
	if err != nil {
		return nil, err
	}
	props := iceberg.Properties{
		PropBronzeSnapshot: strconv.FormatInt(res.BronzeTo, 10),
		PropRunID:          res.RunID,
		PropCounts:         string(counts),
		PropQuality:        string(quality),
	}
	e.lookupProps(props)
	if res.Replay {
		props[PropReplay] = "true"
	}
	if !e.append && !res.Replay {
		for _, c := range e.listedSortBy() {
			// No stored table (first run): nothing was replaced.
			props[PropReplacedPrefix+e.cols[c].Name] = encodeReplaced(e.replaced[c])
		}
	}
	if e.append && !res.Replay {
		// An append replaces no version: said for every listed column, so that a mart
		// knows the commit's grains (and that it only added rows) from the summary.
		for c := range e.written {
			props[PropReplacedPrefix+e.cols[c].Name] = ""
		}
	}
	if !res.Replay {
		for c, vals := range e.written {
			props[PropWrittenPrefix+e.cols[c].Name] = encodeReplaced(vals)
		}
	}
	return props, nil
}

// watermarkProps are the summary properties of a quarantine or keys-table commit.
func watermarkProps(res Result) iceberg.Properties {
	props := iceberg.Properties{
		PropBronzeSnapshot: strconv.FormatInt(res.BronzeTo, 10),
		PropRunID:          res.RunID,
	}
	if res.Replay {
		props[PropReplay] = "true"
	}
	return props
}

// silverFiles are the files the passes of a run wrote to Silver, for its one commit.
type silverFiles struct {
	data, deletes []iceberg.DataFile
}

// writeSilver counts this pass's winners and writes the new versions of their keys, and
// equality deletes of the versions they replace, adding the files to written.
func (e *engine) writeSilver(ctx context.Context, lh *catalog.Lakehouse, ident string, written *silverFiles) error {
	current := e.finishCounts()
	e.markCarried()
	e.checkWritten()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	if tbl, err = e.writeTable(tbl); err != nil {
		return err
	}
	sch := arrowSchemaOf(e.tcols, e.spec.Key)
	if current > 0 {
		files, err := e.writeData(ctx, tbl, sch)
		if err != nil {
			return fmt.Errorf("write silver data files: %w", err)
		}
		written.data = append(written.data, files...)
	}
	if e.append || !slices.ContainsFunc(e.ws, func(w *winners) bool { return slices.Contains(w.fate, fateUpdate) }) {
		return nil
	}
	eqIDs, keySchema := e.keyFields(tbl)
	// Written once, like the data files: a conflict retries only the commit. The
	// transaction only lends the writer its table; it is never committed.
	keys, handed := catalog.CountRows(e.deleteBatches(keySchema))
	dels, err := tbl.NewTransaction().WriteEqualityDeletes(ctx, eqIDs, keys)
	if err == nil {
		err = catalog.HoldAll(dels, handed())
	}
	if err != nil {
		return fmt.Errorf("write equality deletes: %w", err)
	}
	written.deletes = append(written.deletes, dels...)
	return nil
}

// writtenColumns makes e.written (PropWrittenPrefix: the listed sort_by values of the rows
// written, one set per run) on the run's first pass and returns its columns, whose values
// checkWritten adds.
func (e *engine) writtenColumns() []int {
	if e.written == nil {
		e.written = map[int]map[int64]bool{}
		for _, c := range e.listedSortBy() {
			e.written[c] = map[int64]bool{}
		}
		// An append entity's event time partitions its table: listed too.
		if e.append && e.etIdx >= 0 {
			if _, ok := replacedKey(Value{}, e.cols[e.etIdx].Type.Kind); ok {
				e.written[e.etIdx] = map[int64]bool{}
			}
		}
	}
	return slices.Sorted(maps.Keys(e.written))
}

// listedSortBy returns the sort_by columns whose values a commit summary lists
// (PropReplacedPrefix, PropWrittenPrefix): dates, timestamps and integers.
func (e *engine) listedSortBy() []int {
	var out []int
	for _, c := range e.sortBy {
		if _, ok := replacedKey(Value{}, e.cols[c].Type.Kind); ok {
			out = append(out, c)
		}
	}
	return out
}

// keyFields returns the field ids of the key columns in tbl and their Arrow schema.
func (e *engine) keyFields(tbl *table.Table) ([]int, *arrow.Schema) {
	var eqIDs []int
	keyFields := make([]arrow.Field, len(e.keyIdx))
	for i, k := range e.keyIdx {
		f, _ := tbl.Schema().FindFieldByName(e.cols[k].Name)
		eqIDs = append(eqIDs, f.ID)
		keyFields[i] = arrow.Field{Name: e.cols[k].Name, Type: arrowType(e.cols[k].Type)}
	}
	return eqIDs, arrow.NewSchema(keyFields, nil)
}

// commitSilver commits the files the passes wrote (new versions, and equality deletes
// of the versions they replace) with the Bronze watermark, in one row-delta snapshot.
//
// An append entity's new rows are appended. A replay replaces every file of the table.
func (e *engine) commitSilver(ctx context.Context, lh *catalog.Lakehouse, ident string, res Result, opt Options, written silverFiles) (int64, error) {
	if opt.afterWrite != nil {
		opt.afterWrite()
	}
	props, err := e.summary(res)
	if err != nil {
		return 0, err
	}
	dataFiles, dels := written.data, written.deletes
	rowDelta := !res.Replay && !e.append && (len(dataFiles) > 0 || e.counts.Updated > 0)
	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if w := Watermark(tbl); w != e.startWatermark {
			// Another run merged meanwhile: the versions resolved here may be stale.
			return nil, fmt.Errorf("silver %s moved to bronze snapshot %d during this run; run again", ident, w)
		}
		tx := tbl.NewTransaction()
		if res.Replay {
			if err := applyRetypes(tx, e.retypes, e.writeSchema); err != nil {
				return nil, err
			}
			if err := replaceAll(ctx, tx, tbl, dataFiles, props); err != nil {
				return nil, err
			}
			return tx.Commit(ctx)
		}
		if !rowDelta {
			// Appends only (or nothing changed, but the watermark must still move forward).
			if err := addOrMark(ctx, tx, dataFiles, props); err != nil {
				return nil, err
			}
			return tx.Commit(ctx)
		}
		rd := tx.NewRowDelta(props)
		rd.AddRows(dataFiles...)
		rd.AddDeletes(dels...)
		if err := rd.Commit(ctx); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return 0, err
	}
	return committed.CurrentSnapshot().SnapshotID, nil
}

// writeQuarantine writes the quarantined rows' data files, for the run to commit (with
// commitFiles and the Bronze watermark) once the quality gate passed.
func (e *engine) writeQuarantine(ctx context.Context, lh *catalog.Lakehouse, ident string) ([]iceberg.DataFile, error) {
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	rec := e.quar.NewRecordBatch()
	if rec.NumRows() == 0 {
		rec.Release()
		return nil, nil
	}
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	files, err := catalog.WriteDataFiles(ctx, tbl, quarantineArrow, one)
	if err != nil {
		return nil, fmt.Errorf("write quarantine files: %w", err)
	}
	return files, nil
}

// commitKeys appends the keys new to the keys table with the Bronze watermark.
func (e *engine) commitKeys(ctx context.Context, lh *catalog.Lakehouse, ident string, res Result) (int64, error) {
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return 0, err
	}
	kc := keyColumns(e.cols, e.spec.Key)
	sch := arrowSchemaOf(kc, e.spec.Key)
	ks := e.keys
	batches := func(yield func(arrow.RecordBatch, error) bool) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		defer b.Release()
		n := 0
		for slot, fresh := range ks.fresh {
			if !fresh {
				continue
			}
			for i := range ks.cols {
				ks.cols[i].appendTo(b.Field(i), slot)
			}
			if n++; n == batchRows {
				n = 0
				if !yield(b.NewRecordBatch(), nil) {
					return
				}
			}
		}
		if n > 0 {
			yield(b.NewRecordBatch(), nil)
		}
	}
	var files []iceberg.DataFile
	if slices.Contains(ks.fresh, true) {
		if files, err = catalog.WriteDataFiles(ctx, tbl, sch, batches); err != nil {
			return 0, fmt.Errorf("write keys files: %w", err)
		}
	}
	check := func(tbl *table.Table) error {
		if w := Watermark(tbl); w != e.startKeysWatermark {
			return fmt.Errorf("keys table %s moved to bronze snapshot %d during this run; run again", ident, w)
		}
		return nil
	}
	return commitFiles(ctx, lh, ident, files, watermarkProps(res), res.Replay, check)
}

// commitFiles commits data files already written (appended, or replacing every file of
// the table), with the summary properties, after check passes on the fresh table.
func commitFiles(ctx context.Context, lh *catalog.Lakehouse, ident string, files []iceberg.DataFile, props iceberg.Properties,
	replace bool, check func(*table.Table) error) (int64, error) {
	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if check != nil {
			if err := check(tbl); err != nil {
				return nil, err
			}
		}
		tx := tbl.NewTransaction()
		var err error
		if replace {
			err = replaceAll(ctx, tx, tbl, files, props)
		} else {
			err = addOrMark(ctx, tx, files, props)
		}
		if err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return 0, err
	}
	return committed.CurrentSnapshot().SnapshotID, nil
}

// replaceAll stages one snapshot that removes every live data and delete file of tbl and
// adds files: the table's contents become exactly files.
func replaceAll(ctx context.Context, tx *table.Transaction, tbl *table.Table, files []iceberg.DataFile, props iceberg.Properties) error {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return addOrMark(ctx, tx, files, props)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return fmt.Errorf("list manifests: %w", err)
	}
	var data, deletes []iceberg.DataFile
	for _, m := range manifests {
		for en, err := range m.Entries(fs, true) {
			if err != nil {
				return fmt.Errorf("read manifest: %w", err)
			}
			if df := en.DataFile(); df.ContentType() == iceberg.EntryContentData {
				data = append(data, df)
			} else {
				deletes = append(deletes, df)
			}
		}
	}
	if len(data) == 0 && len(deletes) == 0 {
		return addOrMark(ctx, tx, files, props)
	}
	return tx.ReplaceFiles(ctx, data, files, deletes, props)
}

// addOrMark appends data files, or, when there are none, commits an empty append
// snapshot that only carries the summary properties (the watermark).
func addOrMark(ctx context.Context, tx *table.Transaction, files []iceberg.DataFile, props iceberg.Properties) error {
	if len(files) == 0 {
		return tx.AddFiles(ctx, nil, props, false)
	}
	return tx.AddDataFiles(ctx, files, props)
}
