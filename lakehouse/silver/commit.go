package silver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// lookupThreshold is the number of winners up to which stored versions are looked up
// with an IN filter on the key (bucket and file pruning); above it one projected scan of
// the ordering columns is cheaper.
const lookupThreshold = 20_000

// resolveAgainstStored decides each winner's fate against the version stored in Silver:
// insert (new key), update (newer), same (a re-delivery) or older (a late event).
func (e *engine) resolveAgainstStored(ctx context.Context, tbl *table.Table) error {
	w := e.w
	if len(w.keys) == 0 || tbl.CurrentSnapshot() == nil {
		return nil
	}
	fields := []string{ColCDCOp, ColVersion}
	for _, k := range e.keyIdx {
		fields = append(fields, e.cols[k].Name)
	}
	fields = append(fields, e.cols[e.uaIdx].Name)
	opts := []table.ScanOption{table.WithSelectedFields(fields...)}
	if len(w.keys) <= lookupThreshold && len(e.keyIdx) == 1 {
		name := e.cols[e.keyIdx[0]].Name
		vals := make([]string, len(w.keys))
		copy(vals, w.keys)
		if e.cols[e.keyIdx[0]].Type.Kind == String {
			opts = append(opts, table.WithRowFilter(iceberg.IsIn(iceberg.Reference(name), vals...)))
		}
	}
	_, recs, err := tbl.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		return fmt.Errorf("scan stored versions: %w", err)
	}
	row := make([]Value, len(e.cols))
	for rec, err := range recs {
		if err != nil {
			return fmt.Errorf("scan stored versions: %w", err)
		}
		sch := rec.Schema()
		col := func(name string) arrow.Array { return rec.Column(sch.FieldIndices(name)[0]) }
		keyCols := make([]arrow.Array, len(e.keyIdx))
		for i, k := range e.keyIdx {
			keyCols[i] = col(e.cols[k].Name)
		}
		ua := col(e.cols[e.uaIdx].Name)
		ops := col(ColCDCOp).(*array.String)
		hashes := col(ColVersion).(*array.Int64)
		for r := range int(rec.NumRows()) {
			for i, k := range e.keyIdx {
				row[k] = valueAt(keyCols[i], r, e.cols[k].Type)
			}
			slot, ok := w.slots[e.key(row)]
			if !ok {
				continue
			}
			stored := version{ua: valueAt(ua, r, e.cols[e.uaIdx].Type).I, rank: opRank(ops.Value(r)[0]), hash: uint64(hashes.Value(r))}
			switch c := w.ver[slot].cmp(stored); {
			case c > 0:
				w.fate[slot] = fateUpdate
			case c == 0:
				w.fate[slot] = fateSame
			default:
				w.fate[slot] = fateOlder
			}
		}
		rec.Release()
	}
	return nil
}

// valueAt reads one cell of an Arrow column as a Value.
func valueAt(a arrow.Array, i int, t Type) Value {
	if a.IsNull(i) {
		return Value{Null: true}
	}
	switch t.Kind {
	case String:
		return Value{S: a.(*array.String).Value(i)}
	case Int32:
		return Value{I: int64(a.(*array.Int32).Value(i))}
	case Int64:
		return Value{I: a.(*array.Int64).Value(i)}
	case Date:
		return Value{I: int64(a.(*array.Date32).Value(i))}
	case Timestamp:
		return Value{I: int64(a.(*array.Timestamp).Value(i))}
	case Float64:
		return Value{F: a.(*array.Float64).Value(i)}
	case Decimal:
		return Value{D: a.(*array.Decimal128).Value(i)}
	case Bool:
		return Value{B: a.(*array.Boolean).Value(i)}
	}
	return Value{Null: true}
}

// finishCounts fills the accounting from the winners' fates and the payload hashes.
func (e *engine) finishCounts() {
	slices.Sort(e.hashes)
	distinct := int64(len(slices.Compact(e.hashes)))
	valid := e.counts.Read - e.counts.Quarantined
	var same, older int64
	for slot, f := range e.w.fate {
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
		if e.w.op[slot] == 'd' {
			e.counts.Deleted++
		}
	}
	e.counts.Current = e.counts.Inserted + e.counts.Updated
	e.counts.Duplicates = valid - distinct + same
	e.counts.Superseded = distinct - int64(len(e.w.keys)) + older
}

const batchRows = 65536

// winnerBatches yields the rows to write (inserts and updates) as Arrow batches.
func (e *engine) winnerBatches(sch *arrow.Schema) func(func(arrow.RecordBatch, error) bool) {
	return func(yield func(arrow.RecordBatch, error) bool) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		defer b.Release()
		n := 0
		nc := len(e.cols)
		ts := arrow.Timestamp(e.now.UnixMicro())
		for slot, f := range e.w.fate {
			if f != fateInsert && f != fateUpdate {
				continue
			}
			for i := range e.w.cols {
				e.w.cols[i].appendTo(b.Field(i), slot)
			}
			b.Field(nc).(*array.BooleanBuilder).Append(e.w.op[slot] == 'd')
			b.Field(nc + 1).(*array.StringBuilder).Append(string(e.w.op[slot]))
			b.Field(nc + 2).(*array.Int64Builder).Append(int64(e.w.ver[slot].hash))
			b.Field(nc + 3).(*array.StringBuilder).Append(e.w.eventID[slot])
			b.Field(nc + 4).(*array.StringBuilder).Append(e.runID)
			b.Field(nc + 5).(*array.TimestampBuilder).Append(ts)
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
}

// deleteBatches yields the keys of updated rows, for equality deletes of their old versions.
func (e *engine) deleteBatches(sch *arrow.Schema) func(func(arrow.RecordBatch, error) bool) {
	return func(yield func(arrow.RecordBatch, error) bool) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		defer b.Release()
		n := 0
		for slot, f := range e.w.fate {
			if f != fateUpdate {
				continue
			}
			for i, k := range e.keyIdx {
				e.w.cols[k].appendTo(b.Field(i), slot)
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
}

func (e *engine) summary(res Result) (iceberg.Properties, error) {
	counts, err := json.Marshal(e.counts)
	if err != nil {
		return nil, err
	}
	return iceberg.Properties{
		PropBronzeSnapshot: strconv.FormatInt(res.BronzeTo, 10),
		PropRunID:          res.RunID,
		PropCounts:         string(counts),
	}, nil
}

// commitSilver writes the new versions and commits them with equality deletes of the
// versions they replace, and the Bronze watermark, in one row-delta snapshot.
func (e *engine) commitSilver(ctx context.Context, lh *catalog.Lakehouse, ident string, res Result, opt Options) (int64, error) {
	e.finishCounts()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return 0, err
	}
	sch := arrowSchemaOf(e.tcols, e.spec.Key)
	var dataFiles []iceberg.DataFile
	if e.counts.Current > 0 {
		for df, err := range table.WriteRecords(ctx, tbl, sch, e.winnerBatches(sch)) {
			if err != nil {
				return 0, fmt.Errorf("write silver data files: %w", err)
			}
			dataFiles = append(dataFiles, df)
		}
	}
	if opt.afterWrite != nil {
		opt.afterWrite()
	}
	props, err := e.summary(res)
	if err != nil {
		return 0, err
	}
	var eqIDs []int
	keyFields := make([]arrow.Field, len(e.keyIdx))
	for i, k := range e.keyIdx {
		f, _ := tbl.Schema().FindFieldByName(e.cols[k].Name)
		eqIDs = append(eqIDs, f.ID)
		keyFields[i] = arrow.Field{Name: e.cols[k].Name, Type: arrowType(e.cols[k].Type)}
	}
	keySchema := arrow.NewSchema(keyFields, nil)
	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if w := Watermark(tbl); w != e.startWatermark {
			// Another run merged meanwhile: the versions resolved here may be stale.
			return nil, fmt.Errorf("silver %s moved to bronze snapshot %d during this run; run again", ident, w)
		}
		tx := tbl.NewTransaction()
		if len(dataFiles) == 0 && e.counts.Updated == 0 {
			// Nothing changed, but the watermark must still move forward.
			if err := addOrMark(ctx, tx, nil, props); err != nil {
				return nil, err
			}
			return tx.Commit(ctx)
		}
		rd := tx.NewRowDelta(props)
		rd.AddRows(dataFiles...)
		if e.counts.Updated > 0 {
			dels, err := tx.WriteEqualityDeletes(ctx, eqIDs, e.deleteBatches(keySchema))
			if err != nil {
				return nil, fmt.Errorf("write equality deletes: %w", err)
			}
			rd.AddDeletes(dels...)
		}
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

// commitQuarantine appends the quarantined rows with the Bronze watermark.
func (e *engine) commitQuarantine(ctx context.Context, lh *catalog.Lakehouse, ident string, res Result) (int64, error) {
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return 0, err
	}
	rec := e.quar.NewRecordBatch()
	var files []iceberg.DataFile
	if rec.NumRows() > 0 {
		one := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
		for df, err := range table.WriteRecords(ctx, tbl, quarantineArrow, one) {
			if err != nil {
				return 0, fmt.Errorf("write quarantine files: %w", err)
			}
			files = append(files, df)
		}
	} else {
		rec.Release()
	}
	props := iceberg.Properties{
		PropBronzeSnapshot: strconv.FormatInt(res.BronzeTo, 10),
		PropRunID:          res.RunID,
	}
	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := addOrMark(ctx, tx, files, props); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return 0, err
	}
	return committed.CurrentSnapshot().SnapshotID, nil
}

// addOrMark appends data files, or, when there are none, commits an empty append
// snapshot that only carries the summary properties (the watermark).
func addOrMark(ctx context.Context, tx *table.Transaction, files []iceberg.DataFile, props iceberg.Properties) error {
	if len(files) == 0 {
		return tx.AddFiles(ctx, nil, props, false)
	}
	return tx.AddDataFiles(ctx, files, props)
}
