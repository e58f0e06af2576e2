package silver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
)

// Options tune one Silver run.
type Options struct {
	Log     *slog.Logger
	Lookups LookupLoader // loads lookups against other entities (CSV files are loaded here)

	afterWrite func() // test hook: between writing data files and committing
}

// Counts accounts for every Bronze row of a run: Current + Superseded + Duplicates +
// Quarantined == Read.
type Counts struct {
	Read        int64 `json:"read"`
	Current     int64 `json:"current"`     // newest version of its key, merged into Silver
	Superseded  int64 `json:"superseded"`  // an older version (in the run, or older than Silver's: a late event)
	Duplicates  int64 `json:"duplicates"`  // the same payload delivered again
	Quarantined int64 `json:"quarantined"` // failed parsing, typing, a required field or a filter rule
	Inserted    int64 `json:"inserted"`    // keys new to Silver
	Updated     int64 `json:"updated"`     // keys whose stored version was replaced
	Deleted     int64 `json:"deleted"`     // of those, soft deletes (op d)
}

// Result summarises one Silver run.
type Result struct {
	Entity               string
	RunID                string
	BronzeFrom, BronzeTo int64 // Bronze snapshots (from exclusive, 0 = the beginning)
	SnapshotID           int64 // new Silver snapshot, 0 if none
	QuarantineSnapshotID int64
	Counts
	Elapsed time.Duration
}

// ErrBronzeExpired means the Bronze snapshot Silver processed last is gone; only a
// replay can rebuild Silver then.
var ErrBronzeExpired = errors.New("bronze snapshot no longer available")

// Run processes the Bronze rows appended since the Bronze snapshot recorded in Silver's
// last commit, merges them into the Silver table and quarantines what fails, recording
// the new Bronze snapshot in the same commits: a crash at any point is repaired by
// running again, and running again without new Bronze rows changes nothing.
func Run(ctx context.Context, lh *catalog.Lakehouse, spec EntitySpec, bronzeIdent string, opt Options) (Result, error) {
	start := time.Now()
	res := Result{Entity: spec.Name, RunID: uuid.NewString()}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if spec.Mode != "upsert" {
		return res, fmt.Errorf("silver %s: mode %q is not supported yet (upsert is)", spec.Name, spec.Mode)
	}
	e, err := newEngine(spec, opt)
	if err != nil {
		return res, fmt.Errorf("silver %s: %w", spec.Name, err)
	}
	e.runID = res.RunID
	sch, err := icebergSchema(e.tcols, spec.Key)
	if err != nil {
		return res, fmt.Errorf("silver %s: %w", spec.Name, err)
	}
	pspec, err := partitionSpec(sch, spec.Key, max(spec.Buckets, 1))
	if err != nil {
		return res, fmt.Errorf("silver %s: %w", spec.Name, err)
	}
	silverTbl, _, err := lh.LoadOrCreateTable(ctx, spec.Table, sch, pspec, tableProperties())
	if err != nil {
		return res, fmt.Errorf("silver %s: %w", spec.Name, err)
	}
	qTbl, _, err := lh.LoadOrCreateTable(ctx, spec.QuarantineTable, quarantineSchema(), quarantineSpec(), tableProperties())
	if err != nil {
		return res, fmt.Errorf("silver %s: %w", spec.Name, err)
	}
	bronzeTbl, err := lh.LoadTable(ctx, bronzeIdent)
	if err != nil {
		return res, fmt.Errorf("silver %s: bronze table %s: %w (run ingest first)", spec.Name, bronzeIdent, err)
	}
	snap := bronzeTbl.CurrentSnapshot()
	if snap == nil {
		res.Elapsed = time.Since(start)
		return res, nil
	}
	res.BronzeTo = snap.SnapshotID

	as, aq := Watermark(silverTbl), Watermark(qTbl)
	e.startWatermark = as
	seq := func(id int64) (int64, error) {
		if id == 0 {
			return 0, nil
		}
		s := bronzeTbl.SnapshotByID(id)
		if s == nil {
			return 0, fmt.Errorf("%w: silver %s last processed bronze snapshot %d, which was expired; rebuild with `goldbridge replay %s`",
				ErrBronzeExpired, spec.Name, id, spec.Name)
		}
		return s.SequenceNumber, nil
	}
	seqS, err := seq(as)
	if err != nil {
		return res, err
	}
	seqQ, err := seq(aq)
	if err != nil {
		return res, err
	}
	if as == res.BronzeTo && aq == res.BronzeTo {
		res.BronzeFrom = as
		res.Elapsed = time.Since(start)
		return res, nil // nothing new
	}
	// Normally both tables stand at the same Bronze snapshot. After a crash between the
	// quarantine commit and the Silver commit one is behind: the range only it misses is
	// read for it alone, then the common range for both.
	lo, hi := as, aq
	loIsSilver := true
	if seqQ < seqS {
		lo, hi, loIsSilver = aq, as, false
	}
	res.BronzeFrom = lo
	if lo != hi {
		if err := e.scan(ctx, bronzeTbl, lo, hi, loIsSilver, !loIsSilver); err != nil {
			return res, fmt.Errorf("silver %s: %w", spec.Name, err)
		}
		if !loIsSilver {
			e.counts = Counts{} // counts describe what Silver processed
		}
	}
	if hi != res.BronzeTo {
		if err := e.scan(ctx, bronzeTbl, hi, res.BronzeTo, true, true); err != nil {
			return res, fmt.Errorf("silver %s: %w", spec.Name, err)
		}
	}

	// Quarantine first: it carries its own watermark, so a crash before the Silver
	// commit does not quarantine the same rows twice.
	if aq != res.BronzeTo {
		res.QuarantineSnapshotID, err = e.commitQuarantine(ctx, lh, spec.QuarantineTable, res)
		if err != nil {
			return res, fmt.Errorf("silver %s: quarantine: %w", spec.Name, err)
		}
	}
	if as != res.BronzeTo {
		if err := e.resolveAgainstStored(ctx, silverTbl); err != nil {
			return res, fmt.Errorf("silver %s: %w", spec.Name, err)
		}
		res.SnapshotID, err = e.commitSilver(ctx, lh, spec.Table, res, opt)
		if err != nil {
			return res, fmt.Errorf("silver %s: %w", spec.Name, err)
		}
	}
	res.Counts = e.counts
	res.Elapsed = time.Since(start)
	return res, nil
}

// Watermark returns the Bronze snapshot id recorded by the newest commit of a Silver (or
// quarantine) table that has one, or 0.
func Watermark(tbl *table.Table) int64 {
	md := tbl.Metadata()
	for s := tbl.CurrentSnapshot(); s != nil; {
		if s.Summary != nil {
			if v, ok := s.Summary.Properties[PropBronzeSnapshot]; ok {
				id, _ := strconv.ParseInt(v, 10, 64)
				return id
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = md.SnapshotByID(*s.ParentSnapshotID)
	}
	return 0
}

// engine holds the compiled entity and the state of one run.
type engine struct {
	spec   EntitySpec
	cols   []ColumnSpec // entity columns + rule columns
	tcols  []ColumnSpec // table columns
	keyIdx []int
	uaIdx  int
	opIdx  int
	parser *parser
	rules  *ruleSet
	opMap  map[string]byte
	w      *winners
	hashes []uint64
	counts Counts
	quar   *array.RecordBuilder
	runID  string
	now    time.Time
	row    []Value
	keyBuf []byte

	startWatermark int64 // Silver's Bronze watermark when the run started
}

func newEngine(spec EntitySpec, opt Options) (*engine, error) {
	loader := opt.Lookups
	rules, extra, err := compileRules(spec.Rules, spec.Columns, func(l LookupSpec) (LookupTable, error) {
		if l.File != "" {
			return LoadCSVLookup(l)
		}
		if loader == nil {
			return nil, fmt.Errorf("lookup against entity %s is not available here", l.Entity)
		}
		return loader(l)
	})
	if err != nil {
		return nil, err
	}
	cols := append(slices.Clone(spec.Columns), extra...)
	p, err := newParser(spec.Columns)
	if err != nil {
		return nil, err
	}
	e := &engine{
		spec: spec, cols: cols, tcols: tableColumns(cols), parser: p, rules: rules,
		w: newWinners(cols), row: make([]Value, len(cols)), uaIdx: -1, opIdx: -1,
		now: time.Now().UTC(), quar: array.NewRecordBuilder(memory.DefaultAllocator, quarantineArrow),
	}
	idx := func(name string) int {
		return slices.IndexFunc(cols, func(c ColumnSpec) bool { return c.Name == name })
	}
	for _, k := range spec.Key {
		i := idx(k)
		if i < 0 {
			return nil, fmt.Errorf("key column %s is not declared", k)
		}
		e.keyIdx = append(e.keyIdx, i)
	}
	if e.uaIdx = idx(spec.UpdatedAt); e.uaIdx < 0 {
		return nil, fmt.Errorf("updated_at column %q is not declared", spec.UpdatedAt)
	}
	if spec.Op != "" {
		if e.opIdx = idx(spec.Op); e.opIdx < 0 {
			return nil, fmt.Errorf("op column %q is not declared", spec.Op)
		}
	}
	e.opMap = map[string]byte{"c": 'c', "u": 'u', "d": 'd', "r": 'r'}
	for op, vals := range spec.OpValues {
		for _, v := range vals {
			e.opMap[v] = op[0]
		}
	}
	return e, nil
}

var bronzeFields = []string{bronze.ColPayload, bronze.ColEventID, bronze.ColIngestTS, bronze.ColFile}

// scan reads Bronze rows appended in (from, to] and feeds them to the Silver and/or
// quarantine side.
func (e *engine) scan(ctx context.Context, bt *table.Table, from, to int64, toSilver, toQuarantine bool) error {
	var (
		recs iter.Seq2[arrow.RecordBatch, error]
		err  error
	)
	if from == 0 {
		_, recs, err = bt.Scan(table.WithSnapshotID(to), table.WithSelectedFields(bronzeFields...)).ToArrowRecords(ctx)
	} else {
		tasks, perr := bt.NewIncrementalAppendScan().FromSnapshotExclusive(from).ToSnapshot(to).PlanFiles(ctx)
		if perr != nil {
			return fmt.Errorf("plan bronze increment (%d, %d]: %w", from, to, perr)
		}
		_, recs, err = bt.Scan(table.WithSelectedFields(bronzeFields...)).ReadTasks(ctx, tasks)
	}
	if err != nil {
		return fmt.Errorf("scan bronze: %w", err)
	}
	for rec, err := range recs {
		if err != nil {
			return fmt.Errorf("scan bronze: %w", err)
		}
		e.batch(rec, toSilver, toQuarantine)
		rec.Release()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func stringCol(rec arrow.RecordBatch, name string) *array.String {
	return rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.String)
}

func (e *engine) batch(rec arrow.RecordBatch, toSilver, toQuarantine bool) {
	payloads := stringCol(rec, bronze.ColPayload)
	events := stringCol(rec, bronze.ColEventID)
	files := stringCol(rec, bronze.ColFile)
	ingest := rec.Column(rec.Schema().FieldIndices(bronze.ColIngestTS)[0]).(*array.Timestamp)
	for i := range int(rec.NumRows()) {
		e.counts.Read++
		raw := payloads.Value(i)
		payload, err := bronze.DecodePayload(raw)
		reason := ""
		if err != nil {
			reason = "invalid_payload_encoding"
		} else if strings.HasPrefix(raw, bronze.BinaryPrefix) {
			reason = "invalid_utf8"
		}
		if reason == "" {
			reason = e.parser.parse(payload, e.row[:len(e.spec.Columns)])
		}
		if reason == "" && e.rules != nil {
			reason = e.rules.apply(e.row)
		}
		var op byte = 'u'
		if reason == "" {
			for _, k := range e.keyIdx {
				if e.row[k].Null {
					reason = "missing_" + e.cols[k].Name
					break
				}
			}
		}
		if reason == "" && e.row[e.uaIdx].Null {
			reason = "missing_" + e.cols[e.uaIdx].Name
		}
		if reason == "" && e.opIdx >= 0 && !e.row[e.opIdx].Null {
			o, ok := e.opMap[e.row[e.opIdx].S]
			if !ok {
				reason = "invalid_op: " + clip(e.row[e.opIdx].S)
			}
			op = o
		}
		if reason != "" {
			e.counts.Quarantined++
			if toQuarantine {
				e.addQuarantine(raw, events.Value(i), reason, ingest, i, files.Value(i))
			}
			continue
		}
		if !toSilver {
			continue
		}
		h := xxhash.Sum64(payload)
		e.hashes = append(e.hashes, h)
		e.w.offer(e.key(e.row), e.row, version{ua: orderValue(e.row[e.uaIdx], e.cols[e.uaIdx].Type), rank: opRank(op), hash: h}, op, events.Value(i))
	}
}

// orderValue maps the updated_at value (timestamp, date or integer; the config checks
// that) to an int64 that orders versions.
func orderValue(v Value, _ Type) int64 { return v.I }

// key renders the business key of a row as one string (values joined by 0x1f).
func (e *engine) key(row []Value) string {
	b := e.keyBuf[:0]
	for i, k := range e.keyIdx {
		if i > 0 {
			b = append(b, 0x1f)
		}
		b = appendKeyText(b, row[k], e.cols[k].Type)
	}
	e.keyBuf = b
	return string(b)
}

func appendKeyText(b []byte, v Value, t Type) []byte {
	switch t.Kind {
	case String:
		return append(b, v.S...)
	case Decimal:
		return append(b, v.D.ToString(int32(t.Scale))...)
	case Bool:
		return strconv.AppendBool(b, v.B)
	default:
		return strconv.AppendInt(b, v.I, 10)
	}
}

func (e *engine) addQuarantine(raw, eventID, reason string, ingest *array.Timestamp, i int, file string) {
	f := e.quar.Fields()
	f[0].(*array.StringBuilder).Append(raw)
	f[1].(*array.StringBuilder).Append(eventID)
	f[2].(*array.StringBuilder).Append(reason)
	f[3].(*array.TimestampBuilder).Append(arrow.Timestamp(e.now.UnixMicro()))
	f[4].(*array.StringBuilder).Append(e.runID)
	if ingest.IsNull(i) {
		f[5].AppendNull()
	} else {
		f[5].(*array.TimestampBuilder).Append(ingest.Value(i))
	}
	f[6].(*array.StringBuilder).Append(file)
}
