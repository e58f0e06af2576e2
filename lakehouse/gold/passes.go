package gold

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/silver"
)

// DefaultPassRows is the most Silver rows one pass of a Gold run aggregates by
// default (see MartSpec.PassRows). A pass holds its partitions' groups, distinct-key
// sets and output batch at once: the orders mart over 3600 days held ~3 GB peak RSS for
// 9M Silver rows in one pass.
const DefaultPassRows = 4_000_000

// pass is one read of Silver in a Gold run: the grains it aggregates and how the read is
// pruned to them.
type pass struct {
	parts  []int64        // the partitions it computes (nil: those its rows fall into)
	keep   map[int64]bool // the grain values aggregated (nil: every grain)
	ranges [][2]int64     // [lo, hi) of the grain column: row groups and sorted runs outside are skipped
	filter iceberg.BooleanExpression
	// readNulls keeps the rows without a grain value in the pruned read, and skipNulls
	// drops them before they are counted: of a grouped build's passes, the first counts
	// them and the others skip them, so each is counted once (Result.NullGrainRows).
	readNulls, skipNulls bool
	// runs, when set, makes the pass a delta (deltaRuns): it reads only the Silver rows
	// those runs wrote, and the partitions' Gold rows are merged with them (mergeGold).
	runs map[string]bool
}

// passOf is the one pass of a run over parts (nil: every partition, no pruning).
func (m MartSpec) passOf(src *table.Table, parts []int64) pass {
	if parts == nil {
		return pass{filter: iceberg.AlwaysTrue{}}
	}
	ps := pass{parts: parts, keep: make(map[int64]bool, len(parts)), filter: iceberg.AlwaysTrue{}}
	grainT := m.SourceColumns[m.GrainColumn]
	for _, g := range parts {
		ps.keep[g] = true
		lo, hi := m.grainRange(g, grainT)
		ps.ranges = append(ps.ranges, [2]int64{lo, hi})
	}
	ps.ranges = mergeRanges(ps.ranges)
	if partitionedByGrain(src, m) || sortedByGrain(src, m) {
		ps.filter = m.rangeFilter(ps.ranges, false)
	}
	return ps
}

// mergeRanges sorts ranges and joins the ones that touch or overlap (adjacent days are
// one range: the direct read tests every row against each range).
func mergeRanges(rs [][2]int64) [][2]int64 {
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmpInt(a[0], b[0]) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// planPasses splits a run over parts (nil: a full build, every partition) into passes
// over groups of whole, consecutive partitions of at most limit Silver rows each (a
// partition with more is a pass of its own), so that its memory is bounded by the
// group's rows rather than by the history or the delta. It is one pass, and nothing more
// is read, when limit is negative or the Silver rows the run can read are within it:
// all of them (the snapshot's total-records) for a full build, that share of them the
// parts are of Gold's partitions (about goldFiles) for an incremental one. Otherwise the
// grain column of those rows is read once to count the rows of each partition. Silver
// partitioned or sorted by the grain (silver sort_by) prunes each pass's read to its
// partitions; otherwise every pass reads the whole table.
func (m MartSpec) planPasses(ctx context.Context, src *table.Table, snap *table.Snapshot, limit int64, parts []int64, goldFiles int64) ([]pass, error) {
	if limit == 0 {
		limit = DefaultPassRows
	}
	one := []pass{m.passOf(src, parts)}
	rows := float64(totalOf(snap, "total-records"))
	if parts != nil && goldFiles > 0 {
		rows = rows * float64(len(parts)) / float64(goldFiles)
	}
	if limit < 0 || rows <= float64(limit) || parts != nil && len(parts) < 2 {
		return one, nil
	}
	counts, err := m.silverGrainRows(ctx, src, snap.SnapshotID, one[0])
	if err != nil {
		return nil, err
	}
	grains := parts // every touched partition has a pass, even one Silver now has no row of
	if parts == nil {
		grains = slices.Sorted(func(yield func(int64) bool) {
			for g := range counts {
				if !yield(g) {
					return
				}
			}
		})
	}
	var groups [][]int64
	var n int64
	for _, g := range grains {
		if len(groups) == 0 || n+counts[g] > limit {
			groups = append(groups, nil)
			n = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], g)
		n += counts[g]
	}
	if len(groups) <= 1 {
		return one, nil
	}
	out := make([]pass, len(groups))
	for i, grp := range groups {
		if parts != nil {
			// The touched partitions of the group, each its range: the untouched ones
			// between them are not read.
			out[i] = m.passOf(src, grp)
			out[i].skipNulls = i > 0
			continue
		}
		out[i] = m.spanPass(src, grp, i == 0)
	}
	return out, nil
}

// spanPass is the pass of a full build over the consecutive partitions grp: one range
// from the first to the last (Silver has no row of a grain between them that is not in
// grp). The first pass (first) also reads and counts the rows without a grain value.
func (m MartSpec) spanPass(src *table.Table, grp []int64, first bool) pass {
	grainT := m.SourceColumns[m.GrainColumn]
	lo, _ := m.grainRange(grp[0], grainT)
	_, hi := m.grainRange(grp[len(grp)-1], grainT)
	ps := pass{keep: make(map[int64]bool, len(grp)), ranges: [][2]int64{{lo, hi}}, filter: iceberg.AlwaysTrue{}}
	for _, g := range grp {
		ps.keep[g] = true
	}
	ps.readNulls, ps.skipNulls = first, !first
	if partitionedByGrain(src, m) || sortedByGrain(src, m) {
		ps.filter = m.rangeFilter(ps.ranges, ps.readNulls)
	}
	return ps
}

// totalOf is a count a snapshot's summary records (total-records: the data files' rows,
// before deletes), or the largest int64 when it records none.
func totalOf(snap *table.Snapshot, key string) int64 {
	if snap.Summary != nil {
		if n, err := strconv.ParseInt(snap.Summary.Properties[key], 10, 64); err == nil {
			return n
		}
	}
	return 1<<63 - 1
}

// silverGrainRows counts the live Silver rows of each grain value at snapshot that ps
// reads (rows without a grain are left out), reading the grain column alone.
func (m MartSpec) silverGrainRows(ctx context.Context, src *table.Table, snapshot int64, ps pass) (map[int64]int64, error) {
	grainT := m.SourceColumns[m.GrainColumn]
	scan := src.Scan(table.WithSelectedFields(m.GrainColumn), table.WithSnapshotID(snapshot), table.WithRowFilter(ps.filter))
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", m.SourceTable, err)
	}
	recs, direct := readSilverDirect(ctx, src, tasks, []string{m.GrainColumn}, m.GrainColumn, ps.ranges, false)
	if !direct {
		if _, recs, err = scan.ReadTasks(ctx, tasks); err != nil {
			return nil, fmt.Errorf("scan %s: %w", m.SourceTable, err)
		}
	}
	counts := map[int64]int64{}
	for rec, err := range recs {
		if err != nil {
			return nil, fmt.Errorf("count %s rows by %s: %w", m.SourceTable, m.GrainColumn, err)
		}
		col := rec.Column(0)
		for r := range int(rec.NumRows()) {
			if v := silver.ValueAt(col, r, grainT); !v.Null {
				if g := m.grainOf(v, grainT); ps.keep == nil || ps.keep[g] {
					counts[g]++
				}
			}
		}
		rec.Release()
	}
	return counts, nil
}

// rangeFilter selects the Silver rows whose grain column lies in one of ranges (and
// those without a grain value, with nulls).
func (m MartSpec) rangeFilter(ranges [][2]int64, nulls bool) iceberg.BooleanExpression {
	src := m.SourceColumns[m.GrainColumn]
	ref := iceberg.Reference(m.GrainColumn)
	var ors []iceberg.BooleanExpression
	for _, r := range ranges {
		if src.Kind == silver.Date {
			ors = append(ors, iceberg.NewAnd(iceberg.GreaterThanEqual(ref, iceberg.Date(r[0])), iceberg.LessThan(ref, iceberg.Date(r[1]))))
		} else {
			ors = append(ors, iceberg.NewAnd(iceberg.GreaterThanEqual(ref, iceberg.Timestamp(r[0])), iceberg.LessThan(ref, iceberg.Timestamp(r[1]))))
		}
	}
	if nulls {
		ors = append(ors, iceberg.IsNull(ref))
	}
	switch len(ors) {
	case 0:
		return iceberg.AlwaysFalse{}
	case 1:
		return ors[0]
	}
	return iceberg.NewOr(ors[0], ors[1], ors[2:]...)
}

// mergeReports is the report of a run from its passes' reports: each check's failures
// added up (examples from the first passes), in the order of the mart's checks.
func (m MartSpec) mergeReports(reps []Report) Report {
	if len(reps) == 1 {
		return reps[0]
	}
	var out Report
	byCheck := map[string]*Failure{}
	for _, r := range reps {
		if out.Checked == nil {
			out.Checked = r.Checked
		}
		for _, f := range r.Failures {
			if have := byCheck[f.Check]; have != nil {
				have.Count += f.Count
				have.Examples = append(have.Examples, f.Examples...)[:min(maxExamples, len(have.Examples)+len(f.Examples))]
				continue
			}
			f.Examples = slices.Clone(f.Examples)
			byCheck[f.Check] = &f
		}
	}
	for _, ck := range m.Checks {
		if f := byCheck[ck.Name]; f != nil {
			out.Failures = append(out.Failures, *f)
		}
	}
	return out
}

// computePasses aggregates, builds and checks each pass in turn and writes its rows as
// data files (not committed) while no pass has failed a critical check; a pass's state
// is released before the next one starts. It adds the counts and the merged report to
// res and returns the files and, for a full build, the partitions computed (ascending).
// Each pass is checked over its own partitions (snapshot: snapGrain's).
func (m MartSpec) computePasses(ctx context.Context, gt, src *table.Table, passes []pass, rf *rowFilter, joins []*joined, snapGrain int64, now time.Time, res *Result, opt Options) ([]iceberg.DataFile, []int64, error) {
	var files []iceberg.DataFile
	var grains []int64
	reps := make([]Report, 0, len(passes))
	critical := false
	hist := &goldHistory{gt: gt, grain: m.GrainAs}
	for i, ps := range passes {
		t0 := time.Now()
		p, err := newPartial(m)
		if err != nil {
			return nil, nil, err
		}
		p.fixedGrain, p.joins, p.workers = snapGrain, joins, opt.scanWorkers
		n, err := p.scanSilver(ctx, src, res.SilverTo, ps, rf)
		if err != nil {
			return nil, nil, err
		}
		res.SilverRows += n
		res.NullGrainRows += p.nullGrain
		tScan := time.Since(t0)
		rows := p.rows()
		if ps.runs != nil {
			if rows, err = p.mergeGold(ctx, gt, ps.parts, rows); err != nil {
				return nil, nil, err
			}
		}
		checked := ps.parts
		switch {
		case m.snapshot():
			checked = []int64{snapGrain}
		case res.Full:
			for _, g := range rows {
				if len(checked) == 0 || checked[len(checked)-1] != g.grain {
					checked = append(checked, g.grain)
				}
			}
			grains = append(grains, checked...)
		}
		rec := p.build(rows, res.RunID, now)
		tBuild := time.Since(t0)
		rep, err := runChecks(ctx, hist, m, rec, checked, p.nullGrain)
		tCheck := time.Since(t0)
		if err == nil && !critical && !rep.Critical() {
			// The rows are written once; a conflict retries only the commit of these
			// files (catalog.Commit's rule), so a lost race leaves no file behind.
			var fs []iceberg.DataFile
			fs, err = writeFiles(ctx, gt, m.arrowSchema(), rec)
			files = append(files, fs...)
		}
		res.Rows += rec.NumRows()
		rec.Release()
		if err != nil {
			return nil, nil, err
		}
		critical = critical || rep.Critical()
		reps = append(reps, rep)
		opt.Log.Debug("pass computed", "pass", i+1, "of", len(passes), "silver_rows", n, "rows", len(rows),
			"scan_s", tScan.Seconds(), "build_s", (tBuild - tScan).Seconds(), "check_s", (tCheck - tBuild).Seconds(), "write_s", (time.Since(t0) - tCheck).Seconds())
		if opt.afterPass != nil {
			if err := opt.afterPass(i); err != nil {
				return nil, nil, err
			}
		}
	}
	res.Report = m.mergeReports(reps)
	return files, grains, nil
}
