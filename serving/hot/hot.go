// Package hot is the contract of the hot tier: what sync asks of the store that serves
// a mart's hot window (Target), in the tier's own terms: partitions and their recorded
// push states, publications (Batch), what Ensure found (Outcome, Change) and the
// per-level statistics Check compares (LevelStats).
//
// Promise of every implementation (sync/contract_test.go checks it): after a Publish
// returns nil, Partitions records every pushed partition with the Gold snapshot and
// checksum it was pushed from and lists none of the dropped ones, and ReadBack reads
// the served rows of exactly those partitions; after an error (or a crash) the recorded
// states still say what is served, so the next Sync converges. Readers never see a mix
// of two publications.
package hot

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/shopspring/decimal"

	"goldbridge/serving"
)

// Target is the hot tier a mart's window is served from. Sync and Check reach it only
// through these four methods; sync.ClickHouse and sync.Sharded implement it for
// ClickHouse, hotfake.Target in memory for tests. A
// method that returns an error may have done part of its work, never a part readers can
// see as a mix: calling it again (or the next Sync) converges.
type Target interface {
	// Ensure creates the tables serving m if they are missing and compares the live
	// ones with m's definition; with rebuild it drops them first: nothing is served
	// after it, and each recorded push state stays as it was or is forgotten (a single
	// server keeps them; a sharded target knows a state only where it is served). Outcome.Rebuild says
	// the served table differs from the definition and must be replaced whole (a
	// Publish with Batch.Rebuild). It never changes served rows.
	Ensure(ctx context.Context, m *serving.Mart, tbl *table.Table, rebuild bool) (Outcome, error)
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
	ReadBack(ctx context.Context, m *serving.Mart, hot []Partition) (ReadBack, error)
}

// StorageReporter is a Target that can say what a mart's served table holds on its
// disk: its parts, and those still on disk that no reader reads (the metrics after a
// sync).
type StorageReporter interface {
	Storage(ctx context.Context, m *serving.Mart) (Storage, error)
}

// WindowsServer is a Target that serves a mart's rolling windows (serving.Mart.Windows:
// a single ClickHouse server; Sync and Check refuse a mart with windows on another
// Target). CheckWindows compares the served windows with a recomputation from the served
// daily rows, leaving out the windows that meet an unservable partition, and describes
// each side (rows and fingerprint, or "missing") when they differ.
type WindowsServer interface {
	CheckWindows(ctx context.Context, m *serving.Mart, unservable []Partition) (want, have string, err error)
}

// Served is what a Target serves of a mart (Target.Partitions).
type Served struct {
	States map[string]State  // recorded push state by partition id
	Live   map[string]uint64 // rows by served partition id
}

// Batch is one publication (Target.Publish).
type Batch struct {
	Push    []Partition      // partitions to copy from Gold, oldest first
	Drop    []string         // partition ids to remove (they left the hot window or Gold)
	Rebuild bool             // replace the served table whole (Ensure's Outcome.Rebuild)
	Purge   bool             // afterwards, delete every copy of removed rows from disk
	Rows    int              // rows per insert block (0: the target's default)
	Streams int              // parallel insert streams (0: the target's default)
	Now     func() time.Time // the clock of the recorded states
	// Unservable: the hot Gold partitions not served; a rolling window that meets one
	// is left out (serving.Mart.Windows).
	Unservable []Partition
	// Windows: rebuild the rolling windows even if they look current (a repair).
	Windows bool
}

// Published is what Publish did.
type Published struct {
	Push   Result // the rows copied, per partition and step
	Purged Purged // Batch.Purge
	// Windows: how the rolling windows were brought up to date (serving.Mart.Windows):
	// "" (they were), "rebuilt" or "incremental".
	Windows string
}

// ReadBack is the served side of a Check (Target.ReadBack).
type ReadBack struct {
	Columns []Change                          // served columns that differ from the definition
	Stats   map[string]map[string]*LevelStats // by partition id, then grouping level
	// Diverged: partitions whose copies differ where the target keeps several (the
	// nodes of a shard, a copy outside its home shard), with what differs; Check
	// reports each as drift.
	Diverged map[string]string
}

// LevelStats are the aggregates Check compares per partition and grouping level.
type LevelStats struct {
	Rows int64
	Hash uint64                     // sum of the rows' fingerprints (serving/fingerprint)
	Sums map[string]decimal.Decimal // by summed measure (fingerprint.Summed)
	// Weighted: by approx measure (a double sum or average), the sum of its values
	// weighted by their rows' weights (serving/fingerprint).
	Weighted map[string]float64
	// States: by measure with a checked state (fingerprint.CheckedStates), the sum of the rows'
	// state fingerprints (serving/fingerprint), over the rows as <t> stores them.
	States map[string]uint64
}

// NewLevelStats returns empty LevelStats.
func NewLevelStats() *LevelStats {
	return &LevelStats{Sums: map[string]decimal.Decimal{}, Weighted: map[string]float64{}, States: map[string]uint64{}}
}

// Partition is one served partition to push and the Gold state it is pushed from.
type Partition struct {
	ID         string    // ClickHouse partition id (20260501 or 202605)
	Start, End time.Time // grain range [Start, End)
	SnapshotID int64     // newest Gold snapshot that updated it
	Checksum   string    // fingerprint of the Gold partitions it covers
	Rows       int64     // Gold records in it, all levels (sizes the insert streams)
	// Unservable says why ClickHouse cannot serve it (its grain, or a date or timestamp
	// value outside serving.MinTime..MaxTime); empty when it can.
	Unservable string `json:",omitempty"`
}

// Result of a push (Published.Push).
type Result struct {
	Rows      int64            // Gold rows streamed
	ByID      map[string]int64 // Gold rows streamed per partition
	Exchanged bool             // <t> was swapped whole: partitions not pushed are gone
	Elapsed   time.Duration
	Steps     map[string]time.Duration // wall time per step (the target's step names)
}

// State is the recorded push state of one served partition (in ClickHouse: a row of
// _goldbridge_sync).
type State struct {
	Partition  string
	SnapshotID int64
	Rows       uint64
	Checksum   string
	Deleted    bool
	PushedAt   time.Time
}

// Purged is what a purge removed from disk (Batch.Purge).
type Purged struct {
	// DroppedTables: tables of the mart dropped earlier (an exchanged-out <t>, batch
	// tables) whose data an Atomic database still kept (database_atomic_delay_before_drop_table_sec).
	DroppedTables int
	// OutdatedParts: inactive parts of <t> (replaced or merged away, kept for
	// old_parts_lifetime) deleted by rebuilding <t> from its active parts.
	OutdatedParts int
	// DictionaryKeys: key hashes no row holds any longer, removed from a bitmap mart's
	// key dictionary (serving/ddl.CompactIds).
	DictionaryKeys int
	// Skipped says why nothing could be purged (then the old rows stay until ClickHouse
	// deletes them).
	Skipped string
}

// Storage is what a mart's served table holds on the server's disk (system.parts).
type Storage struct {
	Parts int64 // active parts of <t> and <t>_windows: what their readers read
	Bytes int64 // their bytes on disk
	// InactiveParts are the parts of <t>, <t>_windows and of its other tables (<t>__prev,
	// batch tables, <t>__wnext) that no reader reads and that are still on disk: replaced,
	// dropped or merged away, kept until the server deletes them (old_parts_lifetime).
	InactiveParts int64
	// InactiveBytes are their bytes as ClickHouse counts them: a file a part shares
	// with an active one (a hard link) counts in both, so this bounds the disk they
	// hold from above.
	InactiveBytes int64
	// DictionaryKeys and DictionaryBytes are what a bitmap mart's key dictionary
	// (<t>__ids) holds in its active parts: its entries (the keys it numbers and its
	// generation) and their bytes on disk; zero for other marts.
	DictionaryKeys  int64
	DictionaryBytes int64
}

// Change is one difference between a live served table and the mart's definition.
type Change struct {
	Table  string
	Column string
	Want   string // expected type; empty: the column should not exist
	Have   string // live type; empty: the column is missing
}

func (c Change) String() string {
	switch {
	case c.Have == "":
		return fmt.Sprintf("%s.%s missing (want %s)", c.Table, c.Column, c.Want)
	case c.Want == "":
		return fmt.Sprintf("%s.%s %s not in the mart definition", c.Table, c.Column, c.Have)
	}
	return fmt.Sprintf("%s.%s is %s, want %s", c.Table, c.Column, c.Have, c.Want)
}

// Outcome is what Target.Ensure found and did.
type Outcome struct {
	Changes []Change // differences of the live tables from the mart's DDL
	// Rebuild: <t> differs from the DDL (a column added, dropped or retyped by hand, a
	// new measure, the Date grain of older versions). Its rows cannot be trusted (an
	// added column would be empty over them), so it must be rebuilt whole from Gold: a
	// push of every hot partition into a fresh table exchanged with it. The view was
	// not replaced (it may not compile over the old table); the target replaces it after.
	Rebuild bool
}
