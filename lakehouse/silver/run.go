package silver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"goldbridge/lakehouse/catalog"
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
	// PassBytes bounds the same memory by what the winners of one pass hold (their
	// records, strings, keys and index; see winners.heldBytes), which rows cannot tell
	// before reading: wide rows, or about one row per key, hold more a row. When a pass
	// holds more, the run stops, deletes what it wrote, and starts again in more
	// passes (estimated from what it held per row read), up to the groups the key's
	// buckets allow. 0 means DefaultPassBytes; a negative value, no byte bound.
	PassBytes int64

	minGroups int // a restart's groups: at least this many passes (see PassBytes)

	afterPass   func(group int)          // test hook: after each pass's data files are written
	overPass    func(group int) bool     // test hook: true makes the pass of this group hold too much (see PassBytes)
	writeBatch  int                      // test hook: rows per batch written to Silver (0: batchRows)
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
	Restarts             int   // the times the run started again in more passes (see Options.PassBytes)
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

// DefaultPassBytes is what the winners of one Silver pass hold at most by default (see
// Options.PassBytes): the demo's orders hold 726 MB at 10M events (one pass, 1.55 GB
// peak RSS); 4M taxi trips, 760 MB (3.5 GB); see docs/silver.md.
const DefaultPassBytes = 1 << 30

// overBudgetError stops a pass whose winners hold more than Options.PassBytes: run
// starts again in groups passes.
type overBudgetError struct {
	held, read, budget int64 // bytes held after read rows of the pass; the bound
	groups             int
}

func (e *overBudgetError) Error() string {
	return fmt.Sprintf("a pass held %d bytes after %d rows, over pass_bytes %d: %d passes needed", e.held, e.read, e.budget, e.groups)
}

// maxPasses bounds the key groups of a run (a group is a uint8 in chunk.shard and
// engine.rowGroup, below otherGroup).
const maxPasses = 254

// passes is the number of key groups a run of rows Bronze rows builds Silver in.
func (e *engine) passes(rows, limit int64, minGroups int) int {
	if limit == 0 {
		limit = DefaultPassRows
	}
	p := 1
	if limit > 0 && rows > limit {
		p = int((rows + limit - 1) / limit)
	}
	return max(min(max(p, minGroups), e.groupCap()), 1)
}

// passBudget is the bound on what one pass's winners hold (Options.PassBytes).
type passBudget struct {
	bytes int64 // the bound; 0: none
	rows  int64 // the Silver rows of the run (every pass reads them all)
	read  int64 // the Silver rows read so far in this pass

	over func(group int) bool // Options.overPass
}

// setBudget sets the pass's byte bound for a run over rows Silver rows.
func (e *engine) setBudget(rows, limit int64, over func(int) bool) {
	if limit == 0 {
		limit = DefaultPassBytes
	}
	e.budget = passBudget{bytes: max(limit, 0), rows: rows, over: over}
}

// overBudget counts n more rows read in this pass and returns an overBudgetError when
// the winners hold more than the bound and more groups are possible. The groups it asks
// for are those the winners held per row read so far would need for the run's rows,
// with a quarter to spare (a key's later versions add nothing, so this overestimates).
func (e *engine) overBudget(n int) error {
	b := &e.budget
	if b.bytes == 0 || e.groups >= e.groupCap() {
		return nil
	}
	b.read += int64(n)
	held := e.held()
	if b.over != nil && b.over(e.group) {
		held = b.bytes + 1
	}
	if held <= b.bytes || b.read == 0 {
		return nil
	}
	whole := float64(held) * float64(b.rows) / float64(b.read) * float64(e.groups)
	g := int(math.Ceil(whole * 1.25 / float64(b.bytes)))
	g = min(max(g, e.groups+1), e.groupCap())
	return &overBudgetError{held: held, read: b.read, budget: b.bytes, groups: g}
}

// held is what the winners held after the last batch each shard offered.
func (e *engine) held() int64 {
	var n int64
	for _, w := range e.ws {
		n += w.held.Load()
	}
	return n
}

// groupCap is the most key groups a run can be built in.
func (e *engine) groupCap() int {
	if maxG := e.maxGroups(); maxG > 0 {
		return min(maxG, maxPasses)
	}
	return maxPasses
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
	err = w.End(ctx, err)
	restarts := 0
	for over := (*overBudgetError)(nil); errors.As(err, &over); over = nil {
		// Each restart has more groups than the last, and a run at the groups' cap is
		// never stopped, so this ends.
		restarts++
		opt.minGroups = over.groups
		if opt.Log != nil {
			opt.Log.Info("silver starts again in more passes: a pass held more than pass_bytes",
				"held_bytes", over.held, "rows_read", over.read, "pass_bytes", over.budget, "passes", over.groups)
		}
		w = lh.BeginWrite(spec.Table, spec.QuarantineTable, spec.KeysTable)
		res, err = runWrite(ctx, lh, spec, bronzeIdent, opt, replay)
		err = w.End(ctx, err)
	}
	res.Restarts = restarts
	return res, err
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
	e.decrypt, e.writeBatch = opt.Decrypt, opt.writeBatch
	silverTbl, err := e.openSilver(ctx, lh, replay)
	if err != nil {
		return fail(err)
	}
	sch := silverTbl.Schema()
	if e.retypes != nil {
		sch = e.writeSchema
	}
	e.quality.SchemaIssues, e.quality.SchemaNotes = schemaIssues(sch, e.tcols)
	qTbl, _, err := lh.LoadOrCreateTable(ctx, spec.QuarantineTable, quarantineSchema(), quarantineSpec(), tableProperties(spec.Codec))
	if err != nil {
		return fail(err)
	}
	var keysTbl *table.Table
	if e.keys != nil {
		ksch, kspec, err := keysTableLayout(e.cols, e.spec)
		if err != nil {
			return fail(err)
		}
		if keysTbl, _, err = lh.LoadOrCreateTable(ctx, spec.KeysTable, ksch, kspec, tableProperties(spec.Codec)); err != nil {
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
	e.groups = e.passes(silverRows, opt.PassRows, opt.minGroups)
	e.setBudget(silverRows, opt.PassBytes, opt.overPass)
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
			e.group, e.budget.read = g, 0
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
