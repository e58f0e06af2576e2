package gold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/silver"
)

// Options tune one Gold run.
type Options struct {
	Full bool // recompute every partition
	// ExactGrains recomputes exactly the partitions Grains (possibly none) instead of
	// those Silver changes since the last run touched (a forget: MartSpec.ChangedGrains).
	// Full, a first run and changed joins still recompute every partition.
	ExactGrains bool
	Grains      []int64
	// Rebuild drops the Gold table and computes it again (also what a changed mart
	// definition does, see MartSpec.OnChange).
	Rebuild bool
	// NoDelta recomputes the touched partitions whole even when Silver only added rows
	// (the delta merge, delta.go, is not tried): what the delta must not cost more than,
	// and a way to rule it out.
	NoDelta bool
	Log     *slog.Logger

	afterDrop    func() error      // test hook: in a rebuild, after the drop, before the create
	afterCompute func()            // test hook: after the checks, before the commit
	afterPass    func(int) error   // test hook: after each pass's files are written
	beforeCommit func(attempt int) // test hook: in each commit attempt, on the fresh table
	now          func() time.Time  // test hook: the run's clock (snapshot grain, _calculated_at)
	scanWorkers  int               // test hook: the goroutines that aggregate a scan (0: scanWorkers())
}

// Result summarises one Gold run.
type Result struct {
	Mart                 string
	RunID                string
	SilverFrom, SilverTo int64
	SnapshotID           int64    // the new Gold snapshot, 0 if nothing was committed
	Partitions           []string // grain values replaced
	Full                 bool
	SilverRows           int64 // Silver rows aggregated
	// NullGrainRows are the Silver rows read that passed the mart's filter but have no
	// grain value: not aggregated (no partition to put them in), counted here and by the
	// null_grain check. A full run reads every row; an incremental one only the rows of
	// the files it reads.
	NullGrainRows int64
	Rows          int64 // Gold rows written
	Passes        int   // the reads of Silver that computed them (see MartSpec.PassRows)
	// Delta: Silver only added rows since the last run, and they were merged into the Gold
	// rows of the partitions they touch rather than those partitions recomputed
	// (delta.go); SilverRows are then the added rows.
	Delta   bool
	Report  Report
	Elapsed time.Duration
}

// ErrCircuitOpen means a critical data-quality check failed: nothing was published and
// the mart's circuit is open until a run passes.
var ErrCircuitOpen = errors.New("critical data-quality check failed: nothing published, circuit open")

// Run recomputes the partitions of a mart that Silver changes since the last run touched
// (or every partition with Options.Full), checks them, and replaces exactly those
// partitions in one commit with the Silver snapshot as the watermark.
//
// In snapshot mode it computes the state of all Silver rows as the partition of the
// run's grain period (the UTC day for a day grain) and replaces only that partition.
// With joins, a change of any joined table since the last run makes it a full rebuild.
//
// If it fails, the files it wrote are deleted (catalog.WriteAttempt).
func Run(ctx context.Context, lh *catalog.Lakehouse, m MartSpec, opt Options) (Result, error) {
	w := lh.BeginWrite(m.Table)
	res, err := run(ctx, lh, m, opt)
	return res, w.End(ctx, err)
}

func run(ctx context.Context, lh *catalog.Lakehouse, m MartSpec, opt Options) (Result, error) {
	start := time.Now()
	res := Result{Mart: m.Name, RunID: uuid.NewString()}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	clock := opt.now
	if clock == nil {
		clock = time.Now
	}
	now := clock().UTC()
	fail := func(err error) (Result, error) { return res, fmt.Errorf("gold %s: %w", m.Name, err) }
	if err := m.validate(); err != nil {
		return fail(err)
	}
	src, err := lh.LoadTable(ctx, m.SourceTable)
	if err != nil {
		return fail(fmt.Errorf("silver table %s: %w (run silver first)", m.SourceTable, err))
	}
	if err := silver.CheckTypes(src.Schema(), m.SourceColumns); err != nil {
		return fail(fmt.Errorf("silver table %s: %w", m.SourceTable, err))
	}
	snap := src.CurrentSnapshot()
	if snap == nil {
		return res, nil
	}
	res.SilverTo = snap.SnapshotID
	joinSnaps, err := joinSnapshots(ctx, lh, m)
	if err != nil {
		return fail(err)
	}
	gt, _, err := lh.LoadOrCreateTable(ctx, m.Table, m.Schema(), m.partitionSpec(), m.tableProperties())
	if err != nil {
		return fail(err)
	}
	if gt, err = m.evolve(ctx, lh, gt, opt); err != nil {
		return fail(err)
	}
	res.SilverFrom = Watermark(gt)
	joinsChanged := !sameSnapshots(joinWatermarks(gt), joinSnaps)
	var snapGrain int64
	if m.snapshot() {
		snapGrain = m.grainOf(silver.Value{I: now.UnixMicro()}, silver.Type{Kind: silver.Timestamp})
		// Nothing changed since this period's snapshot was written: it stands.
		var last []string
		_ = json.Unmarshal([]byte(lastSummary(gt)[PropPartitions]), &last)
		if !opt.Full && res.SilverFrom == res.SilverTo && !joinsChanged && slices.Equal(last, []string{m.GrainString(snapGrain)}) {
			res.Elapsed = time.Since(start)
			return res, nil
		}
	} else if res.SilverFrom == res.SilverTo && !joinsChanged && !opt.Full {
		res.Elapsed = time.Since(start)
		return res, nil
	}
	rf, err := compileFilter(m.Filter, m.rowColumns())
	if err != nil {
		return fail(err)
	}
	var joins []*joined
	for _, j := range m.Joins {
		jl, err := loadJoin(ctx, lh, j, joinSnaps[j.Table])
		if err != nil {
			return fail(fmt.Errorf("join %s: %w", j.Entity, err))
		}
		joins = append(joins, jl)
	}

	var parts []int64
	var passes []pass
	switch {
	case m.snapshot():
		// Every (filtered) row, as of now, into this period's partition.
		parts = []int64{snapGrain}
		passes = []pass{m.passOf(src, nil)}
		res.Full = opt.Full
	default:
		res.Full = opt.Full || res.SilverFrom == 0 || joinsChanged
		if !res.Full && opt.ExactGrains {
			parts = slices.Sorted(slices.Values(opt.Grains))
		} else if !res.Full {
			var full bool
			parts, full, err = changedPartitions(ctx, src, m, res.SilverFrom, res.SilverTo)
			if err != nil {
				return fail(err)
			}
			res.Full = full
			opt.Log.Debug("changed partitions", "partitions", len(parts), "full", full, "elapsed", time.Since(start))
		}
		if res.Full {
			parts = nil
		} else if len(parts) == 0 {
			// Silver changed, but no row of this mart's partitions did: move the watermark.
			return commitWatermark(ctx, lh, m, res, joinSnaps, start)
		}
		// A pass's keep skips the rows of other grains as they are read. With Silver
		// partitioned by the grain, or its files sorted on it (silver sort_by), its
		// filter also prunes files, and row groups by their min/max; otherwise (bucketed
		// by key) there is nothing to prune.
		var goldFiles int64 // about Gold's partitions: one data file each (it writes a partition's rows at once)
		if s := gt.CurrentSnapshot(); s != nil {
			goldFiles = totalOf(s, "total-data-files")
		}
		if runs, ok := m.deltaRuns(src, res.SilverFrom, res.SilverTo); ok && !res.Full && !opt.ExactGrains && !opt.NoDelta {
			// Only rows were added: merged into the partitions' Gold rows (delta.go).
			passes, res.Delta = []pass{m.deltaPass(src, parts, runs)}, true
		} else if passes, err = m.planPasses(ctx, src, snap, m.PassRows, parts, goldFiles); err != nil {
			return fail(err)
		}
		opt.Log.Debug("passes planned", "passes", len(passes), "elapsed", time.Since(start))
	}
	res.Passes = len(passes)
	files, grains, err := m.computePasses(ctx, gt, src, passes, rf, joins, snapGrain, now, &res, opt)
	if err != nil {
		return fail(err)
	}
	if res.Full && !m.snapshot() {
		parts = grains
	}
	for _, g := range parts {
		res.Partitions = append(res.Partitions, m.GrainString(g))
	}
	if res.NullGrainRows > 0 {
		opt.Log.Warn("silver rows without a grain value are not aggregated", "grain_column", m.GrainColumn, "rows", res.NullGrainRows)
	}
	for _, f := range res.Report.Failures {
		opt.Log.Warn("data-quality check failed", "check", f.Check, "severity", f.Severity, "rows", f.Count)
	}
	if res.Report.Critical() {
		if err := setCircuit(ctx, lh, m.Table, "open", res.Report.Summary()); err != nil {
			return fail(fmt.Errorf("open circuit: %w", err))
		}
		res.Elapsed = time.Since(start)
		// The files a run in passes wrote before a later pass failed are deleted
		// (catalog.WriteAttempt): nothing is published.
		return res, fmt.Errorf("gold %s: %w", m.Name, ErrCircuitOpen)
	}
	opt.Log.Debug("computed and checked", "rows", res.Rows, "passes", res.Passes, "elapsed", time.Since(start))
	if opt.afterCompute != nil {
		opt.afterCompute()
	}

	partsJSON, _ := json.Marshal(res.Partitions)
	props := iceberg.Properties{
		PropSilverSnapshot: strconv.FormatInt(res.SilverTo, 10),
		PropPartitions:     string(partsJSON),
		PropRunID:          res.RunID,
	}
	if len(joinSnaps) > 0 {
		props[PropJoinSnapshots] = joinSnapshotsJSON(joinSnaps)
	}
	if res.Full {
		props[PropFull] = "true"
	}
	if w := res.Report.Warnings(); len(w) > 0 {
		b, _ := json.Marshal(w)
		props[PropWarnings] = string(b)
	}
	// A full incremental rebuild replaces the whole table; a snapshot run only its period.
	var overwrite iceberg.BooleanExpression = iceberg.AlwaysTrue{}
	if !res.Full || m.snapshot() {
		overwrite = m.grainIn(parts)
	}
	attempt := 0
	committed, err := lh.Commit(ctx, m.Table, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if w := Watermark(tbl); w != res.SilverFrom {
			return nil, fmt.Errorf("gold %s moved to silver snapshot %d during this run; run again", m.Table, w)
		}
		old, err := m.filesWhere(ctx, tbl, overwrite)
		if err != nil {
			return nil, err
		}
		if opt.beforeCommit != nil {
			attempt++
			opt.beforeCommit(attempt)
		}
		tx := tbl.NewTransaction()
		if len(old) == 0 && len(files) == 0 {
			err = tx.AddFiles(ctx, nil, props, false) // nothing to replace: the watermark moves
		} else {
			err = tx.ReplaceDataFilesWithDataFiles(ctx, old, files, props)
		}
		if err != nil {
			return nil, err
		}
		if tbl.Properties()[PropCircuit] == "open" {
			if err := tx.SetProperties(iceberg.Properties{PropCircuit: "closed", PropCircuitReason: "", PropCircuitSince: now.Format(time.RFC3339)}); err != nil {
				return nil, err
			}
		}
		if up := m.upgradedProperties(tbl.Properties()); len(up) > 0 {
			if err := tx.SetProperties(up); err != nil {
				return nil, err
			}
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return fail(err)
	}
	opt.Log.Debug("committed", "elapsed", time.Since(start))
	res.SnapshotID = committed.CurrentSnapshot().SnapshotID
	res.Elapsed = time.Since(start)
	return res, nil
}

// writeFiles writes rec as data files of tbl without committing them.
func writeFiles(ctx context.Context, tbl *table.Table, sch *arrow.Schema, rec arrow.RecordBatch) ([]iceberg.DataFile, error) {
	if rec.NumRows() == 0 {
		return nil, nil
	}
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	files, err := catalog.WriteDataFiles(ctx, tbl, sch, one)
	if err != nil {
		return nil, fmt.Errorf("write gold data files: %w", err)
	}
	return files, nil
}

// filesWhere returns the data files of tbl's current snapshot in the partitions filter
// selects. Gold is partitioned by the grain itself (identity) and filter is on the grain
// only, so a file is in or out whole; a file of another partition spec is refused rather
// than replaced in part.
func (m MartSpec) filesWhere(ctx context.Context, tbl *table.Table, filter iceberg.BooleanExpression) ([]iceberg.DataFile, error) {
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	spec := tbl.Spec()
	if spec.NumFields() != 1 || spec.Field(0).SourceIDs[0] != 1 || spec.Field(0).Transform.String() != (iceberg.IdentityTransform{}).String() {
		return nil, fmt.Errorf("gold %s is not partitioned by its grain (spec %s): rebuild it (gold --rebuild %s)", m.Table, spec, m.Name)
	}
	tasks, err := tbl.Scan(table.WithRowFilter(filter)).PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan gold files: %w", err)
	}
	out := make([]iceberg.DataFile, 0, len(tasks))
	for _, t := range tasks {
		if int(t.File.SpecID()) != spec.ID() {
			return nil, fmt.Errorf("gold %s: file %s was written with partition spec %d, not %d: rebuild it (gold --rebuild %s)", m.Table, t.File.FilePath(), t.File.SpecID(), spec.ID(), m.Name)
		}
		out = append(out, t.File)
	}
	return out, nil
}

// grainIn selects the Gold rows of the given partitions.
func (m MartSpec) grainIn(parts []int64) iceberg.BooleanExpression {
	ref := iceberg.Reference(m.GrainAs)
	if m.GrainUnit == "hour" {
		vals := make([]iceberg.Timestamp, len(parts))
		for i, p := range parts {
			vals[i] = iceberg.Timestamp(p)
		}
		return iceberg.IsIn(ref, vals...)
	}
	vals := make([]iceberg.Date, len(parts))
	for i, p := range parts {
		vals[i] = iceberg.Date(p)
	}
	return iceberg.IsIn(ref, vals...)
}

// commitWatermark records a new Silver watermark without changing any partition.
func commitWatermark(ctx context.Context, lh *catalog.Lakehouse, m MartSpec, res Result, joinSnaps map[string]int64, start time.Time) (Result, error) {
	props := iceberg.Properties{PropSilverSnapshot: strconv.FormatInt(res.SilverTo, 10), PropPartitions: "[]", PropRunID: res.RunID}
	if len(joinSnaps) > 0 {
		props[PropJoinSnapshots] = joinSnapshotsJSON(joinSnaps)
	}
	committed, err := lh.Commit(ctx, m.Table, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.AddFiles(ctx, nil, props, false); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return res, fmt.Errorf("gold %s: %w", m.Name, err)
	}
	res.SnapshotID = committed.CurrentSnapshot().SnapshotID
	res.Elapsed = time.Since(start)
	return res, nil
}

// setCircuit records the circuit state in the Gold table's properties (no new snapshot).
func setCircuit(ctx context.Context, lh *catalog.Lakehouse, ident, state, reason string) error {
	_, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.SetProperties(iceberg.Properties{PropCircuit: state, PropCircuitReason: reason, PropCircuitSince: time.Now().UTC().Format(time.RFC3339)}); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	return err
}

// Watermark is the Silver snapshot recorded by the newest Gold commit that has one, or 0.
func Watermark(tbl *table.Table) int64 {
	id, _ := strconv.ParseInt(lastSummary(tbl)[PropSilverSnapshot], 10, 64)
	return id
}

// StartSnapshots returns, by Silver table, the snapshots the mart's next incremental
// run reads from: its watermark in source (the mart's Silver table) and the snapshot
// recorded for each joined table. Table maintenance keeps them (and everything after
// them): without them the next run recomputes the whole mart.
func StartSnapshots(tbl *table.Table, source string) map[string]int64 {
	out := joinWatermarks(tbl)
	if out == nil {
		out = map[string]int64{}
	}
	if w := Watermark(tbl); w != 0 {
		out[source] = w
	}
	return out
}

// lastSummary is the summary of the newest Gold commit that records a Silver watermark
// (a run's commit), or nil.
func lastSummary(tbl *table.Table) iceberg.Properties {
	if s := catalog.NewestWith(tbl, PropSilverSnapshot); s != nil {
		return s.Summary.Properties
	}
	return nil
}

// changedPartitions finds the grain partitions touched by Silver changes in (from, to]:
// the grain of every row version written in that range (found by its _run_id) and the
// grain of the version it replaced (read at the old snapshot). full is true when the
// range cannot be followed (a replay, or the old snapshot is gone).
func changedPartitions(ctx context.Context, src *table.Table, m MartSpec, from, to int64) (parts []int64, full bool, err error) {
	md := src.Metadata()
	if md.SnapshotByID(from) == nil {
		return nil, true, nil
	}
	var runIDs, replaced, written []string
	listed := true           // every run listed the grains of the versions it replaced
	wrote := useWrittenLists // every run listed the grains of the rows it wrote
	for s := md.SnapshotByID(to); s != nil && s.SnapshotID != from; {
		if s.Summary != nil {
			if s.Summary.Properties["goldbridge.replay"] == "true" {
				return nil, true, nil
			}
			if id := s.Summary.Properties[silver.PropRunID]; id != "" {
				runIDs = append(runIDs, id)
				r, ok := s.Summary.Properties[silver.PropReplacedPrefix+m.GrainColumn]
				listed = listed && ok
				replaced = append(replaced, r)
				w, ok := s.Summary.Properties[silver.PropWrittenPrefix+m.GrainColumn]
				wrote = wrote && ok
				written = append(written, w)
			}
		}
		if s.ParentSnapshotID == nil {
			return nil, true, nil // from is not an ancestor of to
		}
		s = md.SnapshotByID(*s.ParentSnapshotID)
	}
	if len(runIDs) == 0 {
		return nil, false, nil
	}
	grainT := m.SourceColumns[m.GrainColumn]
	seen := map[int64]bool{}
	keys := map[string]bool{}
	var kb []byte
	collect := func(snapshot int64, filter iceberg.BooleanExpression, wantKey func([]byte) bool) error {
		fields := append([]string{m.GrainColumn}, m.SourceKey...)
		_, recs, err := src.Scan(table.WithSnapshotID(snapshot), table.WithRowFilter(filter), table.WithSelectedFields(fields...)).ToArrowRecords(ctx)
		if err != nil {
			return err
		}
		for rec, err := range recs {
			if err != nil {
				return err
			}
			g := rec.Column(rec.Schema().FieldIndices(m.GrainColumn)[0])
			kcols := make([]arrow.Array, len(m.SourceKey))
			for i, k := range m.SourceKey {
				kcols[i] = rec.Column(rec.Schema().FieldIndices(k)[0])
			}
			for r := range int(rec.NumRows()) {
				kb = kb[:0]
				for i, k := range m.SourceKey {
					kb = append(append(kb, keyText(silver.ValueAt(kcols[i], r, m.SourceColumns[k]), m.SourceColumns[k])...), 0x1f)
				}
				if !wantKey(kb) {
					continue
				}
				keys[string(kb)] = true
				if v := silver.ValueAt(g, r, grainT); !v.Null {
					seen[m.grainOf(v, grainT)] = true
				}
			}
			rec.Release()
		}
		return nil
	}
	// The grains of the versions replaced, and of the rows written: listed by Silver in
	// each commit (its sort_by columns), or else looked up in the data.
	temporal := grainT.Kind == silver.Timestamp || grainT.Kind == silver.Date
	decode := func(lists []string) (bool, error) {
		for _, r := range lists {
			ok, err := silver.DecodeReplaced(r, func(lo, hi int64) {
				for v := lo; v <= hi; v++ {
					seen[m.grainOf(silver.ReplacedValue(v, grainT.Kind), grainT)] = true
				}
			})
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}
	listed = listed && temporal
	if listed && wrote && temporal {
		// Every grain touched is listed: no data file is read. A list cut short ("*")
		// falls back to the reads below; what seen holds by then was touched too.
		ok1, err := decode(replaced)
		if err != nil {
			return nil, false, err
		}
		ok2, err := decode(written)
		if err != nil {
			return nil, false, err
		}
		if ok1 && ok2 {
			for g := range seen {
				parts = append(parts, g)
			}
			slices.Sort(parts)
			return parts, false, nil
		}
	}
	changedScans.Add(1)
	if err := collect(to, iceberg.IsIn(iceberg.Reference(silver.ColRunID), runIDs...), func([]byte) bool { return true }); err != nil {
		return nil, false, fmt.Errorf("changed rows: %w", err)
	}
	if listed {
		ok, err := decode(replaced)
		if err != nil {
			return nil, false, err
		}
		listed = ok
	}
	if listed {
		for g := range seen {
			parts = append(parts, g)
		}
		slices.Sort(parts)
		return parts, false, nil
	}
	// The previous versions of the changed keys, as of the last processed snapshot. A
	// few keys prune Silver's buckets; many keys hit every bucket, where an IN residual
	// only adds a filter kernel to the key lookup done here anyway.
	var oldFilter iceberg.BooleanExpression = iceberg.AlwaysTrue{}
	if len(m.SourceKey) == 1 && m.SourceColumns[m.SourceKey[0]].Kind == silver.String && len(keys) <= maxKeyFilter {
		vals := make([]string, 0, len(keys))
		for k := range keys {
			vals = append(vals, k[:len(k)-1])
		}
		oldFilter = iceberg.IsIn(iceberg.Reference(m.SourceKey[0]), vals...)
	}
	if err := collect(from, oldFilter, func(k []byte) bool { return keys[string(k)] }); err != nil {
		return nil, false, fmt.Errorf("previous versions: %w", err)
	}
	for g := range seen {
		parts = append(parts, g)
	}
	slices.Sort(parts)
	return parts, false, nil
}

// partitionedByGrain reports whether Silver's current partition spec partitions on the
// mart's grain column (day(event_time) in append mode), so that a grain filter prunes
// files.
func partitionedByGrain(src *table.Table, m MartSpec) bool {
	f, ok := src.Schema().FindFieldByName(m.GrainColumn)
	if !ok {
		return false
	}
	spec := src.Spec()
	for _, pf := range spec.Fields() {
		if slices.Contains(pf.SourceIDs, f.ID) {
			return true
		}
	}
	return false
}

// sortedByGrain reports whether src's sort order starts with the mart's grain column.
func sortedByGrain(src *table.Table, m MartSpec) bool {
	f, ok := src.Schema().FindFieldByName(m.GrainColumn)
	if !ok {
		return false
	}
	for _, sf := range src.SortOrder().Fields() {
		return slices.Equal(sf.SourceIDs, []int{f.ID})
	}
	return false
}

// maxKeyFilter is the most changed keys looked up with an IN filter on the key (a
// variable for the tests).
var maxKeyFilter = 256

// useWrittenLists lets changedPartitions take the grains of the rows a Silver run wrote
// from its commit summary (silver.PropWrittenPrefix) instead of reading them; the tests
// turn it off to compare with the reads, and count the reads in changedScans.
var (
	useWrittenLists = true
	changedScans    atomic.Int64
)
