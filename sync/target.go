package sync

import (
	"context"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/shopspring/decimal"

	"goldbridge/serving"
	"goldbridge/serving/ddl"
	"goldbridge/serving/push"
)

// Target is the hot tier a mart's window is served from. Sync and Check reach it only
// through these four methods; ClickHouse (NewClickHouse) is the implementation. A
// method that returns an error may have done part of its work, never a part readers can
// see as a mix: calling it again (or the next Sync) converges.
type Target interface {
	// Ensure creates the tables serving m if they are missing and compares the live
	// ones with m's definition; with rebuild it drops them first (the recorded push
	// states stay: Partitions then lists them, none live). Outcome.Rebuild says
	// the served table differs from the definition and must be replaced whole (a
	// Publish with Batch.Rebuild). It never changes served rows.
	Ensure(ctx context.Context, m *serving.Mart, tbl *table.Table, rebuild bool) (ddl.Outcome, error)
	// Partitions lists what is served: per partition id, the Gold state recorded by
	// the last push of it (deleted ones omitted), and the rows each served partition
	// holds now.
	Partitions(ctx context.Context, m *serving.Mart) (Served, error)
	// Publish makes the batch's partitions equal to their Gold content in tbl, removes
	// the partitions of Batch.Drop and records both, published together: a reader sees
	// the old state or the new one, never a mix and never a double count. On an error
	// the recorded state still says what is served.
	Publish(ctx context.Context, m *serving.Mart, tbl *table.Table, b Batch) (Published, error)
	// ReadBack reads the served rows of the hot partitions for Check: how the served
	// table's columns differ from m's definition, and, when they do not, per partition
	// id and grouping level the row count, fingerprint, measure sums, weighted sums and
	// state fingerprints (LevelStats).
	ReadBack(ctx context.Context, m *serving.Mart, hot []push.Partition) (ReadBack, error)
}

// StorageReporter is a Target that can say what a mart's served table holds on its
// disk: its parts, and those still on disk that no reader reads (the metrics after a
// sync).
type StorageReporter interface {
	Storage(ctx context.Context, m *serving.Mart) (push.Storage, error)
}

var (
	_ StorageReporter = (*ClickHouse)(nil)
	_ StorageReporter = (*Sharded)(nil)
)

// Served is what a Target serves of a mart (Target.Partitions).
type Served struct {
	States map[string]push.State // recorded push state by partition id
	Live   map[string]uint64     // rows by served partition id
}

// Batch is one publication (Target.Publish).
type Batch struct {
	Push    []push.Partition // partitions to copy from Gold, oldest first
	Drop    []string         // partition ids to remove (they left the hot window or Gold)
	Rebuild bool             // replace the served table whole (Ensure's Outcome.Rebuild)
	Purge   bool             // afterwards, delete every copy of removed rows from disk
	Rows    int              // rows per insert block (0: the target's default)
	Streams int              // parallel insert streams (0: the target's default)
	Now     func() time.Time // the clock of the recorded states
}

// Published is what Publish did.
type Published struct {
	Push   push.Result // the rows copied, per partition and step
	Purged push.Purged // Batch.Purge
}

// ReadBack is the served side of a Check (Target.ReadBack).
type ReadBack struct {
	Columns []ddl.Change                      // served columns that differ from the definition
	Stats   map[string]map[string]*LevelStats // by partition id, then grouping level
	// Diverged: partitions whose copies differ where the target keeps several (the
	// nodes of a shard, a copy outside its home shard), with what differs; Check
	// reports each as drift.
	Diverged map[string]string
}

// LevelStats are the aggregates Check compares per partition and grouping level.
type LevelStats struct {
	Rows int64
	Hash uint64                     // sum of the rows' fingerprints (fingerprint.go)
	Sums map[string]decimal.Decimal // by summed measure (summed)
	// Weighted: by approx measure (a double sum or average), the sum of its values
	// weighted by their rows' weights (fingerprint.go).
	Weighted map[string]float64
	// States: by measure with a checked state (checkedStates), the sum of the rows'
	// state fingerprints (fingerprint.go), over the rows as <t> stores them.
	States map[string]uint64
}

// newLevelStats returns empty LevelStats.
func newLevelStats() *LevelStats {
	return &LevelStats{Sums: map[string]decimal.Decimal{}, Weighted: map[string]float64{}, States: map[string]uint64{}}
}
