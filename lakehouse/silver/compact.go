package silver

import (
	"context"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/compact"
)

// PropCompaction marks a compaction commit (its id) in the snapshot summary.
const PropCompaction = "goldbridge.compaction-id"

// CompactResult summarises one compaction of a Silver table.
type CompactResult struct {
	compact.Result
	CompactionID string
}

// ErrCompactStale: the files a compaction rewrote changed before it could commit.
var ErrCompactStale = compact.ErrStale

// Compact pays the merge-on-read debt of a Silver table: every partition that has delete
// files applying to its data, or more than one data file, is rewritten into new data
// files with the deletes applied, and the delete files no surviving data file needs any
// more are removed, all in one snapshot (package compact).
//
// The rows do not change, only the files that hold them: each row keeps its _run_id,
// _event_id and _silver_updated_ts. The commit carries the Silver watermark forward
// (goldbridge.bronze-snapshot-id) with an empty goldbridge.run-id, so Silver runs
// continue from the same Bronze snapshot and Gold sees no changed rows in it.
//
// Compact is safe to run again, and a crash before its commit leaves only unreferenced
// files. If a Silver run changed the rewritten files before the commit (new deletes on
// a rewritten file), Compact fails with ErrCompactStale and deletes what it wrote:
// committing would bring back the rows those deletes remove. Run it again.
func Compact(ctx context.Context, lh *catalog.Lakehouse, ident string) (CompactResult, error) {
	return compactWith(ctx, lh, ident, nil)
}

// compactWith is Compact with a hook called before each commit attempt (tests).
func compactWith(ctx context.Context, lh *catalog.Lakehouse, ident string, beforeCommit func(attempt int)) (CompactResult, error) {
	id := uuid.NewString()
	res, err := compact.Run(ctx, lh, ident, compact.Options{
		Props:        func(tbl *table.Table) iceberg.Properties { return CompactionProps(tbl, id) },
		BeforeCommit: beforeCommit,
	})
	return CompactResult{Result: res, CompactionID: id}, err
}

// CompactionProps is the summary of a commit that rewrites files of a Silver (or
// quarantine, or keys) table without changing its rows: no run id (Gold finds no rows
// written by it), the compaction id, and the table's Bronze watermark carried forward.
func CompactionProps(tbl *table.Table, id string) iceberg.Properties {
	props := iceberg.Properties{
		PropRunID:      "", // not a run: Gold finds no rows written by it
		PropCompaction: id,
	}
	if w := Watermark(tbl); w != 0 {
		props[PropBronzeSnapshot] = strconv.FormatInt(w, 10)
	}
	return props
}
