package silver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"
	"github.com/twmb/murmur3"
	"github.com/zeebo/xxh3"

	"goldbridge/lakehouse/arrowmem"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/filescan"
)

// Options tune one Silver run.
type Options struct {
	Log     *slog.Logger
	Lookups LookupLoader // loads lookups against other entities (CSV files are loaded here)
	// Decrypt, if set, restores the encrypted PII fields of a payload before it is
	// parsed (crypto-shredding: pii.Codec.Decrypt; shredded fields read as null). It
	// must be safe for concurrent use; an error quarantines the row (pii_undecryptable).
	Decrypt func(payload []byte) ([]byte, error)
	// PassRows bounds the memory of a large run: when the Bronze rows Silver reads
	// exceed it, the run builds Silver in passes over groups of keys (whole Iceberg
	// buckets of the key), each pass reading Bronze again, holding only its group's
	// winners and writing its group's data files, and commits every pass's files in
	// one snapshot at the end. 0 means DefaultPassRows; a negative value, one pass
	// whatever the size.
	PassRows int64

	afterPass   func(group int)          // test hook: after each pass's data files are written
	afterWrite  func()                   // test hook: between writing Silver data files and committing
	afterCommit func(ident string) error // test hook: after each table commit; an error stops the run there
}

// Counts accounts for every Bronze row of a run: Current + Superseded + Duplicates +
// Quarantined + Skipped == Read.
type Counts struct {
	Read        int64 `json:"read"`
	Current     int64 `json:"current"`     // upsert: newest version of its key, merged; append: appended
	Superseded  int64 `json:"superseded"`  // upsert: an older version (in the run, or older than Silver's: a late event)
	Duplicates  int64 `json:"duplicates"`  // upsert: the same payload again; append: an event key seen before (in the run or in Silver)
	Quarantined int64 `json:"quarantined"` // failed parsing, typing, a required field or a filter rule
	Skipped     int64 `json:"skipped"`     // Debezium tombstones: no change, never quarantined (debezium.go)
	Inserted    int64 `json:"inserted"`    // keys new to Silver
	Updated     int64 `json:"updated"`     // keys whose stored version was replaced
	Deleted     int64 `json:"deleted"`     // of those, soft deletes (op d)
}

// Result summarises one Silver run.
type Result struct {
	Entity               string
	RunID                string
	Replay               bool
	BronzeFrom, BronzeTo int64 // Bronze snapshots (from exclusive, 0 = the beginning)
	SnapshotID           int64 // new Silver snapshot, 0 if none
	QuarantineSnapshotID int64
	KeysSnapshotID       int64 // new keys-table snapshot (append mode with a keys table)
	Passes               int   // the passes over Bronze that built Silver (see Options.PassRows)
	Counts
	Quality Quality
	Elapsed time.Duration
}

// ErrQuarantineGate means a run quarantined more of its Bronze rows than the entity's
// FailQuarantinePct: nothing was committed (a broken producer or a wrong spec, not bad
// records); the error names the top reasons. Running again fails the same way until the
// cause is fixed (the spec, or the gate raised).
var ErrQuarantineGate = errors.New("quarantine gate")

// ErrCriticalCheck means a critical check of the run's quality report failed (see
// EntitySpec.Severity): nothing was committed, and the error names the checks. Running
// again fails the same way until the cause is fixed (the spec, or the severity lowered).
var ErrCriticalCheck = errors.New("critical quality check failed")

// ErrBronzeExpired means the Bronze snapshot Silver processed last is gone; only a
// replay can rebuild Silver then.
var ErrBronzeExpired = errors.New("bronze snapshot no longer available")

// Run processes the Bronze rows appended since the Bronze snapshot recorded in Silver's
// last commit, merges (upsert) or appends (append) them into the Silver table and
// quarantines what fails, recording the new Bronze snapshot in the same commits: a crash
// at any point is repaired by running again, and running again without new Bronze rows
// changes nothing. The tables are created, or their schema evolved to the spec, first.
func Run(ctx context.Context, lh *catalog.Lakehouse, spec EntitySpec, bronzeIdent string, opt Options) (Result, error) {
	return run(ctx, lh, spec, bronzeIdent, opt, false)
}

// Replay rebuilds Silver, its quarantine table and (append mode) its keys table from
// all of Bronze at its current snapshot, replacing each table's contents in one commit
// (old files removed, new ones added) whose summary records the Bronze snapshot and
// goldbridge.replay=true. The result equals the incremental history (run ids and
// timestamps aside; see docs/silver.md for the append-mode lookback exception). Use it
// after Bronze snapshots Silver still needed were expired, or after a rule change.
func Replay(ctx context.Context, lh *catalog.Lakehouse, spec EntitySpec, bronzeIdent string, opt Options) (Result, error) {
	return run(ctx, lh, spec, bronzeIdent, opt, true)
}

// DefaultPassRows is the Bronze rows one Silver pass reads at most by default (see
// Options.PassRows): about 1.5 GB peak RSS for the demo's orders (~3.3 versions per
// key, ten columns); see docs/silver.md.
const DefaultPassRows = 12_000_000

// maxPasses bounds the key groups of a run (a group is a uint8 in chunk.shard and
// engine.rowGroup, below otherGroup).
const maxPasses = 254

// passes is the number of key groups a run of rows Bronze rows builds Silver in.
func (e *engine) passes(rows, limit int64) int {
	if limit == 0 {
		limit = DefaultPassRows
	}
	if limit < 0 || rows <= limit {
		return 1
	}
	p := int((rows + limit - 1) / limit)
	if maxG := e.maxGroups(); maxG > 0 {
		p = min(p, maxG)
	}
	return max(min(p, maxPasses), 1)
}

// sink is a table a range of Bronze rows is read for.
type sink uint8

const (
	sinkSilver sink = 1 << iota
	sinkQuarantine
	sinkKeys
)

// run does Run and Replay; the files of a failed run are deleted (catalog.WriteAttempt).
func run(ctx context.Context, lh *catalog.Lakehouse, spec EntitySpec, bronzeIdent string, opt Options, replay bool) (Result, error) {
	w := lh.BeginWrite(spec.Table, spec.QuarantineTable, spec.KeysTable)
	res, err := runWrite(ctx, lh, spec, bronzeIdent, opt, replay)
	return res, w.End(ctx, err)
}

func runWrite(ctx context.Context, lh *catalog.Lakehouse, spec EntitySpec, bronzeIdent string, opt Options, replay bool) (Result, error) {
	start := time.Now()
	res := Result{Entity: spec.Name, RunID: uuid.NewString(), Replay: replay}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	fail := func(err error) (Result, error) { return res, fmt.Errorf("silver %s: %w", spec.Name, err) }
	if spec.Mode != ModeUpsert && spec.Mode != ModeAppend {
		return fail(fmt.Errorf("mode %q: want upsert or append", spec.Mode))
	}
	if opt.Lookups == nil {
		opt.Lookups = lakeLoader(ctx, lh)
	}
	e, err := newEngine(spec, opt)
	if err != nil {
		return fail(err)
	}
	e.runID = res.RunID
	e.decrypt = opt.Decrypt
	silverTbl, err := e.openSilver(ctx, lh, replay)
	if err != nil {
		return fail(err)
	}
	sch := silverTbl.Schema()
	if e.retypes != nil {
		sch = e.writeSchema
	}
	e.quality.SchemaIssues, e.quality.SchemaNotes = schemaIssues(sch, e.tcols)
	qTbl, _, err := lh.LoadOrCreateTable(ctx, spec.QuarantineTable, quarantineSchema(), quarantineSpec(), tableProperties())
	if err != nil {
		return fail(err)
	}
	var keysTbl *table.Table
	if e.keys != nil {
		ksch, kspec, err := keysTableLayout(e.cols, e.spec)
		if err != nil {
			return fail(err)
		}
		if keysTbl, _, err = lh.LoadOrCreateTable(ctx, spec.KeysTable, ksch, kspec, tableProperties()); err != nil {
			return fail(err)
		}
	}
	bronzeTbl, err := lh.LoadTable(ctx, bronzeIdent)
	if err != nil {
		return fail(fmt.Errorf("bronze table %s: %w (run ingest first)", bronzeIdent, err))
	}
	e.readsBronze(bronzeTbl)
	done := func() (Result, error) {
		res.Counts = e.counts
		e.quality.aggregate(e.counts, spec)
		res.Quality = e.quality
		res.Elapsed = time.Since(start)
		return res, nil
	}
	snap := bronzeTbl.CurrentSnapshot()
	if snap == nil {
		return done()
	}
	res.BronzeTo = snap.SnapshotID

	// The Bronze snapshot each table has processed up to (0 = none; a replay starts
	// every table from nothing).
	type mark struct {
		sink    sink
		id, seq int64
	}
	marks := []mark{{sink: sinkSilver}, {sink: sinkQuarantine}}
	if keysTbl != nil {
		marks = append(marks, mark{sink: sinkKeys})
	}
	if !replay {
		stale, err := e.staleLookups(ctx, silverTbl)
		if err != nil {
			return fail(err)
		}
		if len(stale) > 0 {
			return e.restale(ctx, lh, spec, bronzeIdent, opt, stale)
		}
	}
	e.startWatermark = Watermark(silverTbl)
	if keysTbl != nil {
		e.startKeysWatermark = Watermark(keysTbl)
	}
	if !replay {
		for i := range marks {
			switch marks[i].sink {
			case sinkSilver:
				marks[i].id = e.startWatermark
			case sinkQuarantine:
				marks[i].id = Watermark(qTbl)
			case sinkKeys:
				marks[i].id = e.startKeysWatermark
			}
			if marks[i].id == 0 {
				continue
			}
			s := bronzeTbl.SnapshotByID(marks[i].id)
			if s == nil {
				return res, fmt.Errorf("%w: silver %s last processed bronze snapshot %d, which was expired; rebuild with `goldbridge replay %s` (or, if a `goldbridge forget` was interrupted, run that forget again: it rebuilds and cleans every table)",
					ErrBronzeExpired, spec.Name, marks[i].id, spec.Name)
			}
			marks[i].seq = s.SequenceNumber
		}
	}
	if keysTbl != nil && marks[2].seq > marks[0].seq {
		// The keys table is committed after Silver, so it can only lag. Ahead, it would
		// make this run drop new events as duplicates.
		return fail(fmt.Errorf("keys table %s is ahead of %s (bronze snapshot %d > %d); rebuild with `goldbridge replay %s`",
			spec.KeysTable, spec.Table, marks[2].id, marks[0].id, spec.Name))
	}
	res.BronzeFrom = marks[0].id

	// Normally every table stands at the same Bronze snapshot. After a crash between
	// the commits of one run (quarantine, then Silver, then keys), or when a table is
	// new, some lag: each range between two distinct watermarks is read once, for the
	// tables that have not processed it. Counts describe what Silver processed.
	slices.SortStableFunc(marks, func(a, b mark) int { return cmp64(a.seq, b.seq) })
	var ranges []bronzeRange
	var silverRows int64
	for i, m := range marks {
		if m.id == res.BronzeTo || i+1 < len(marks) && marks[i+1].seq == m.seq {
			continue // up to date, or the same range is read from the next mark
		}
		r := bronzeRange{from: m.id, to: res.BronzeTo}
		for _, o := range marks[:i+1] {
			r.sinks |= o.sink
		}
		if i+1 < len(marks) {
			r.to = marks[i+1].id
		}
		if r.tasks, err = planBronze(ctx, bronzeTbl, r.from, r.to); err != nil {
			return fail(err)
		}
		if r.sinks&sinkSilver != 0 {
			silverRows += r.rows()
		}
		ranges = append(ranges, r)
	}
	e.groups = e.passes(silverRows, opt.PassRows)
	res.Passes = e.groups
	if e.groups > 1 {
		opt.Log.Info("silver builds in passes", "bronze_rows", silverRows, "passes", e.groups)
	}
	if err := e.scanRanges(ctx, bronzeTbl, ranges, opt); err != nil {
		return fail(err)
	}
	e.quality.Undeclared, e.quality.UndeclaredOverflow = e.drift.fields, e.drift.overflow
	e.warnUndated(opt.Log)
	need := func(s sink) bool {
		for _, m := range marks {
			if m.sink == s {
				return m.id != res.BronzeTo || replay
			}
		}
		return false
	}

	if err := e.quarantineGate(); err != nil {
		res.Counts = e.counts
		return fail(err)
	}
	// The quarantine's files are written now, before the passes (their rows are held
	// since the first read), and committed after the quality gate.
	var quarantined []iceberg.DataFile
	if need(sinkQuarantine) {
		if quarantined, err = e.writeQuarantine(ctx, lh, spec.QuarantineTable); err != nil {
			return fail(fmt.Errorf("quarantine: %w", err))
		}
	}
	tabs := passTables{bronze: bronzeTbl, silver: silverTbl, keys: keysTbl, silverIdent: spec.Table}
	written, err := e.buildPasses(ctx, lh, tabs, ranges, opt, replay, need(sinkSilver))
	if err != nil {
		return fail(err)
	}
	// The quality gate, before the first commit: a failed critical check commits nothing.
	e.quality.aggregate(e.counts, spec)
	e.quality.judge(spec.Severity)
	if err := e.quality.criticalError(); err != nil {
		res.Counts, res.Quality, res.Elapsed = e.counts, e.quality, time.Since(start)
		return fail(err)
	}
	// Quarantine first: it carries its own watermark, so a crash before the Silver
	// commit does not quarantine the same rows twice. The keys table last: a key in it
	// means the event is in Silver.
	if need(sinkQuarantine) {
		if res.QuarantineSnapshotID, err = commitFiles(ctx, lh, spec.QuarantineTable, quarantined, watermarkProps(res), res.Replay, nil); err != nil {
			return fail(fmt.Errorf("quarantine: %w", err))
		}
		if err := hook(opt, spec.QuarantineTable); err != nil {
			return fail(err)
		}
	}
	if need(sinkSilver) {
		t0 := time.Now()
		if res.SnapshotID, err = e.commitSilver(ctx, lh, spec.Table, res, opt, written); err != nil {
			return fail(err)
		}
		opt.Log.Debug("silver commit", "seconds", time.Since(t0).Seconds())
		if err := hook(opt, spec.Table); err != nil {
			return fail(err)
		}
	}
	if keysTbl != nil && need(sinkKeys) {
		if res.KeysSnapshotID, err = e.commitKeys(ctx, lh, spec.KeysTable, res); err != nil {
			return fail(fmt.Errorf("keys table: %w", err))
		}
		if err := hook(opt, spec.KeysTable); err != nil {
			return fail(err)
		}
	}
	return done()
}

// passTables are the tables the passes of a run read and write.
type passTables struct {
	bronze, silver, keys *table.Table
	silverIdent          string
}

// buildPasses builds Silver in e.groups passes over the key groups: each resolves its
// keys against the stored versions (not in a replay) and, with write, writes their files;
// every pass after the first reads Bronze again. The files are for the run's one commit.
func (e *engine) buildPasses(ctx context.Context, lh *catalog.Lakehouse, t passTables, ranges []bronzeRange, opt Options, replay, write bool) (silverFiles, error) {
	var written silverFiles
	for g := range e.groups {
		if g > 0 {
			// The next group: the winners of the last are written, Bronze is read again.
			e.group = g
			e.resetWinners()
			if err := e.scanRanges(ctx, t.bronze, ranges, opt); err != nil {
				return written, err
			}
		}
		if !replay {
			if err := e.resolveLogged(ctx, t.silver, t.keys, opt); err != nil {
				return written, err
			}
		}
		if write {
			t0 := time.Now()
			if err := e.writeSilver(ctx, lh, t.silverIdent, &written); err != nil {
				return written, err
			}
			opt.Log.Debug("silver write", "pass", g, "seconds", time.Since(t0).Seconds())
		}
		if opt.afterPass != nil {
			opt.afterPass(g)
		}
	}
	return written, nil
}

// resolveLogged resolves this pass's keys against the stored versions and logs what the
// lookup read.
func (e *engine) resolveLogged(ctx context.Context, silverTbl, keysTbl *table.Table, opt Options) error {
	t0 := time.Now()
	if err := e.resolve(ctx, silverTbl, keysTbl); err != nil {
		return err
	}
	attrs := []any{"seconds", time.Since(t0).Seconds()}
	if p := e.lookupPruner; p != nil {
		attrs = append(attrs, "files", p.files, "files_read", p.filesKept, "row_groups", p.rowGroups.Load(), "row_groups_read", p.rowGroupsKept.Load(),
			"rows_read", p.rowsKept.Load())
	}
	opt.Log.Debug("silver resolve", attrs...)
	return nil
}

func hook(opt Options, ident string) error {
	if opt.afterCommit == nil {
		return nil
	}
	return opt.afterCommit(ident)
}

// openSilver loads the Silver table, creating it, or evolving its schema to the spec; a
// replay keeps the type changes Iceberg cannot promote for its commit (e.retypes).
func (e *engine) openSilver(ctx context.Context, lh *catalog.Lakehouse, replay bool) (*table.Table, error) {
	sch, err := icebergSchema(e.tcols, e.spec.Key)
	if err != nil {
		return nil, err
	}
	pspec, err := partitionSpec(sch, e.spec)
	if err != nil {
		return nil, err
	}
	order, err := sortOrder(sch, e.spec)
	if err != nil {
		return nil, err
	}
	tbl, created, err := lh.LoadOrCreateTable(ctx, e.spec.Table, sch, pspec, silverProperties(e.spec), icecat.WithSortOrder(order))
	if err != nil {
		return nil, err
	}
	e.keyHashCols = !e.append
	if !created && e.keyHashCols && !hasKeyHash(tbl.Schema()) {
		e.keyHashCols, e.tcols = false, withoutKeyHash(e.tcols)
	}
	if created {
		return tbl, nil
	}
	var layout []string
	if e.append && e.spec.EventTime != "" {
		layout = append(layout, e.spec.EventTime) // the partition's source
	}
	tbl, e.retypes, err = evolveSchema(ctx, lh, e.spec, tbl, e.tcols, append(layout, e.spec.SortBy...), replay)
	if err != nil || len(e.retypes) == 0 {
		return tbl, err
	}
	staged, err := e.writeTable(tbl)
	if err != nil {
		return nil, err
	}
	e.writeSchema = staged.Schema()
	return tbl, nil
}

// writeTable is tbl as the run's Silver files are written for it: with a replay's
// retypes staged, so that the files carry the new columns' field ids.
func (e *engine) writeTable(tbl *table.Table) (*table.Table, error) {
	if len(e.retypes) == 0 {
		return tbl, nil
	}
	tx := tbl.NewTransaction()
	if err := applyRetypes(tx, e.retypes, e.writeSchema); err != nil {
		return nil, err
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return nil, err
	}
	return staged.Table, nil
}

// Watermark returns the Bronze snapshot id recorded by the newest commit of a Silver (or
// quarantine) table that has one, or 0.
func Watermark(tbl *table.Table) int64 {
	s := catalog.NewestWith(tbl, PropBronzeSnapshot)
	if s == nil {
		return 0
	}
	id, _ := strconv.ParseInt(s.Summary.Properties[PropBronzeSnapshot], 10, 64)
	return id
}

// engine holds the compiled entity and the state of one run.
type engine struct {
	spec         EntitySpec
	append       bool         // append mode
	cols         []ColumnSpec // entity columns + rule columns
	tcols        []ColumnSpec // table columns
	keyHashCols  bool         // the table has the key hash columns (upsert tables created with them)
	keyIdx       []int
	uaIdx        int // upsert: updated_at (a Debezium entity ordered by position: _cdc_position)
	seqIdx       int // a Debezium entity ordered by position: _cdc_sequence, else -1
	carriedIdx   int // and _cdc_carried, else -1
	opIdx        int // upsert: op, or -1
	etIdx        int // append: event_time, or -1
	rules        *ruleSet
	opMap        map[string]byte
	ws           []*winners             // the winners, one shard per merge goroutine (see shardOfKey)
	sortBy       []int                  // columns the written rows are sorted by
	replaced     map[int]map[int64]bool // upsert: per sort_by column, the values of the versions replaced (see PropReplacedPrefix)
	written      map[int]map[int64]bool // per sort_by column, the values of the rows written (see PropWrittenPrefix)
	bucketShards bool                   // shard by the Iceberg bucket of the key (each data file from one shard)
	counts       Counts
	reasons      map[string]int64 // quarantined rows by reason class (before ": "), for the gate
	quar         *array.RecordBuilder
	runID        string
	now          time.Time
	keyBuf       []byte
	keys         *keySet // append mode with a keys table
	decrypt      func([]byte) ([]byte, error)

	deliveryIdx  int          // IdentityDelivery: the ColDeliveryID column, or -1
	bronzeFields []string     // the Bronze columns read (see readsBronze)
	bronzeDirect bool         // Bronze may be read with filescan (its files have every column read)
	undated      atomic.Int64 // IdentityDelivery: Bronze rows without a position (first pass)

	quality Quality
	drift   fieldTally // the run's undeclared fields (drift.go)

	refill []refill // late Debezium versions that give a stored row a column it lacks (debezium_toast.go)

	lookupPruner *keyPruner // the stored-version lookup's, for its counts (nil: none)

	group, groups int // the key group of this pass, of groups (see Options.PassRows)
	// rowGroup is the key group of each Bronze row of the range being read, in read
	// order (otherGroup: quarantined), recorded by the first pass so that the others
	// skip other groups' rows unparsed; nil when not recorded. rowsRead counts the rows
	// the range's read yielded.
	rowGroup []uint8
	rowsRead int64

	startWatermark     int64 // Silver's Bronze watermark when the run started
	startKeysWatermark int64 // the keys table's

	// retypes are the type changes a replay applies in its commit (applyRetypes), and
	// writeSchema the table's schema with them, which its data files are written for.
	retypes     []schemaChange
	writeSchema *iceberg.Schema
}

func newEngine(spec EntitySpec, opt Options) (*engine, error) {
	spec, err := withIdentity(spec)
	if err != nil {
		return nil, err
	}
	loader := opt.Lookups
	rules, _, err := compileRules(spec.Rules, spec.Columns, func(l LookupSpec) (LookupTable, string, error) {
		if loader == nil {
			return nil, "", fmt.Errorf("lookup against entity %s is not available here", l.Entity)
		}
		return loader(l)
	})
	if err != nil {
		return nil, err
	}
	cols, err := entityColumns(rules.cols, spec) // the declared columns (as the rules retype them), the rules' own, goldbridge's
	if err != nil {
		return nil, err
	}
	if spec.Debezium != nil {
		if spec.Mode != ModeUpsert {
			return nil, errors.New("a Debezium entity is mode upsert")
		}
		if spec.Op != "" || len(spec.OpValues) > 0 {
			return nil, errors.New("a Debezium entity takes its op from the events (no op column)")
		}
		if err := spec.Debezium.check(); err != nil {
			return nil, err
		}
		if spec.UpdatedAt == "" { // ordered by the source position, stored in two columns
			cols = append(cols, debeziumPositionCols...)
		}
	}
	if _, err := newParser(spec.Columns); err != nil { // defaults are checked here
		return nil, err
	}
	e := &engine{
		spec: spec, append: spec.Mode == ModeAppend, cols: cols, tcols: tableColumns(cols, spec.Mode), rules: rules,
		uaIdx: -1, seqIdx: -1, carriedIdx: -1, opIdx: -1, etIdx: -1, deliveryIdx: -1,
		now: time.Now().UTC(), quar: array.NewRecordBuilder(memory.DefaultAllocator, quarantineArrow),
	}
	e.ws = make([]*winners, mergeShards())
	e.groups = 1
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
	if spec.Identity == IdentityDelivery {
		e.deliveryIdx = idx(ColDeliveryID)
	}
	if len(e.keyIdx) == 0 {
		return nil, errors.New("no key columns")
	}
	for _, c := range spec.SortBy {
		i := idx(c)
		if i < 0 {
			return nil, fmt.Errorf("sort_by column %s is not declared", c)
		}
		e.sortBy = append(e.sortBy, i)
	}
	switch cols[e.keyIdx[0]].Type.Kind {
	case String, Int32, Int64, Date, Timestamp:
		// Bucket-partitioned on the first key column with at least two buckets per shard.
		e.bucketShards = !(spec.Mode == ModeAppend && spec.EventTime != "") && spec.Buckets >= 2*len(e.ws)
	}
	e.resetWinners()
	if e.append {
		if spec.EventTime != "" {
			if e.etIdx = idx(spec.EventTime); e.etIdx < 0 {
				return nil, fmt.Errorf("event_time column %q is not declared", spec.EventTime)
			}
			if k := cols[e.etIdx].Type.Kind; k != Timestamp && k != Date {
				return nil, fmt.Errorf("event_time column %q must be a timestamp or date", spec.EventTime)
			}
		} else if spec.Lookback > 0 {
			return nil, errors.New("lookback needs event_time (the window is on that column)")
		}
		if spec.KeysTable != "" {
			e.keys = newKeySet(keyColumns(cols, spec.Key))
		}
		return e, nil
	}
	if spec.Debezium != nil && spec.UpdatedAt == "" {
		e.uaIdx, e.seqIdx, e.carriedIdx = idx(ColCDCPosition), idx(ColCDCSequence), idx(ColCDCCarried)
		return e, nil
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

// entityColumns are the columns of an entity's rows: the declared columns (as the rules
// retype them), the rules' own, then (IdentityDelivery) ColDeliveryID.
func entityColumns(ruleCols []ColumnSpec, spec EntitySpec) ([]ColumnSpec, error) {
	cols := slices.Clone(ruleCols)
	if spec.Identity != IdentityDelivery {
		return cols, nil
	}
	if slices.ContainsFunc(cols, func(c ColumnSpec) bool { return c.Name == ColDeliveryID }) {
		return nil, fmt.Errorf("column %s: goldbridge adds it with identity %s", ColDeliveryID, IdentityDelivery)
	}
	return append(cols, deliveryColumn), nil
}

// readsBronze sets the Bronze columns the run reads: the payload and its audit columns,
// plus, with IdentityDelivery, the record's position if the table has the column (a table
// not ingested into since Bronze added it has none: its rows are named by their event id).
// Files written before the column was added lack it: then the table scan, which reads
// it as null there, reads Bronze instead of filescan.
func (e *engine) readsBronze(bt *table.Table) {
	e.bronzeFields, e.bronzeDirect = bronzeFields, true
	if e.deliveryIdx < 0 {
		return
	}
	if _, ok := bt.Schema().FindFieldByName(bronze.ColSourcePos); ok {
		e.bronzeFields = append(slices.Clone(bronzeFields), bronze.ColSourcePos)
		e.bronzeDirect = !filescan.Evolved(bt)
	}
}

// warnUndated says how many Bronze rows the run named by their event id, having no
// position (IdentityDelivery).
func (e *engine) warnUndated(log *slog.Logger) {
	if n := e.undated.Load(); n > 0 {
		log.Warn("bronze rows without a _source_pos (ingested before Bronze recorded positions): each is a delivery of its own, named by its _event_id; a record Bronze holds twice among them is kept twice",
			"entity", e.spec.Name, "rows", n)
	}
}

// direct tells whether tasks of Bronze are read with filescan (see readsBronze).
func (e *engine) direct(tasks []table.FileScanTask) bool {
	return e.bronzeDirect && filescan.Direct(tasks)
}

// bronzeReadBatch is the Arrow batch size of Bronze reads: the payload column of a
// large batch is grown (copied and zeroed) over and over by the Parquet reader.
const bronzeReadBatch = 16384

var bronzeFields = []string{bronze.ColPayload, bronze.ColEventID, bronze.ColIngestTS, bronze.ColFile}

// bronzeRange is a range (from, to] of Bronze snapshots a run reads, for sinks.
type bronzeRange struct {
	from, to int64
	sinks    sink
	tasks    []table.FileScanTask
	rowGroup []uint8 // see engine.rowGroup
}

// rows is the number of Bronze rows of the range.
func (r bronzeRange) rows() int64 {
	var n int64
	for _, t := range r.tasks {
		if t.Start == 0 {
			n += t.File.Count()
		}
	}
	return n
}

// planBronze plans the read of the Bronze rows appended in (from, to].
func planBronze(ctx context.Context, bt *table.Table, from, to int64) ([]table.FileScanTask, error) {
	var (
		tasks []table.FileScanTask
		err   error
	)
	if from == 0 {
		tasks, err = bt.Scan(table.WithSnapshotID(to)).PlanFiles(ctx)
	} else {
		tasks, err = bt.NewIncrementalAppendScan().FromSnapshotExclusive(from).ToSnapshot(to).PlanFiles(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("plan bronze (%d, %d]: %w", from, to, err)
	}
	return tasks, nil
}

// scanRanges reads the ranges of the current pass: every range in the first, the
// ranges Silver reads in the others (the quarantine and the keys are done by then).
func (e *engine) scanRanges(ctx context.Context, bt *table.Table, ranges []bronzeRange, opt Options) error {
	for i := range ranges {
		r := &ranges[i]
		if e.group > 0 && r.sinks&sinkSilver == 0 {
			continue
		}
		t0 := time.Now()
		if err := e.scanGroups(ctx, bt, r); err != nil {
			return err
		}
		opt.Log.Debug("silver scan", "from", r.from, "to", r.to, "pass", e.group, "keys", e.winnerCount(), "seconds", time.Since(t0).Seconds())
	}
	return nil
}

// scanGroups scans r, recording the key group of its rows in the first of several passes
// and skipping other groups' rows by it in the others.
func (e *engine) scanGroups(ctx context.Context, bt *table.Table, r *bronzeRange) error {
	// Only the direct reader reads the rows in the same order every time.
	if e.groups == 1 || r.sinks&sinkSilver == 0 || !e.direct(r.tasks) {
		e.rowGroup = nil
		return e.scan(ctx, bt, *r)
	}
	if e.group == 0 {
		r.rowGroup = make([]uint8, r.rows())
	}
	e.rowGroup, e.rowsRead = r.rowGroup, 0
	defer func() { e.rowGroup = nil }()
	if err := e.scan(ctx, bt, *r); err != nil {
		return err
	}
	if n := int64(len(r.rowGroup)); e.rowsRead != n {
		if e.group > 0 {
			return fmt.Errorf("bronze (%d, %d] read %d rows in pass %d, %d in the first", r.from, r.to, e.rowsRead, e.group, n)
		}
		r.rowGroup = nil // the file counts were off: the next passes parse every row
	}
	return nil
}

// scan reads the Bronze rows of r and feeds them to the Silver and/or quarantine side.
func (e *engine) scan(ctx context.Context, bt *table.Table, r bronzeRange) error {
	var (
		recs iter.Seq2[arrow.RecordBatch, error]
		err  error
	)
	// The direct reader decodes into recycled buffers: nothing read here outlives its
	// batch uncopied (the winners, the key set and the quarantine builder copy). The
	// table scan (tasks with deletes, never written by goldbridge) keeps Go's allocator:
	// arrow's filter kernels were seen to fail on recycled buffers.
	pool := arrowmem.NewPool(scanPoolIdle)
	tasks, sinks := r.tasks, r.sinks
	if !e.append && sinks&sinkSilver != 0 {
		// Room for the payload hashes of the shard's share (of the group's), and some.
		share := r.rows() / int64(len(e.ws)*e.groups)
		for _, w := range e.ws {
			w.hashes = slices.Grow(w.hashes, int(share*21/20))
		}
	}
	if e.direct(tasks) {
		recs = readBronzeFiles(ctx, bt, tasks, e.bronzeFields, pool)
	} else if _, recs, err = bt.Scan(table.WithSelectedFields(e.bronzeFields...), table.WithArrowBatchSize(bronzeReadBatch)).ReadTasks(ctx, tasks); err != nil {
		return fmt.Errorf("scan bronze: %w", err)
	}
	return e.consume(ctx, recs, sinks)
}

// consume types the rows of recs on parse workers (one per core, each with its own
// parser and rule set) and merges them into the run's state in scan order, so the
// result is the same as a sequential pass: this goroutine does the accounting and the
// quarantine, and each winners shard's goroutine offers the rows of its keys.
func (e *engine) consume(ctx context.Context, recs iter.Seq2[arrow.RecordBatch, error], sinks sink) error {
	nw := max(1, min(runtime.GOMAXPROCS(0), maxParseWorkers))
	width := len(e.cols)
	inFlight := 2*nw + 2 + 2*len(e.ws)
	jobs := make(chan *chunk, nw)
	ordered := make(chan *chunk, inFlight)
	free := make(chan *chunk, inFlight)
	for range cap(free) {
		free <- &chunk{done: make(chan struct{}, 1)}
	}
	workers := make([]*parseWorker, nw)
	for i := range workers {
		var err error
		if workers[i], err = e.newParseWorker(); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	for _, pw := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				pw.parse(c, width)
				c.done <- struct{}{}
			}
		}()
	}
	// A chunk goes back to free when the last shard is done with it.
	release := func(c *chunk) {
		if c.pending.Add(-1) == 0 {
			c.b.rec.Release()
			c.b = nil
			free <- c
		}
	}
	shardIn := make([]chan *chunk, len(e.ws))
	var shardWG sync.WaitGroup
	if sinks&sinkSilver != 0 {
		for s, w := range e.ws {
			shardIn[s] = make(chan *chunk, inFlight)
			shardWG.Add(1)
			go func() {
				defer shardWG.Done()
				for c := range shardIn[s] {
					e.offerShard(w, s, c, width)
					release(c)
				}
			}()
		}
	}
	// The accounting runs here; a feeder goroutine reads Bronze and hands out chunks.
	var scanErr error
	stop := make(chan struct{})
	go func() {
		defer close(ordered)
		defer close(jobs)
		for rec, err := range recs {
			if err != nil {
				scanErr = fmt.Errorf("scan bronze: %w", err)
				return
			}
			b := newBronzeBatch(rec)
			n := int(rec.NumRows())
			base := e.rowsRead
			e.rowsRead += int64(n)
			for lo := 0; lo < n; lo += chunkRows {
				var c *chunk
				select {
				case c = <-free:
				case <-stop:
					rec.Release()
					return
				}
				rec.Retain()
				c.b, c.lo, c.n, c.row = b, lo, min(chunkRows, n-lo), base+int64(lo)
				jobs <- c
				ordered <- c
			}
			rec.Release()
		}
	}()
	var ctxErr error
	for c := range ordered {
		<-c.done
		if ctxErr == nil {
			if e.group == 0 { // the accounting, the quarantine and the keys: once
				e.merge(c, sinks, width)
			}
			if ctxErr = ctx.Err(); ctxErr != nil {
				close(stop)
			}
		}
		if ctxErr != nil || shardIn[0] == nil {
			c.pending.Store(1)
			release(c)
			continue
		}
		c.pending.Store(int32(len(shardIn)))
		for _, in := range shardIn {
			in <- c
		}
	}
	for _, in := range shardIn {
		if in != nil {
			close(in)
		}
	}
	shardWG.Wait()
	wg.Wait()
	if ctxErr != nil {
		return ctxErr
	}
	return scanErr
}

// resetWinners gives every shard empty winners (for the next group of keys).
func (e *engine) resetWinners() {
	for i := range e.ws {
		w := newWinners(e.cols)
		w.firstWins = e.append
		if e.spec.Debezium != nil {
			w.toast = newToastState()
		}
		if len(e.keyIdx) == 1 && e.cols[e.keyIdx[0]].Type.Kind == String {
			w.keyCol = e.keyIdx[0] // its rendered key is its value
		}
		e.ws[i] = w
	}
}

// otherGroup marks a row, in chunk.shard, whose key belongs to another pass's group.
const otherGroup = math.MaxUint8

// maxGroups is the most key groups a run can be split into so that each holds whole
// Iceberg buckets (and each shard a share of each group's), or 0 when the key is not
// bucketed by value (any number then).
func (e *engine) maxGroups() int {
	if _, ok := icebergBucket("0", e.cols[e.keyIdx[0]].Type.Kind, max(e.spec.Buckets, 1)); !ok {
		return 0
	}
	b := max(e.spec.Buckets, 1)
	if e.bucketShards {
		b /= len(e.ws)
	}
	return max(b, 1)
}

// groupOf returns the key group of a rendered key whose hash is h: a function of the
// key's Iceberg bucket (so each group writes whole buckets; with bucket shards, of the
// bucket divided by the shard count, so each group spreads over every shard), or of
// the hash's high bits.
func (e *engine) groupOf(key string, h xxh3.Uint128) int {
	if e.groups == 1 {
		return 0
	}
	first, _, _ := strings.Cut(key, "\x1f")
	if b, ok := icebergBucket(first, e.cols[e.keyIdx[0]].Type.Kind, max(e.spec.Buckets, 1)); ok {
		if e.bucketShards {
			b /= len(e.ws)
		}
		return b % e.groups
	}
	return int(h.Hi % uint64(e.groups))
}

// mergeShards is the number of winners shards: one per core, up to maxMergeShards.
func mergeShards() int { return max(1, min(runtime.GOMAXPROCS(0), maxMergeShards)) }

const maxMergeShards = 4

// shardOfKey returns the index of the winners shard that owns a rendered key, the low
// 64 bits of whose hash are h. On a bucket-partitioned table a shard owns whole Iceberg
// buckets, so every data file is written from one shard (in the shard's sort order).
func (e *engine) shardOfKey(key string, h uint64) int {
	n := len(e.ws)
	if n == 1 {
		return 0
	}
	if e.bucketShards {
		first, _, _ := strings.Cut(key, "\x1f")
		if b, ok := icebergBucket(first, e.cols[e.keyIdx[0]].Type.Kind, e.spec.Buckets); ok {
			return b % n
		}
	}
	return int((h >> 32) % uint64(n))
}

// icebergBucket is Iceberg's bucket transform of a key value rendered as text (see
// appendKeyText): murmur3 of the UTF-8 bytes of a string, of the 8 little-endian bytes
// of an integer, date or timestamp.
func icebergBucket(v string, k Kind, buckets int) (int, bool) {
	var h uint32
	switch k {
	case String:
		h = murmur3.Sum32(unsafe.Slice(unsafe.StringData(v), len(v)))
	case Int32, Int64, Date, Timestamp:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		h = murmur3.Sum32(b[:])
	default:
		return 0, false
	}
	return int(h&math.MaxInt32) % buckets, true
}

// lookupKey finds a key among the winners.
func (e *engine) lookupKey(key string) (*winners, int, bool) {
	h := keyHash(key)
	w := e.ws[e.shardOfKey(key, h.Lo)]
	slot, ok := w.lookup(h)
	return w, slot, ok
}

// lookupHash finds the key whose hash (keyHash) is h among the winners.
func (e *engine) lookupHash(h xxh3.Uint128) (*winners, int, bool) {
	for _, w := range e.ws { // a key is in one shard; which one takes its text to know
		if slot, ok := w.lookup(h); ok {
			return w, slot, true
		}
	}
	return nil, 0, false
}

// winnerCount is the number of keys the run holds.
func (e *engine) winnerCount() int {
	n := 0
	for _, w := range e.ws {
		n += w.len()
	}
	return n
}

// scanPoolIdle bounds the freed buffers the Bronze scan keeps for reuse.
const scanPoolIdle = 64 << 20

// maxParseWorkers bounds the parse workers whatever the core count: the merge, the
// Parquet reader and writer need cores too.
const maxParseWorkers = 4

// chunkRows is the number of Bronze rows a parse worker types at a time.
const chunkRows = 2048

// bronzeBatch is one Arrow batch read from Bronze, with the columns Silver reads.
type bronzeBatch struct {
	rec      arrow.RecordBatch
	payloads *array.String
	events   *array.String
	files    *array.String
	ingest   *array.Timestamp
	pos      *array.Int64 // _source_pos, nil when not read
}

func newBronzeBatch(rec arrow.RecordBatch) *bronzeBatch {
	b := &bronzeBatch{
		rec: rec, payloads: stringCol(rec, bronze.ColPayload), events: stringCol(rec, bronze.ColEventID),
		files: stringCol(rec, bronze.ColFile), ingest: rec.Column(rec.Schema().FieldIndices(bronze.ColIngestTS)[0]).(*array.Timestamp),
	}
	if ix := rec.Schema().FieldIndices(bronze.ColSourcePos); len(ix) > 0 {
		b.pos = rec.Column(ix[0]).(*array.Int64)
	}
	return b
}

// appendDeliveryID appends the delivery identity (ColDeliveryID) of Bronze row i of b,
// whose payload hashes to h; dated is false when the row has no position (ingested
// before Bronze recorded positions), whose identity is then its _event_id.
func appendDeliveryID(dst []byte, b *bronzeBatch, i int, h uint64) (out []byte, dated bool) {
	dst = append(dst, b.files.Value(i)...)
	if b.pos == nil || b.pos.IsNull(i) {
		return append(append(dst, "@event:"...), b.events.Value(i)...), false
	}
	dst = strconv.AppendInt(append(dst, '@'), b.pos.Value(i), 10)
	dst = append(dst, '#')
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, "0123456789abcdef"[h>>shift&0xf])
	}
	return dst, true
}

// chunk is a run of rows of one Bronze batch, typed by a parse worker: per row the
// typed cells (strings pointing into arena), or the quarantine reason.
type chunk struct {
	b       *bronzeBatch
	lo, n   int
	row     int64   // the index of row lo among the rows the range's read yielded
	vals    []Value // n × len(cols)
	reason  []string
	key     []string       // the rendered business key (into arena)
	kh      []xxh3.Uint128 // its hash (keyHash)
	shard   []uint8        // the winners shard that owns it
	pending atomic.Int32   // shards still reading the chunk
	ver     []version
	op      []byte
	arena   []byte
	done    chan struct{}
	// A Debezium entity's: the columns row j lacks are ucols[uoff[j]:uoff[j+1]]
	// (debezium_toast.go).
	ucols []int
	uoff  []int32
	drift fieldTally // the chunk's undeclared fields (first pass only; drift.go)
}

// parseWorker types chunks; it owns a parser and a rule set (neither is safe for
// concurrent use).
type parseWorker struct {
	e      *engine
	parser *parser
	dbz    *dbzParser // a Debezium entity's, instead of parser
	rules  *ruleSet
	buf    []byte
}

func (e *engine) newParseWorker() (*parseWorker, error) {
	p, err := newParser(e.spec.Columns)
	if err != nil {
		return nil, err
	}
	w := &parseWorker{e: e, parser: p}
	if d := e.spec.Debezium; d != nil {
		if w.dbz, err = newDbzParser(e.spec.Columns, *d, e.seqIdx >= 0); err != nil {
			return nil, err
		}
		w.parser = w.dbz.parser
	}
	for _, f := range e.spec.IgnoredFields {
		w.parser.known[f] = struct{}{}
	}
	if e.rules != nil {
		w.rules = e.rules.clone()
	}
	return w, nil
}

func (pw *parseWorker) parse(c *chunk, width int) {
	e := pw.e
	c.vals = slices.Grow(c.vals[:0], c.n*width)[:c.n*width]
	c.reason = slices.Grow(c.reason[:0], c.n)[:c.n]
	c.key = slices.Grow(c.key[:0], c.n)[:c.n]
	c.kh = slices.Grow(c.kh[:0], c.n)[:c.n]
	c.shard = slices.Grow(c.shard[:0], c.n)[:c.n]
	c.ver = slices.Grow(c.ver[:0], c.n)[:c.n]
	c.op = slices.Grow(c.op[:0], c.n)[:c.n]
	pw.parser.arena = c.arena[:0]
	ncols := len(e.spec.Columns)
	groups := e.rowGroup // see engine.rowGroup
	if int64(len(groups)) < c.row+int64(c.n) {
		groups = nil
	}
	c.ucols, c.uoff = c.ucols[:0], c.uoff[:0]
	c.drift.reset()
	if e.group == 0 { // counted once, in the pass that does the accounting
		pw.parser.tally = &c.drift
		defer func() { pw.parser.tally = nil }()
	}
	for j := range c.n {
		i := c.lo + j
		if pw.dbz != nil {
			c.uoff = append(c.uoff, int32(len(c.ucols)))
		}
		if groups != nil && e.group > 0 && groups[c.row+int64(j)] != uint8(e.group) {
			c.reason[j], c.shard[j] = "", otherGroup // another group's, or quarantined
			continue
		}
		row := c.vals[j*width : (j+1)*width]
		raw := c.b.payloads.Value(i)
		var (
			payload []byte
			reason  string
		)
		if strings.HasPrefix(raw, bronze.BinaryPrefix) {
			var err error
			if payload, err = bronze.DecodePayload(raw); err != nil {
				reason = "invalid_payload_encoding"
			} else {
				reason = "invalid_utf8"
			}
		} else if strings.HasPrefix(raw, bronze.OversizedPrefix) {
			reason = recordTooLarge
		} else {
			payload = unsafe.Slice(unsafe.StringData(raw), len(raw)) // only read
		}
		if reason == "" && e.decrypt != nil {
			var err error
			if payload, err = e.decrypt(payload); err != nil {
				reason = "pii_undecryptable"
			}
		}
		var op byte = 'u'
		if reason == "" && pw.dbz != nil {
			var ev *dbzEvent
			if ev, reason = pw.dbz.parse(payload, row[:ncols]); ev.tombstone {
				c.reason[j] = reasonSkipped
				if groups != nil {
					groups[c.row+int64(j)] = otherGroup
				}
				continue
			}
			op = ev.op
			c.ucols = append(c.ucols, ev.unavailable...)
			if e.seqIdx >= 0 {
				row[e.uaIdx], row[e.seqIdx], row[e.carriedIdx] = Value{I: int64(ev.hi)}, Value{I: int64(ev.lo)}, Value{Null: true}
			}
		} else if reason == "" {
			reason = pw.parser.parse(payload, row[:ncols])
		}
		if reason == "" && pw.rules != nil {
			if pw.dbz != nil && op == 'd' {
				reason = pw.rules.applyToDelete(row)
			} else {
				reason = pw.rules.apply(row)
			}
		}
		var h uint64
		if reason == "" && e.deliveryIdx >= 0 {
			h = xxhash.Sum64(payload)
			pw.setDeliveryID(row, c.b, i, h)
		}
		if reason == "" {
			for _, k := range e.keyIdx {
				if row[k].Null {
					reason = "missing_" + e.cols[k].Name
					break
				}
			}
		}
		if reason == "" && e.uaIdx >= 0 && row[e.uaIdx].Null {
			reason = "missing_" + e.cols[e.uaIdx].Name
		}
		if reason == "" && e.etIdx >= 0 && row[e.etIdx].Null {
			reason = "missing_" + e.cols[e.etIdx].Name
		}
		if reason == "" && e.opIdx >= 0 && !row[e.opIdx].Null {
			o, ok := e.opMap[row[e.opIdx].S]
			if !ok {
				reason = "invalid_op: " + clip(row[e.opIdx].S)
			}
			op = o
		}
		c.reason[j] = reason
		if reason != "" {
			if groups != nil {
				groups[c.row+int64(j)] = otherGroup
			}
			continue
		}
		n := len(pw.parser.arena)
		pw.parser.arena = e.appendKey(pw.parser.arena, row)
		c.key[j] = unsafeString(pw.parser.arena[n:])
		c.kh[j] = keyHash(c.key[j])
		c.shard[j] = uint8(e.shardOfKey(c.key[j], c.kh[j].Lo))
		if g := e.groupOf(c.key[j], c.kh[j]); g != e.group {
			if groups != nil {
				groups[c.row+int64(j)] = uint8(g)
			}
			c.shard[j] = otherGroup
			continue
		} else if groups != nil {
			groups[c.row+int64(j)] = uint8(g)
		}
		if e.deliveryIdx < 0 {
			h = xxhash.Sum64(payload)
		}
		if e.append {
			c.ver[j], c.op[j] = version{hash: h}, 0
			continue
		}
		v := version{ua: orderValue(row[e.uaIdx], e.cols[e.uaIdx].Type), rank: opRank(op)}
		switch {
		case e.seqIdx >= 0: // Debezium by position: the event is its key and position
			v.seq = uint64(row[e.seqIdx].I)
			v.hash = dbzHash(c.key[j], uint64(v.ua), v.seq)
		case pw.dbz != nil: // Debezium by updated_at: the event is its values and op
			pw.buf, v.hash = dbzRowHash(pw.buf, row, e.cols, op)
		default:
			v.hash = h
		}
		c.ver[j] = v
		c.op[j] = op
	}
	if pw.dbz != nil {
		c.uoff = append(c.uoff, int32(len(c.ucols)))
	}
	c.arena = pw.parser.arena
	pw.parser.arena = nil
}

// setDeliveryID sets the ColDeliveryID cell of row, typed from Bronze row i of b whose
// payload hashes to h (the string is in the parser's arena, like the parsed ones).
func (pw *parseWorker) setDeliveryID(row []Value, b *bronzeBatch, i int, h uint64) {
	e := pw.e
	n := len(pw.parser.arena)
	var dated bool
	pw.parser.arena, dated = appendDeliveryID(pw.parser.arena, b, i, h)
	row[e.deliveryIdx] = Value{S: unsafeString(pw.parser.arena[n:])}
	if !dated && e.group == 0 {
		e.undated.Add(1)
	}
}

// merge does the accounting of a typed chunk, the quarantine and the keys table, row by
// row in scan order; offerShard then merges the rows into the winners.
func (e *engine) merge(c *chunk, sinks sink, width int) {
	toSilver, toQuarantine, toKeys := sinks&sinkSilver != 0, sinks&sinkQuarantine != 0, sinks&sinkKeys != 0 && e.keys != nil
	b := c.b
	if toSilver {
		e.drift.absorb(&c.drift)
	}
	for j := range c.n {
		i := c.lo + j
		if toSilver {
			e.counts.Read++
		}
		if reason := c.reason[j]; reason == reasonSkipped {
			if toSilver {
				e.counts.Skipped++
			}
			continue
		} else if reason != "" {
			if toSilver {
				e.counts.Quarantined++
				class, _, _ := strings.Cut(reason, ": ")
				if e.reasons == nil {
					e.reasons = map[string]int64{}
				}
				e.reasons[class]++
			}
			if toQuarantine {
				e.addQuarantine(b.payloads.Value(i), b.events.Value(i), reason, b.ingest, i, b.files.Value(i))
			}
			continue
		}
		if toKeys {
			e.keys.add(c.key[j], c.vals[j*width:(j+1)*width], e.keyIdx, !toSilver)
		}
	}
}

// offerShard offers the valid rows of a chunk whose keys shard s owns to its winners.
func (e *engine) offerShard(w *winners, s int, c *chunk, width int) {
	b := c.b
	for j := range c.n {
		if c.reason[j] != "" || int(c.shard[j]) != s {
			continue
		}
		i := c.lo + j
		var ts int64
		if !b.ingest.IsNull(i) {
			ts = int64(b.ingest.Value(i))
		}
		if !e.append {
			w.hashes = append(w.hashes, c.ver[j].hash)
		}
		w.offered++
		if w.toast != nil {
			w.toast.pending = c.ucols[c.uoff[j]:c.uoff[j+1]]
		}
		w.offer(c.kh[j], c.key[j], c.vals[j*width:(j+1)*width], c.ver[j], c.op[j], b.events.Value(i), ts)
	}
}

func stringCol(rec arrow.RecordBatch, name string) *array.String {
	return rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.String)
}

// orderValue maps the updated_at value (timestamp, date or integer; the config checks
// that) to an int64 that orders versions.
func orderValue(v Value, _ Type) int64 { return v.I }

// appendKey appends the business key of a row rendered as one string (values joined
// by 0x1f).
func (e *engine) appendKey(b []byte, row []Value) []byte {
	for i, k := range e.keyIdx {
		if i > 0 {
			b = append(b, 0x1f)
		}
		b = appendKeyText(b, row[k], e.cols[k].Type)
	}
	return b
}

// key renders the business key of a row; the string is valid until the next call.
func (e *engine) key(row []Value) string {
	e.keyBuf = e.appendKey(e.keyBuf[:0], row)
	return unsafeString(e.keyBuf)
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

// quarantineGate fails the run, before anything is committed, when it quarantined more
// than spec.FailQuarantinePct of the Bronze rows it read.
func (e *engine) quarantineGate() error {
	c, limit := e.counts, e.spec.FailQuarantinePct
	read := c.Read - c.Skipped // tombstones are no part of the ratio
	if limit <= 0 || read == 0 || pct(c.Quarantined, read) <= limit {
		return nil
	}
	classes := slices.Collect(maps.Keys(e.reasons))
	slices.SortFunc(classes, func(a, b string) int {
		if d := cmp64(e.reasons[b], e.reasons[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var top []string
	for _, r := range classes[:min(len(classes), 3)] {
		top = append(top, fmt.Sprintf("%s (%d)", r, e.reasons[r]))
	}
	return fmt.Errorf("%w: %d of %d bronze rows quarantined (%.2f%%), above fail_quarantine_pct %g%%; nothing committed; top reasons: %s",
		ErrQuarantineGate, c.Quarantined, read, pct(c.Quarantined, read), limit, strings.Join(top, ", "))
}
