package silver

import (
	"context"
	"fmt"
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
// files. The rewrite is validated against concurrent commits: if a Silver run commits
// new deletes meanwhile, the commit conflicts and is retried from a fresh plan (the
// files written by the failed attempt stay unreferenced).
//
// If it fails, the files it wrote are deleted (catalog.WriteAttempt).
func Compact(ctx context.Context, lh *catalog.Lakehouse, ident string) (CompactResult, error) {
	w := lh.BeginWrite(ident)
	res, err := compact(ctx, lh, ident)
	return res, w.End(ctx, err)
}

func compact(ctx context.Context, lh *catalog.Lakehouse, ident string) (CompactResult, error) {
	start := time.Now()
	res := CompactResult{Table: ident, CompactionID: uuid.NewString()}
	fail := func(err error) (CompactResult, error) { return res, fmt.Errorf("compact %s: %w", ident, err) }
	if _, err := lh.LoadTable(ctx, ident); err != nil {
		return fail(err)
	}
	var done *CompactResult
	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		r := res
		done = nil
		snap := tbl.CurrentSnapshot()
		if snap == nil {
			return nil, nil // nothing committed
		}
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return nil, fmt.Errorf("plan files: %w", err)
		}
		groups := compactionGroups(tasks)
		if len(groups) == 0 {
			return nil, nil
		}
		rewritten := map[string]struct{}{}
		for _, g := range groups {
			for _, t := range g.Tasks {
				rewritten[t.File.FilePath()] = struct{}{}
			}
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
			PropCompaction: r.CompactionID,
		}
		if w := Watermark(tbl); w != 0 {
			props[PropBronzeSnapshot] = strconv.FormatInt(w, 10)
		}
		tx := tbl.NewTransaction()
		out, err := tx.RewriteDataFiles(ctx, groups, table.RewriteDataFilesOptions{
			SnapshotProps:            props,
			ExtraDeleteFilesToRemove: dead,
		})
		if err != nil {
			return nil, err
		}
		r.Partitions = out.RewrittenGroups
		r.DataFilesRemoved, r.DataFilesAdded = out.RemovedDataFiles, out.AddedDataFiles
		r.DeleteFilesRemoved = out.RemovedEqualityDeleteFiles + out.RemovedPositionDeleteFiles + out.RemovedDeletionVectorFiles
		r.BytesBefore, r.BytesAfter = out.BytesBefore, out.BytesAfter
		done = &r
		return tx.Commit(ctx)
	})
	if err != nil {
		return fail(err)
	}
	if done == nil {
		res.Elapsed = time.Since(start)
		return res, nil
	}
	res = *done
	res.SnapshotID = committed.CurrentSnapshot().SnapshotID
	res.Elapsed = time.Since(start)
	return res, nil
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
