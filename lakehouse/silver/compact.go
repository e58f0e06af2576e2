package silver

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"github.com/google/uuid"

	"goldbridge/lakehouse/catalog"
)

// PropCompaction marks a compaction commit (its id) in the snapshot summary.
const PropCompaction = "goldbridge.compaction-id"

// CompactResult summarises one compaction of a Silver table.
type CompactResult struct {
	Table        string
	CompactionID string
	SnapshotID   int64 // the compaction snapshot, 0 when there was nothing to compact
	Partitions   int   // partitions rewritten
	// Files removed and added by the rewrite; DeleteFiles are the equality (and
	// position) delete files it made obsolete and removed.
	DataFilesRemoved, DataFilesAdded, DeleteFilesRemoved int
	BytesBefore, BytesAfter                              int64
	Elapsed                                              time.Duration
}

// Compact pays the merge-on-read debt of a Silver table: every partition that has delete
// files applying to its data, or more than one data file, is rewritten into new data
// files with the deletes applied, and the delete files no surviving data file needs any
// more are removed, all in one snapshot (iceberg-go's RewriteDataFiles).
//
// The rows do not change, only the files that hold them: each row keeps its _run_id,
// _event_id and _silver_updated_ts. The commit carries the Silver watermark forward
// (goldbridge.bronze-snapshot-id) with an empty goldbridge.run-id, so Silver runs
// continue from the same Bronze snapshot and Gold sees no changed rows in it.
//
// Compact is safe to run again, and a crash before its commit leaves only unreferenced
// files. The rewritten files are written once, from one plan; a commit that loses to a
// concurrent writer re-commits those same files on the reloaded table (catalog.Commit's
// rule: no file is written twice), provided the files they replace are still live with
// the same deletes applying to them. If a Silver run changed them meanwhile (new deletes
// on a rewritten file), Compact fails with ErrCompactStale and deletes what it wrote:
// committing would bring back the rows those deletes remove. Run it again.
//
// If it fails, the files it wrote are deleted (catalog.WriteAttempt).
func Compact(ctx context.Context, lh *catalog.Lakehouse, ident string) (CompactResult, error) {
	return compactWith(ctx, lh, ident, nil)
}

// ErrCompactStale: the files a compaction rewrote changed before it could commit.
var ErrCompactStale = errors.New("the compacted files changed during the compaction (a silver run committed meanwhile); run compact again")

// compactWith is Compact with a hook called before each commit attempt (tests).
func compactWith(ctx context.Context, lh *catalog.Lakehouse, ident string, beforeCommit func(attempt int)) (CompactResult, error) {
	w := lh.BeginWrite(ident)
	res, err := compact(ctx, lh, ident, beforeCommit)
	return res, w.End(ctx, err)
}

func compact(ctx context.Context, lh *catalog.Lakehouse, ident string, beforeCommit func(attempt int)) (CompactResult, error) {
	start := time.Now()
	res := CompactResult{Table: ident, CompactionID: uuid.NewString()}
	fail := func(err error) (CompactResult, error) { return res, fmt.Errorf("compact %s: %w", ident, err) }
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return fail(err)
	}
	done := func() (CompactResult, error) { res.Elapsed = time.Since(start); return res, nil }
	if tbl.CurrentSnapshot() == nil {
		return done()
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return fail(fmt.Errorf("plan files: %w", err))
	}
	groups := compactionGroups(tasks)
	inputs := map[string]string{} // rewritten data file -> the deletes applying to it
	var results []table.CompactionGroupResult
	for _, g := range groups {
		gr, err := table.ExecuteCompactionGroup(ctx, tbl, g)
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
	var r CompactResult
	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if beforeCommit != nil {
			attempt++
			beforeCommit(attempt)
		}
		snap := tbl.CurrentSnapshot()
		if snap == nil {
			return nil, ErrCompactStale
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
		props := iceberg.Properties{
			PropRunID:      "", // not a run: Gold finds no rows written by it
			PropCompaction: res.CompactionID,
		}
		if w := Watermark(tbl); w != 0 {
			props[PropBronzeSnapshot] = strconv.FormatInt(w, 10)
		}
		r = res
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
	})
	if errors.Is(err, ErrCompactStale) {
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

// sameInputs returns ErrCompactStale unless every data file of inputs is live in tbl's
// current snapshot with the same delete files applying to it.
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
			return fmt.Errorf("%w: new deletes apply to %s", ErrCompactStale, t.File.FilePath())
		}
		seen++
	}
	if seen != len(inputs) {
		return fmt.Errorf("%w: %d of the %d rewritten files are no longer live", ErrCompactStale, len(inputs)-seen, len(inputs))
	}
	return nil
}

// compactionGroups groups the live data files by partition and keeps the partitions
// worth rewriting: those where a delete file applies, or that hold more than one file.
func compactionGroups(tasks []table.FileScanTask) []table.CompactionTaskGroup {
	byPart := map[string]*table.CompactionTaskGroup{}
	var keys []string
	for _, t := range tasks {
		k := partitionKey(t.File)
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
		deletes := false
		for _, t := range g.Tasks {
			if len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles) > 0 {
				deletes = true
			}
		}
		if deletes || len(g.Tasks) > 1 {
			out = append(out, *g)
		}
	}
	return out
}

// partitionKey renders a data file's spec id and partition values.
func partitionKey(df iceberg.DataFile) string {
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
