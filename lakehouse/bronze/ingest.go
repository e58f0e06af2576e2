package bronze

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"goldbridge/lakehouse/arrowmem"
	"goldbridge/lakehouse/catalog"
)

// Options tune one ingestion run.
type Options struct {
	BatchRows int  // rows per Arrow batch (default 16384)
	Reingest  bool // re-read landing files whose content changed after they were ingested
	// RetryQuarantined reads the quarantined landing files again even when unchanged.
	RetryQuarantined bool
	// Progress, if set, is called after each batch with the bytes and rows read so far.
	Progress func(bytesRead, rows int64)
	// Transform, if set, rewrites every payload before it lands (crypto-shredding:
	// pii.Codec.Encrypt); an error stops the write.
	Transform func(payload []byte) ([]byte, error)
	Log       *slog.Logger
	// Codec compresses the table's data files (the zero value: catalog.DefaultCodec); a
	// table written with another is set to it before the run writes.
	Codec catalog.Codec

	// afterWrite is a test hook between writing the data files and committing them.
	afterWrite func()
}

// Result summarises one ingestion run of one entity.
type Result struct {
	Table      string
	BatchID    string
	SnapshotID int64        // 0 when nothing was committed
	Files      []FileRecord // files ingested by this run
	Skipped    int          // landing files ingested before and unchanged
	Changed    []string     // landing files that changed after ingestion and were not re-read
	Unsettled  []string     // landing files still changing (see FileSource.Settle): left for the next run
	// Waiting are the landing files that end in an unterminated line: their whole lines are
	// read, the rest waits for its newline (FileSource.TailWait).
	Waiting []string
	// Failed are the sources that could not be listed (a landing directory gone): their
	// files wait for the next run, the other sources' files are ingested.
	Failed []FailedSource
	// Quarantined are the landing files that could not be read, newly or still (see
	// QuarantinedFile); the other files of the run are ingested.
	Quarantined []QuarantinedFile
	Rows        int64
	Blank       int64
	Bytes       int64
	Elapsed     time.Duration
}

// IngestFiles loads the landing files of sources that Bronze has not seen yet into the
// table ident, exactly once: the data files are written first and then committed in one
// snapshot whose summary lists the files, so a crash before the commit leaves only
// unreferenced files behind and the next run reads the same files again.
//
// A source that cannot be listed does not stop the others: their files are ingested and
// committed, and the error wraps ErrSourceFailed and names the failed sources
// (Result.Failed; Result says what was committed). If it fails otherwise, nothing is
// committed and the files it wrote are deleted (catalog.WriteAttempt).
func IngestFiles(ctx context.Context, lh *catalog.Lakehouse, ident string, sources []FileSource, opt Options) (Result, error) {
	w := lh.BeginWrite(ident)
	res, err := ingestFiles(ctx, lh, ident, sources, opt)
	if err := w.End(ctx, err); err != nil {
		return res, err
	}
	return res, res.sourcesErr(len(sources))
}

func ingestFiles(ctx context.Context, lh *catalog.Lakehouse, ident string, sources []FileSource, opt Options) (Result, error) {
	start := time.Now()
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	res := Result{Table: ident}
	run, err := NewRun(ctx, lh, ident, opt)
	if err != nil {
		return res, err
	}
	res.BatchID = run.BatchID()
	seen, err := IngestedFiles(run.Table())
	if err != nil {
		return res, fmt.Errorf("bronze %s: %w", ident, err)
	}

	// Files whose mtime changed but not their content (a touch, a copy without times):
	// the checksum says so, and their new mtime rides on this batch's commit, if any, so
	// that the next runs do not read every such file again (PropRedated).
	var redated []FileRecord
	quarantine, err := QuarantinedFiles(run.Table())
	if err != nil {
		return res, fmt.Errorf("bronze %s: %w", ident, err)
	}
	quarantineChanged := false
	addQuarantine := func(f landingFile, reason string, rows int64) {
		q := QuarantinedFile{Path: f.path, Size: f.size, ModTime: f.modTime, Reason: reason, Rows: rows,
			FirstSeen: time.Now().UTC().Format(time.RFC3339)}
		if f.problem == "" {
			q.Checksum, _ = checksumFile(f.path) // "" when it cannot be read at all
		}
		if prev, ok := quarantine[f.path]; ok {
			q.FirstSeen = prev.FirstSeen
		}
		quarantine[f.path], quarantineChanged = q, true
		res.Quarantined = append(res.Quarantined, q)
		opt.Log.Warn("landing file quarantined: not ingested (retried when it changes, or with --retry-quarantined)",
			"file", f.path, "reason", reason, "rows_landed", rows)
	}

	type planned struct {
		src  FileSource
		file landingFile
		from int64 // > 0: only the lines appended after this offset are read
		end  int64 // the read stops here (FileSource.readEnd)
	}
	var plan []planned
	listed := map[string]bool{}
	unlisted := map[string]bool{} // the landing directories of failed sources
	for _, src := range sources {
		files, err := src.list()
		if err != nil { // the other sources go on; this one's files wait for the next run
			res.Failed = append(res.Failed, FailedSource{Name: src.Name, Err: err})
			unlisted[filepath.Clean(src.Dir)] = true
			continue
		}
		for _, f := range files {
			listed[f.path] = true
			if q, ok := quarantine[f.path]; ok && !opt.RetryQuarantined && q.sameContent(f) {
				res.Quarantined = append(res.Quarantined, q) // still quarantined, unchanged
				continue
			}
			if f.problem != "" {
				addQuarantine(f, f.problem, 0)
				continue
			}
			prev, ok := seen[f.path]
			if !ok {
				plan = append(plan, planned{src: src, file: f})
				continue
			}
			changed, err := fileChanged(f, prev)
			if err != nil {
				return res, fmt.Errorf("bronze %s: %w", ident, err)
			}
			switch {
			case !changed && prev.Tail > 0: // its last line was unterminated: see whether it ended
				plan = append(plan, planned{src: src, file: f, from: prev.Size})
			case !changed:
				res.Skipped++
				if prev.ModTime != f.modTime {
					prev.ModTime = f.modTime
					redated = append(redated, prev)
				}
			case !opt.Reingest && src.canResume(f, prev):
				opt.Log.Info("landing file grew since it was ingested; reading its new lines", "file", f.path, "from", prev.Size, "size", f.size)
				plan = append(plan, planned{src: src, file: f, from: prev.Size})
			case opt.Reingest:
				opt.Log.Warn("re-ingesting a landing file that changed after ingestion", "file", f.path)
				plan = append(plan, planned{src: src, file: f})
			default:
				opt.Log.Warn("landing file changed after it was ingested; not re-read (use --reingest to force)",
					"file", f.path, "ingested_size", prev.Size, "size", f.size)
				res.Changed = append(res.Changed, f.path)
			}
		}
	}
	for path := range quarantine { // a quarantined file that was removed is forgotten
		if !listed[path] && !unlisted[filepath.Dir(path)] {
			delete(quarantine, path)
			quarantineChanged = true
		}
	}
	whole := map[string]bool{} // a fresh file known complete (FileSource.whole) does not wait
	for _, p := range plan {
		whole[p.file.path] = p.src.whole(p.file)
	}
	plan = settle(ctx, plan, func(p planned) landingFile { return p.file },
		func(p planned) time.Duration {
			if whole[p.file.path] {
				return 0
			}
			return p.src.Settle
		},
		func(path string) {
			opt.Log.Info("landing file still changing; left for the next run", "file", path)
			res.Unsettled = append(res.Unsettled, path)
		})
	if err := ctx.Err(); err != nil {
		return res, err
	}
	kept := plan[:0]
	for _, p := range plan { // an unterminated last line waits for its newline
		if p.end, err = p.src.readEnd(p.file, p.from, time.Now()); err != nil {
			p.end = p.file.size // the read meets the problem and quarantines the file
		}
		if p.end < p.file.size {
			opt.Log.Info("landing file ends in an unterminated line; it is read once it ends", "file", p.file.path, "bytes", p.file.size-p.end)
			res.Waiting = append(res.Waiting, p.file.path)
		}
		if p.end > p.from || p.end == p.file.size {
			kept = append(kept, p)
		}
	}
	plan = kept
	if len(plan) == 0 && !quarantineChanged {
		res.Elapsed = time.Since(start)
		return res, nil
	}

	names := make([]string, 0, len(sources))
	for _, s := range sources {
		names = append(names, s.Name)
	}
	err = run.Write(ctx, func(emit Emit) error {
		for _, p := range plan {
			rows0 := run.Rows()
			var emitErr error
			checksum, blank, err := p.src.readFileFrom(ctx, p.file.path, p.from, p.end, func(payload []byte, pos int64) error {
				emitErr = emit(payload, p.src.System, p.file.path, pos, time.Time{})
				return emitErr
			})
			if err != nil && (emitErr != nil || ctx.Err() != nil) {
				return fmt.Errorf("read %s: %w", p.file.path, err) // the write failed, not the file
			}
			if err != nil {
				// The records read before the failure stay in the batch (they are whole
				// records); the file is quarantined and read again from its start when it
				// changes. See docs/bronze.md, "Unreadable files".
				addQuarantine(p.file, firstLine(err.Error()), run.Rows()-rows0)
				continue
			}
			if _, ok := quarantine[p.file.path]; ok {
				delete(quarantine, p.file.path)
				quarantineChanged = true
			}
			res.Bytes += p.end
			res.Blank += blank
			res.Files = append(res.Files, FileRecord{
				Path: p.file.path, Size: p.end, ModTime: p.file.modTime, Checksum: checksum,
				Rows: run.Rows() - rows0, Blank: blank, BatchID: res.BatchID, From: p.from, Tail: p.file.size - p.end,
			})
			if opt.Progress != nil {
				opt.Progress(res.Bytes, run.Rows())
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Rows = run.Rows()
	filesJSON, err := json.Marshal(res.Files)
	if err != nil {
		return res, err
	}
	props := iceberg.Properties{
		PropSource: strings.Join(names, ","),
		PropFiles:  string(filesJSON),
		PropBlank:  strconv.FormatInt(res.Blank, 10),
	}
	if len(redated) > 0 {
		b, err := json.Marshal(redated)
		if err != nil {
			return res, err
		}
		props[PropRedated] = string(b)
	}
	if quarantineChanged {
		if run.tableProps, err = quarantineProperty(quarantine); err != nil {
			return res, err
		}
	}
	res.SnapshotID, err = run.Commit(ctx, props, func(tbl *table.Table) error {
		// Another writer may have committed the same files meanwhile: never commit twice.
		now, err := IngestedFiles(tbl)
		if err != nil {
			return err
		}
		for _, f := range res.Files {
			if prev, ok := now[f.Path]; ok && prev.BatchID != res.BatchID && !opt.Reingest && prev.Checksum == f.Checksum {
				return fmt.Errorf("landing file %s was ingested concurrently by batch %s; not committing a duplicate", f.Path, prev.BatchID)
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// Emit adds one record to the Bronze batch being built: the payload as delivered (only
// valid during the call), its _source_system, its _source_file, its _source_pos (where
// in sourceFile it starts, see ColSourcePos) and, if not zero, _source_ts.
type Emit func(payload []byte, system, sourceFile string, pos int64, sourceTS time.Time) error

// EmitRecord adds one record as Emit does, with the key and headers of a Kafka record
// (_source_key, _source_headers; a nil key and no headers are NULL). Like the payload,
// they are only valid during the call.
type EmitRecord func(payload, key []byte, headers []Header, system, sourceFile string, pos int64, sourceTS time.Time) error

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Run is one Bronze write: records are turned into Arrow batches and Parquet data files,
// then committed in one snapshot with the run's summary properties. Sources (files,
// Kafka) drive it; the exactly-once bookkeeping of what they consumed goes into the
// properties passed to Commit.
type Run struct {
	ident     string
	lh        *catalog.Lakehouse
	tbl       *table.Table
	batchID   string
	opt       Options
	rows      int64
	dataFiles []iceberg.DataFile
	// tableProps are set on the table in the commit (the files quarantine), or nil.
	tableProps iceberg.Properties
}

// NewRun prepares a write to the Bronze table ident (created if missing).
func NewRun(ctx context.Context, lh *catalog.Lakehouse, ident string, opt Options) (*Run, error) {
	if opt.BatchRows <= 0 {
		opt.BatchRows = 16_384
	}
	tbl, _, err := lh.LoadOrCreateTable(ctx, ident, Schema(), PartitionSpec(), TableProperties(opt.Codec))
	if err == nil {
		tbl, err = addKeyColumns(ctx, lh, ident, tbl)
	}
	if err != nil {
		return nil, fmt.Errorf("bronze %s: %w", ident, err)
	}
	if tbl, err = addSourcePos(ctx, lh, ident, tbl); err != nil {
		return nil, fmt.Errorf("bronze %s: %w", ident, err)
	}
	return &Run{ident: ident, lh: lh, tbl: tbl, batchID: uuid.NewString(), opt: opt}, nil
}

// Table is the table as loaded when the run started (for reading its history).
func (r *Run) Table() *table.Table { return r.tbl }

// BatchID is the _batch_id of every row of this run.
func (r *Run) BatchID() string { return r.batchID }

// Rows is the number of records emitted so far.
func (r *Run) Rows() int64 { return r.rows }

// Write calls produce with an Emit and writes what it emits as Parquet data files (not
// yet committed), on up to writeStreams Parquet writers at once (encoding and zstd
// bound ingestion: one writer kept one core busy and left the other idle). Memory
// stays bounded by a few batches whatever the input size.
func (r *Run) Write(ctx context.Context, produce func(Emit) error) error {
	return r.WriteRecords(ctx, func(emit EmitRecord) error {
		return produce(func(payload []byte, system, sourceFile string, pos int64, sourceTS time.Time) error {
			return emit(payload, nil, nil, system, sourceFile, pos, sourceTS)
		})
	})
}

// WriteRecords is Write for a source whose records have a key and headers (Kafka).
func (r *Run) WriteRecords(ctx context.Context, produce func(EmitRecord) error) error {
	if r.opt.BatchRows <= 0 {
		r.opt.BatchRows = 16_384
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	streams := max(1, min(runtime.GOMAXPROCS(0), writeStreams))
	queues := make([]chan arrow.RecordBatch, streams)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		werrs []error
	)
	for i := range queues {
		queues[i] = make(chan arrow.RecordBatch, 1)
		q := queues[i]
		wg.Go(func() {
			records := func(yield func(arrow.RecordBatch, error) bool) {
				for rec := range q {
					if !yield(rec, nil) {
						return
					}
				}
			}
			files, err := catalog.WriteDataFiles(ctx, r.tbl, arrowSchema, iter.Seq2[arrow.RecordBatch, error](records),
				table.WithRecordBatchBufferSize(2))
			for rec := range q { // a failed writer still drains its queue
				rec.Release()
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				werrs = append(werrs, err)
				cancel(err)
				return
			}
			r.dataFiles = append(r.dataFiles, files...)
		})
	}
	w := newBatchWriter(r.batchID, r.opt.BatchRows)
	defer w.release()
	next := 0
	send := func(rec arrow.RecordBatch) error {
		select {
		case queues[next] <- rec:
			next = (next + 1) % len(queues)
			return nil
		case <-ctx.Done():
			rec.Release()
			return context.Cause(ctx)
		}
	}
	err := produce(func(payload, key []byte, headers []Header, system, file string, pos int64, sourceTS time.Time) error {
		if r.opt.Transform != nil {
			var err error
			if payload, err = r.opt.Transform(payload); err != nil {
				return fmt.Errorf("transform a payload of %s: %w", file, err)
			}
		}
		w.add(payload, system, file, pos, sourceTS)
		w.addKey(key, headers)
		r.rows++
		if w.full() {
			return send(w.flush())
		}
		return nil
	})
	if err == nil && w.n > 0 {
		err = send(w.flush())
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	if len(werrs) > 0 {
		return fmt.Errorf("bronze %s: write data files: %w", r.ident, errors.Join(werrs...))
	}
	if err != nil {
		return fmt.Errorf("bronze %s: %w", r.ident, err)
	}
	return nil
}

// writeStreams bounds the Parquet writers of one Bronze write.
const writeStreams = 2

// Commit adds the written data files in one snapshot whose summary holds props plus the
// batch id and row count. precheck runs against the freshly loaded table before every
// attempt (a concurrent writer may have consumed the same input); its error aborts.
// It returns the new snapshot id.
func (r *Run) Commit(ctx context.Context, props iceberg.Properties, precheck func(*table.Table) error) (int64, error) {
	if r.opt.afterWrite != nil {
		r.opt.afterWrite()
	}
	all := iceberg.Properties{PropBatchID: r.batchID, PropRows: strconv.FormatInt(r.rows, 10)}
	for k, v := range props {
		all[k] = v
	}
	committed, err := r.lh.Commit(ctx, r.ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if precheck != nil {
			if err := precheck(tbl); err != nil {
				return nil, err
			}
		}
		tx := tbl.NewTransaction()
		if err := tx.AddDataFiles(ctx, r.dataFiles, all); err != nil {
			return nil, err
		}
		if r.tableProps != nil {
			if err := tx.SetProperties(r.tableProps); err != nil {
				return nil, err
			}
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return 0, fmt.Errorf("bronze %s: %w", r.ident, err)
	}
	r.tbl = committed
	if snap := committed.CurrentSnapshot(); snap != nil {
		return snap.SnapshotID, nil
	}
	return 0, nil
}

// fileChanged tells whether a landing file differs from what was ingested: a different
// size, or the same size and mtime but a different checksum is a change.
func fileChanged(f landingFile, prev FileRecord) (bool, error) {
	if f.size != prev.Size+prev.Tail {
		return true, nil
	}
	if f.modTime == prev.ModTime {
		return false, nil
	}
	sum, err := checksumFile(f.path)
	if err != nil {
		return false, err
	}
	return sum != prev.Checksum, nil
}

// IngestedFiles returns every landing file recorded in the table's snapshot summaries
// (PropFiles, and PropRedated: a newer mtime of a file whose content did not change)
// and in its PropFileLog table property (what the summaries of expired snapshots held:
// FoldBookkeeping), by path (the newest record wins).
func IngestedFiles(tbl *table.Table) (map[string]FileRecord, error) {
	out := map[string]FileRecord{}
	if raw, ok := tbl.Properties()[PropFileLog]; ok {
		var recs []FileRecord
		if err := json.Unmarshal([]byte(raw), &recs); err != nil {
			return nil, fmt.Errorf("bad table property %s: %w", PropFileLog, err)
		}
		for _, r := range recs {
			out[r.Path] = r
		}
	}
	snaps := tbl.Metadata().Snapshots()
	for _, s := range snaps { // oldest first, so newer records overwrite older ones
		if s.Summary == nil {
			continue
		}
		for _, key := range []string{PropFileLog, PropFiles, PropRedated} {
			raw, ok := s.Summary.Properties[key]
			if !ok {
				continue
			}
			var recs []FileRecord
			if err := json.Unmarshal([]byte(raw), &recs); err != nil {
				return nil, fmt.Errorf("snapshot %d: bad %s: %w", s.SnapshotID, key, err)
			}
			for _, r := range recs {
				out[r.Path] = r
			}
		}
	}
	return out, nil
}

// batchWriter builds Bronze Arrow batches, one per BatchRows rows (or maxBatchBytes of
// strings). The string columns, nearly all the bytes ingested, are written straight into
// buffers from a recycling pool, which a batch gives back when the Parquet writer
// releases it: Arrow's builders zeroed every buffer twice (Go's allocation, then their
// own growth) and copied it on growth, a seventh of ingestion's CPU.
type batchWriter struct {
	pool     *arrowmem.Pool
	rows     int
	strs     [len(stringCols)]strColumn
	ingestTS *array.TimestampBuilder
	sourceTS *array.TimestampBuilder
	pos      intColumn            // _source_pos
	keys     *array.StringBuilder // _source_key, _source_headers (null for files)
	headers  *array.StringBuilder
	batchID  string
	n        int
	uuids    *uuidGen
	scratch  []byte
}

// stringCols are the indexes of the string columns in arrowSchema, in batchWriter.strs.
var stringCols = [...]int{0, 2, 3, 4, 5}

// maxBatchBytes flushes a batch early when its strings reach it (int32 offsets, bounded
// memory with huge payloads).
const maxBatchBytes = 256 << 20

func newBatchWriter(batchID string, batchRows int) *batchWriter {
	tsType := arrowSchema.Field(1).Type.(*arrow.TimestampType)
	b := &batchWriter{
		pool: arrowmem.NewPool(64 << 20), rows: batchRows, batchID: batchID, uuids: newUUIDGen(),
		ingestTS: array.NewTimestampBuilder(memory.DefaultAllocator, tsType),
		sourceTS: array.NewTimestampBuilder(memory.DefaultAllocator, tsType),
		keys:     array.NewStringBuilder(memory.DefaultAllocator),
		headers:  array.NewStringBuilder(memory.DefaultAllocator),
	}
	b.pos.reset(b.pool, batchRows)
	// The first batch's room: typical value sizes (JSON lines of ~200 bytes; source,
	// file path, event and batch ids), so that it does not grow (copying into fresh
	// pages) value by value. Scratch memory is not touched until written.
	for i, per := range [len(stringCols)]int{256, 16, 64, 36, 36} {
		b.strs[i].reset(b.pool, batchRows, batchRows*per)
	}
	return b
}

func (b *batchWriter) add(payload []byte, system, file string, pos int64, sourceTS time.Time) {
	if utf8.Valid(payload) && !bytes.HasPrefix(payload, []byte(BinaryPrefix)) {
		b.strs[0].add(b.pool, payload) // as delivered, without a copy to scratch
	} else {
		b.scratch, _ = appendPayload(b.scratch[:0], payload)
		b.strs[0].add(b.pool, b.scratch)
	}
	b.strs[1].addString(b.pool, system)
	b.strs[2].addString(b.pool, file)
	b.strs[3].add(b.pool, b.uuids.next())
	b.strs[4].addString(b.pool, b.batchID)
	if sourceTS.IsZero() {
		b.sourceTS.AppendNull()
	} else {
		b.sourceTS.Append(arrow.Timestamp(sourceTS.UnixMicro()))
	}
	b.pos.add(pos)
	b.n++
}

// full tells whether the batch is to be flushed.
func (b *batchWriter) full() bool { return b.n >= b.rows || len(b.strs[0].data) >= maxBatchBytes }

// flush returns the batch built so far, stamped with one _ingest_ts; the next batch's
// buffers are sized from this one's, so they do not grow (and copy) row by row.
func (b *batchWriter) flush() arrow.RecordBatch {
	ts := arrow.Timestamp(time.Now().UTC().UnixMicro())
	for range b.n {
		b.ingestTS.Append(ts)
	}
	cols := make([]arrow.Array, len(arrowSchema.Fields()))
	for i, c := range stringCols {
		used := len(b.strs[i].data)
		cols[c] = b.strs[i].finish(b.pool)
		b.strs[i].reset(b.pool, b.rows, used+used/8)
	}
	cols[1], cols[6] = b.ingestTS.NewArray(), b.sourceTS.NewArray()
	cols[7], cols[8], cols[9] = b.keys.NewArray(), b.headers.NewArray(), b.pos.finish(b.pool)
	b.pos.reset(b.pool, b.rows)
	rec := array.NewRecordBatch(arrowSchema, cols, int64(b.n))
	for _, c := range cols {
		c.Release()
	}
	b.n = 0
	return rec
}

func (b *batchWriter) release() {
	b.ingestTS.Release()
	b.sourceTS.Release()
	b.pos.free(b.pool)
	b.keys.Release()
	b.headers.Release()
}

// strColumn is one string column of the batch being built: values and int32 offsets in
// pool buffers, handed to Arrow without a copy by finish.
type strColumn struct {
	data []byte
	offs []byte  // the offsets' buffer (rows+1 int32)
	off  []int32 // offs as int32
	n    int
}

// reset starts an empty column for up to rows values, with room for dataCap bytes.
func (c *strColumn) reset(pool *arrowmem.Pool, rows, dataCap int) {
	c.data = pool.Scratch(max(dataCap, 64<<10))[:0]
	c.offs = pool.Scratch(4 * (rows + 1))
	c.off = arrow.Int32Traits.CastFromBytes(c.offs)
	c.off[0], c.n = 0, 0
}

func (c *strColumn) add(pool *arrowmem.Pool, v []byte) {
	if len(c.data)+len(v) > cap(c.data) {
		grown := pool.Scratch(max(2*cap(c.data), len(c.data)+len(v)))[:len(c.data)]
		copy(grown, c.data)
		pool.Free(c.data)
		c.data = grown
	}
	c.data = append(c.data, v...)
	c.n++
	c.off[c.n] = int32(len(c.data))
}

func (c *strColumn) addString(pool *arrowmem.Pool, v string) {
	c.add(pool, unsafe.Slice(unsafe.StringData(v), len(v)))
}

// intColumn is an int64 column of the batch being built, without nulls, in a pool buffer
// handed to Arrow without a copy by finish (an Int64Builder cost a fifth of a row's time).
type intColumn struct {
	buf  []byte
	vals []int64 // buf as int64
	n    int
}

// reset starts an empty column for up to rows values.
func (c *intColumn) reset(pool *arrowmem.Pool, rows int) {
	c.buf = pool.Scratch(8 * rows)
	c.vals, c.n = arrow.Int64Traits.CastFromBytes(c.buf), 0
}

func (c *intColumn) add(v int64) {
	c.vals[c.n] = v
	c.n++
}

// finish returns the column as an Arrow int64 array that owns its buffer (returned to
// pool when released); the column must be reset before it is used again.
func (c *intColumn) finish(pool *arrowmem.Pool) arrow.Array {
	data := memory.NewBufferWithAllocator(c.buf[:8*c.n], pool)
	d := array.NewData(arrow.PrimitiveTypes.Int64, c.n, []*memory.Buffer{nil, data}, nil, 0, 0)
	data.Release()
	defer d.Release()
	c.buf, c.vals = nil, nil
	return array.NewInt64Data(d)
}

// free gives back the buffer of a column that was not finished.
func (c *intColumn) free(pool *arrowmem.Pool) {
	if c.buf != nil {
		pool.Free(c.buf)
		c.buf, c.vals = nil, nil
	}
}

// finish returns the column as an Arrow string array that owns its buffers (returned to
// pool when released); the column must be reset before it is used again.
func (c *strColumn) finish(pool *arrowmem.Pool) arrow.Array {
	offs := memory.NewBufferWithAllocator(c.offs[:4*(c.n+1)], pool)
	data := memory.NewBufferWithAllocator(c.data, pool)
	d := array.NewData(arrow.BinaryTypes.String, c.n, []*memory.Buffer{nil, offs, data}, nil, 0, 0)
	offs.Release()
	data.Release()
	defer d.Release()
	c.data, c.offs, c.off = nil, nil, nil
	return array.NewStringData(d)
}

// uuidGen makes each Bronze row's _event_id: a UUID in RFC 9562's version 8 (a vendor's
// layout) whose first 90 free bits are drawn from crypto/rand once per 2^32 ids and
// whose last 32 bits count the ids made since, so the last eight hex digits change from
// one id to the next. Ids are unique as random (version 4) ones are, by the 90 random
// bits of each generator (two of a million generators collide with odds below 10^-15)
// and the counter within one; they are not meant to be unguessable (tracing only).
//
// Why not version 4: 36 random hex digits a row were 37% of a zstd Bronze file's bytes
// (101 of 270 MB at 5M rows) and compressed at ~140 MB/s where the payloads compress at
// ~330; ids that share their first 28 characters compress 60× smaller at ~500 MB/s
// (docs/performance.md, "Event ids that compress").
type uuidGen struct {
	buf  [36]byte
	ctr  uint32
	left uint64 // ids before a new random prefix
}

// uuidCounterAt is where the counter's eight hex digits start in an id's text.
const uuidCounterAt = 28

func newUUIDGen() *uuidGen { return &uuidGen{} }

func (g *uuidGen) next() []byte {
	if g.left == 0 {
		g.reseed()
	}
	g.left--
	c := g.ctr
	g.ctr++
	for i := 7; i >= 0; i-- {
		g.buf[uuidCounterAt+i] = hexDigits[c&0xf]
		c >>= 4
	}
	return g.buf[:]
}

// reseed draws a new random prefix and restarts the counter.
func (g *uuidGen) reseed() {
	var u [16]byte
	_, _ = crand.Read(u[:12])   // never fails (crypto/rand's contract since Go 1.24)
	u[6] = (u[6] & 0x0f) | 0x80 // version 8
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 9562 variant
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			g.buf[j] = '-'
			j++
		}
		g.buf[j], g.buf[j+1] = hexDigits[c>>4], hexDigits[c&0xf]
		j += 2
	}
	g.ctr, g.left = 0, 1<<32
}

// PropQuarantine is the Bronze table property that lists the quarantined landing files:
// a JSON list of QuarantinedFile, set in the same commit as the run's data.
const PropQuarantine = "goldbridge.files-quarantine"

// QuarantinedFile is a landing file that could not be read (corrupt compression, broken
// CSV quoting, unreadable Parquet, permission denied, a dangling symbolic link, ...). It is
// skipped until its content changes (size, mtime and checksum) or the ingest is run with
// RetryQuarantined; the other files are ingested meanwhile.
type QuarantinedFile struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	ModTime   int64  `json:"mtime_ns"`
	Checksum  string `json:"xxh64,omitempty"` // "" when the file could not be opened
	Reason    string `json:"reason"`
	FirstSeen string `json:"first_seen"` // RFC 3339, UTC
	Rows      int64  `json:"rows"`       // records read before the failure (they landed)
}

// sameContent tells whether the listed file is still the quarantined content.
func (q QuarantinedFile) sameContent(f landingFile) bool {
	if f.size != q.Size {
		return false
	}
	if f.modTime == q.ModTime {
		return true
	}
	sum, err := checksumFile(f.path)
	return err == nil && sum == q.Checksum
}

// QuarantinedFiles returns the quarantined landing files of a Bronze table, by path.
func QuarantinedFiles(tbl *table.Table) (map[string]QuarantinedFile, error) {
	out := map[string]QuarantinedFile{}
	raw, ok := tbl.Properties()[PropQuarantine]
	if !ok || raw == "" {
		return out, nil
	}
	var list []QuarantinedFile
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, fmt.Errorf("bad table property %s: %w", PropQuarantine, err)
	}
	for _, q := range list {
		out[q.Path] = q
	}
	return out, nil
}

func quarantineProperty(m map[string]QuarantinedFile) (iceberg.Properties, error) {
	list := make([]QuarantinedFile, 0, len(m))
	for _, q := range m {
		list = append(list, q)
	}
	slices.SortFunc(list, func(a, b QuarantinedFile) int { return strings.Compare(a.Path, b.Path) })
	raw, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	return iceberg.Properties{PropQuarantine: string(raw)}, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// settle keeps the planned files that are stable: one modified less than its source's
// settle time ago is stat'ed again once that time has passed (one wait for all of them),
// and dropped (reported to unsettled) if its size or mtime changed meanwhile.
func settle[P any](ctx context.Context, plan []P, file func(P) landingFile, settleOf func(P) time.Duration, unsettled func(string)) []P {
	now := time.Now()
	var wait time.Duration
	for _, p := range plan {
		s := settleOf(p)
		if s <= 0 {
			continue
		}
		age := now.Sub(time.Unix(0, file(p).modTime))
		if d := min(s-age, s); d > wait { // an mtime in the future waits settle, not until then
			wait = d
		}
	}
	if wait <= 0 {
		return plan
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-t.C:
	}
	kept := plan[:0]
	for _, p := range plan {
		f := file(p)
		if now.Sub(time.Unix(0, f.modTime)) < settleOf(p) {
			info, err := os.Stat(f.path)
			if err != nil || info.Size() != f.size || info.ModTime().UnixNano() != f.modTime {
				unsettled(f.path)
				continue
			}
		}
		kept = append(kept, p)
	}
	return kept
}
