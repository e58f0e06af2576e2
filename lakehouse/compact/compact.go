// Package compact rewrites a table's small data files (and the data files that delete
// files apply to) into fewer files with the deletes applied, in one snapshot: the
// maintenance every layer shares (Silver's merge-on-read debt, Bronze's and the
// bookkeeping tables' one-file-per-run appends).
//
// Promise: the rows do not change, only the files holding them (every column, audit and
// run ids included, keeps its value); a commit replaces exactly the files that were
// rewritten. On error nothing is committed and the files written are deleted
// (catalog.WriteAttempt; a crash leaves them to the orphan sweep). Running it again
// after a crash or with nothing to do is safe: nothing eligible commits nothing.
package compact

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"

	"goldbridge/lakehouse/catalog"
)

// Options choose what a compaction rewrites and what its commit records.
type Options struct {
	// Select keeps the live data files a compaction may rewrite (nil: every file).
	Select func(table.FileScanTask) bool
	// MinFiles is the number of selected files a partition needs to be rewritten
	// (default 2); a partition where a delete file applies to a selected file is
	// rewritten whatever its count.
	MinFiles int
	// Props returns the snapshot summary of the commit, for the table as it is when the
	// commit is attempted (watermarks to carry forward).
	Props func(tbl *table.Table) iceberg.Properties
	// BeforeCommit is called before each commit attempt (tests).
	BeforeCommit func(attempt int)
}

// Result summarises one compaction.
type Result struct {
	Table      string
	SnapshotID int64 // the compaction snapshot, 0 when there was nothing to compact
	Partitions int   // partitions rewritten
	// Files removed and added by the rewrite; DeleteFilesRemoved are the equality (and
	// position) delete files it made obsolete and removed.
	DataFilesRemoved, DataFilesAdded, DeleteFilesRemoved int
	BytesBefore, BytesAfter                              int64
	Elapsed                                              time.Duration
}

// ErrStale: the files a compaction rewrote changed before it could commit.
var ErrStale = errors.New("the compacted files changed during the compaction (a run committed meanwhile); run the compaction again")

// Run compacts ident as opt says: every partition holding at least MinFiles selected
// data files, or a selected file that deletes apply to, is rewritten into new data
// files with the deletes applied (iceberg-go's compaction groups), and the delete files
// no surviving data file needs any more are removed, all in one snapshot.
//
// The rewritten files are written once, from one plan; a commit that loses to a
// concurrent writer re-commits those same files on the reloaded table (catalog.Commit's
// rule: no file is written twice), provided the files they replace are still live with
// the same deletes applying to them. If a writer changed them meanwhile (new deletes on
// a rewritten file, or a rewritten file removed), Run fails with ErrStale and deletes
// what it wrote: committing would bring back the rows those deletes remove.
func Run(ctx context.Context, lh *catalog.Lakehouse, ident string, opt Options) (Result, error) {
	w := lh.BeginWrite(ident)
	res, err := run(ctx, lh, ident, opt)
	return res, w.End(ctx, err)
}

func run(ctx context.Context, lh *catalog.Lakehouse, ident string, opt Options) (Result, error) {
	start := time.Now()
	res := Result{Table: ident}
	fail := func(err error) (Result, error) { return res, fmt.Errorf("compact %s: %w", ident, err) }
	done := func() (Result, error) { res.Elapsed = time.Since(start); return res, nil }
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return fail(err)
	}
	if tbl.CurrentSnapshot() == nil {
		return done()
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return fail(fmt.Errorf("plan files: %w", err))
	}
	if opt.Select != nil {
		tasks = slices.DeleteFunc(tasks, func(t table.FileScanTask) bool { return !opt.Select(t) })
	}
	inputs := map[string]string{} // rewritten data file -> the deletes applying to it
	var results []table.CompactionGroupResult
	for _, g := range Groups(tasks, max(opt.MinFiles, 2)) {
		gr, err := rewrite(ctx, tbl, g)
		if err != nil {
			return fail(fmt.Errorf("rewrite partition %s: %w", g.PartitionKey, err))
		}
		if len(gr.OldDataFiles) == 0 && len(gr.NewDataFiles) == 0 {
			continue
		}
		results = append(results, gr)
		for _, t := range g.Tasks {
			inputs[t.File.FilePath()] = deleteSet(t)
		}
	}
	if len(results) == 0 {
		return done()
	}
	attempt := 0
	var r Result
	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if opt.BeforeCommit != nil {
			attempt++
			opt.BeforeCommit(attempt)
		}
		r = res
		return commit(ctx, tbl, inputs, results, opt, &r)
	})
	if errors.Is(err, ErrStale) {
		// No attempt committed (each lost its race, the last never tried): the files
		// written are unreferenced whichever catalog this is, so they go now, not at
		// the next sweep.
		err = errors.Join(err, removeWritten(ctx, tbl, results))
	}
	if err != nil {
		return fail(err)
	}
	res = r
	res.SnapshotID = committed.CurrentSnapshot().SnapshotID
	return done()
}

// commit stages the rewrite of results on tbl (whose inputs must be unchanged) and
// commits it, counting into r.
func commit(ctx context.Context, tbl *table.Table, inputs map[string]string, results []table.CompactionGroupResult, opt Options, r *Result) (*table.Table, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, ErrStale
	}
	if err := sameInputs(ctx, tbl, inputs); err != nil {
		return nil, err
	}
	rewritten := map[string]struct{}{}
	for p := range inputs {
		rewritten[p] = struct{}{}
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	dead, err := compaction.CollectDeadEqualityDeletesWithSpecs(ctx, fs, tbl.Metadata(), snap, rewritten)
	if err != nil {
		return nil, fmt.Errorf("find obsolete equality deletes: %w", err)
	}
	props := iceberg.Properties{}
	if opt.Props != nil {
		props = opt.Props(tbl)
	}
	tx := tbl.NewTransaction()
	rw := tx.NewRewrite(props)
	staged := map[string]bool{}
	for _, gr := range results {
		rw.ApplyResult(gr)
		r.Partitions++
		r.DataFilesRemoved += len(gr.OldDataFiles)
		r.DataFilesAdded += len(gr.NewDataFiles)
		r.BytesBefore += gr.BytesBefore
		r.BytesAfter += gr.BytesAfter
		for _, df := range slices.Concat(gr.SafePosDeletes, gr.SafeDeletionVectors) {
			staged[df.FilePath()] = true
			r.DeleteFilesRemoved++
		}
	}
	for _, df := range dead { // the delete files the groups did not already remove
		if !staged[df.FilePath()] {
			staged[df.FilePath()] = true
			rw.DeleteFile(df)
			r.DeleteFilesRemoved++
		}
	}
	if err := rw.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit compaction: %w", err)
	}
	return tx.Commit(ctx)
}

// removeWritten deletes the data files the compaction groups wrote.
func removeWritten(ctx context.Context, tbl *table.Table, results []table.CompactionGroupResult) error {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, gr := range results {
		for _, df := range gr.NewDataFiles {
			if err := fs.Remove(df.FilePath()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the rewritten files: %w", errors.Join(errs...))
	}
	return nil
}

// deleteSet renders the delete files applying to a scan task's data file.
func deleteSet(t table.FileScanTask) string {
	var paths []string
	for _, df := range slices.Concat(t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles) {
		paths = append(paths, df.FilePath())
	}
	slices.Sort(paths)
	return strings.Join(paths, "\n")
}

// sameInputs returns ErrStale unless every data file of inputs is live in tbl's current
// snapshot with the same delete files applying to it.
func sameInputs(ctx context.Context, tbl *table.Table, inputs map[string]string) error {
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return fmt.Errorf("plan files: %w", err)
	}
	seen := 0
	for _, t := range tasks {
		want, ok := inputs[t.File.FilePath()]
		if !ok {
			continue
		}
		if deleteSet(t) != want {
			return fmt.Errorf("%w: new deletes apply to %s", ErrStale, t.File.FilePath())
		}
		seen++
	}
	if seen != len(inputs) {
		return fmt.Errorf("%w: %d of the %d rewritten files are no longer live", ErrStale, len(inputs)-seen, len(inputs))
	}
	return nil
}

// Groups groups the data files of tasks by partition and keeps the partitions worth
// rewriting: those where a delete file applies, or that hold at least minFiles files.
func Groups(tasks []table.FileScanTask, minFiles int) []table.CompactionTaskGroup {
	byPart := map[string]*table.CompactionTaskGroup{}
	var keys []string
	for _, t := range tasks {
		k := PartitionKey(t.File)
		g, ok := byPart[k]
		if !ok {
			g = &table.CompactionTaskGroup{PartitionKey: k}
			byPart[k] = g
			keys = append(keys, k)
		}
		g.Tasks = append(g.Tasks, t)
		g.TotalSizeBytes += t.File.FileSizeBytes()
	}
	slices.Sort(keys)
	var out []table.CompactionTaskGroup
	for _, k := range keys {
		g := byPart[k]
		deletes := slices.ContainsFunc(g.Tasks, func(t table.FileScanTask) bool {
			return len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles) > 0
		})
		if deletes || len(g.Tasks) >= minFiles {
			out = append(out, *g)
		}
	}
	return out
}

// PartitionKey renders a data file's spec id and partition values.
func PartitionKey(df iceberg.DataFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spec=%d", df.SpecID())
	p := df.Partition()
	ids := make([]int, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "/%d=%v", id, p[id])
	}
	return b.String()
}
