// Package push moves one ClickHouse partition of a mart from a Gold Iceberg table into
// ClickHouse, atomically:
//
//  1. clear the partition in <t>__staging (and <t>__detail): leftovers of a crashed push
//  2. stream the Gold rows of the partition (Arrow batches) into the staging table in
//     columnar blocks (ch-go over the native protocol, or Native format over HTTP)
//  3. AggregatingMergeTree marts: build the states server-side from the detail rows
//     (INSERT ... SELECT ... GROUP BY GROUPING SETS) into <t>__staging
//  4. ALTER TABLE <t> REPLACE PARTITION p FROM <t>__staging — the one step readers see
//  5. record (mart, partition, snapshot, rows, checksum) in _goldbridge_sync
//  6. drop the staging partitions
//
// Promise: readers of <t> see the partition old or new, never a mix or a double. A
// failure or crash at any step leaves <t> old (before 4) or new (from 4 on); the whole
// push is safe to repeat and repeating it never changes totals, because step 4 replaces
// instead of appending. If 4 succeeded but 5 did not, the next sync pushes the same
// content again. One pusher per mart at a time (they share the staging tables).
package push

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// Partition is one ClickHouse partition to push and the Gold state it is pushed from.
type Partition struct {
	ID         string    // ClickHouse partition id (20260501 or 202605)
	Start, End time.Time // grain range [Start, End)
	SnapshotID int64     // newest Gold snapshot that updated it
	Checksum   string    // fingerprint of the Gold partitions it covers
}

// Steps of a push, in order, as passed to Options.Fault.
const (
	StepClear   = "clear"
	StepStage   = "stage"
	StepStates  = "states"
	StepReplace = "replace"
	StepRecord  = "record"
	StepCleanup = "cleanup"
)

// Steps lists the steps in order.
var Steps = []string{StepClear, StepStage, StepStates, StepReplace, StepRecord, StepCleanup}

// Options tune a push.
type Options struct {
	BatchRows int // rows per insert block (default 100000)
	// Fault, if set, is called before each step; a non-nil error aborts the push there
	// (fault injection in tests).
	Fault func(step string) error
	Now   func() time.Time
}

// Result of one partition push.
type Result struct {
	Rows    int64 // Gold rows streamed
	Elapsed time.Duration
}

// Push copies partition p of the Gold table tbl into the mart's ClickHouse table (see
// the package doc for the steps and the promise). It does not retry; callers retry the
// whole push.
func Push(ctx context.Context, c *chconn.Client, m *serving.Mart, tbl *table.Table, p Partition, opt Options) (Result, error) {
	start := time.Now()
	if opt.BatchRows <= 0 {
		opt.BatchRows = 100_000
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	fault := func(step string) error {
		if opt.Fault != nil {
			if err := opt.Fault(step); err != nil {
				return fmt.Errorf("push %s %s: %s: %w", m.Name, p.ID, step, err)
			}
		}
		return nil
	}
	conn := c.Conn()
	exec := func(step, q string) error {
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("push %s %s: %s: %w", m.Name, p.ID, step, err)
		}
		return nil
	}
	staging := ddl.Name(m, m.Table+ddl.StagingSuffix)
	detail := ddl.Name(m, m.Table+ddl.DetailSuffix)
	pid := serving.QS(p.ID)
	dropStaging := func(step string) error {
		if err := exec(step, "ALTER TABLE "+staging+" DROP PARTITION ID "+pid); err != nil {
			return err
		}
		if m.Aggregating() {
			return exec(step, "ALTER TABLE "+detail+" DROP PARTITION ID "+pid)
		}
		return nil
	}

	if err := fault(StepClear); err != nil {
		return Result{}, err
	}
	if err := dropStaging(StepClear); err != nil {
		return Result{}, err
	}

	if err := fault(StepStage); err != nil {
		return Result{}, err
	}
	wire := staging
	if m.Aggregating() {
		wire = detail
	}
	rows, err := stage(ctx, c, m, tbl, p, wire, opt.BatchRows)
	if err != nil {
		return Result{}, fmt.Errorf("push %s %s: stage: %w", m.Name, p.ID, err)
	}

	if err := fault(StepStates); err != nil {
		return Result{}, err
	}
	if m.Aggregating() {
		if err := exec(StepStates, ddl.BuildStates(m, p.ID)); err != nil {
			return Result{}, err
		}
	}

	if err := fault(StepReplace); err != nil {
		return Result{}, err
	}
	// Atomic: the target partition becomes the staged one (or empty if Gold has none).
	if err := exec(StepReplace, "ALTER TABLE "+ddl.Name(m, m.Table)+" REPLACE PARTITION ID "+pid+" FROM "+staging); err != nil {
		return Result{}, err
	}

	if err := fault(StepRecord); err != nil {
		return Result{}, err
	}
	if err := RecordState(ctx, c, m, State{Partition: p.ID, SnapshotID: p.SnapshotID, Rows: uint64(rows), Checksum: p.Checksum, PushedAt: opt.Now()}); err != nil {
		return Result{}, fmt.Errorf("push %s %s: record: %w", m.Name, p.ID, err)
	}

	if err := fault(StepCleanup); err != nil {
		return Result{}, err
	}
	if err := dropStaging(StepCleanup); err != nil {
		return Result{}, err
	}
	return Result{Rows: rows, Elapsed: time.Since(start)}, nil
}

// GoldFilter selects the Gold rows of partition p that are streamed (all levels for a
// SummingMergeTree mart, the detail level for an AggregatingMergeTree mart).
func GoldFilter(m *serving.Mart, p Partition) iceberg.BooleanExpression {
	g := iceberg.Reference(m.Grain.As)
	var f iceberg.BooleanExpression
	if m.Grain.Unit == "hour" {
		f = iceberg.NewAnd(iceberg.GreaterThanEqual(g, iceberg.Timestamp(p.Start.UnixMicro())),
			iceberg.LessThan(g, iceberg.Timestamp(p.End.UnixMicro())))
	} else {
		f = iceberg.NewAnd(iceberg.GreaterThanEqual(g, iceberg.Date(p.Start.Unix()/86400)),
			iceberg.LessThan(g, iceberg.Date(p.End.Unix()/86400)))
	}
	if m.Aggregating() {
		f = iceberg.NewAnd(f, iceberg.EqualTo(iceberg.Reference("grouping_level"), "detail"))
	}
	return f
}

// stage streams the partition's Gold rows into table and returns the row count.
func stage(ctx context.Context, c *chconn.Client, m *serving.Mart, tbl *table.Table, p Partition, into string, batchRows int) (int64, error) {
	wcols := ddl.WireColumns(m)
	fields := make([]string, len(wcols))
	cols := make([]*column, len(wcols))
	input := make(proto.Input, len(wcols))
	for i, wc := range wcols {
		col, err := newColumn(wc)
		if err != nil {
			return 0, err
		}
		fields[i], cols[i] = wc.Name, col
		input[i] = proto.InputColumn{Name: wc.Name, Data: col.col}
	}
	_, recs, err := tbl.Scan(table.WithRowFilter(GoldFilter(m, p)), table.WithSelectedFields(fields...)).ToArrowRecords(ctx)
	if err != nil {
		return 0, fmt.Errorf("scan gold: %w", err)
	}
	next, stop := iter.Pull2(recs)
	defer stop()

	var (
		total int64
		cur   arrow.RecordBatch
		off   int
		idx   []int
	)
	release := func() {
		if cur != nil {
			cur.Release()
			cur = nil
		}
	}
	defer release()
	fill := func() (bool, error) {
		for _, col := range cols {
			col.col.Reset()
		}
		n := 0
		for n < batchRows {
			if cur == nil || off >= int(cur.NumRows()) {
				release()
				rec, err, ok := next()
				if !ok {
					break
				}
				if err != nil {
					return false, fmt.Errorf("scan gold: %w", err)
				}
				cur, off = rec, 0
				idx = idx[:0]
				for _, f := range fields {
					ix := rec.Schema().FieldIndices(f)
					if len(ix) == 0 {
						return false, fmt.Errorf("gold table has no column %s", f)
					}
					idx = append(idx, ix[0])
				}
				continue
			}
			to := min(int(cur.NumRows()), off+batchRows-n)
			for i, col := range cols {
				if err := col.append(cur.Column(idx[i]), off, to); err != nil {
					return false, err
				}
			}
			n += to - off
			off = to
		}
		total += int64(n)
		return n > 0, nil
	}
	if err := c.Insert(ctx, into, input, fill); err != nil {
		return 0, err
	}
	return total, nil
}

// State is one row of _goldbridge_sync.
type State struct {
	Partition  string
	SnapshotID int64
	Rows       uint64
	Checksum   string
	Deleted    bool
	PushedAt   time.Time
}

// RecordState writes a sync state row for mart m.
func RecordState(ctx context.Context, c *chconn.Client, m *serving.Mart, s State) error {
	del := uint8(0)
	if s.Deleted {
		del = 1
	}
	q := fmt.Sprintf("INSERT INTO %s.%s (mart, partition, gold_snapshot_id, rows, checksum, deleted, pushed_at) VALUES (%s, %s, %d, %d, %s, %d, fromUnixTimestamp64Micro(%d, 'UTC'))",
		serving.Q(m.Database), serving.Q(ddl.SyncTable), serving.QS(m.Name), serving.QS(s.Partition), s.SnapshotID, s.Rows,
		serving.QS(s.Checksum), del, s.PushedAt.UnixMicro())
	return c.Conn().Exec(ctx, q)
}

// States reads the current sync state of mart m by partition (deleted ones omitted).
func States(ctx context.Context, c *chconn.Client, m *serving.Mart) (map[string]State, error) {
	q := fmt.Sprintf("SELECT partition, gold_snapshot_id, rows, checksum, deleted, pushed_at FROM %s.%s FINAL WHERE mart = ?",
		serving.Q(m.Database), serving.Q(ddl.SyncTable))
	rows, err := c.Conn().Query(ctx, q, m.Name)
	if err != nil {
		return nil, fmt.Errorf("sync state %s: %w", m.Name, err)
	}
	defer rows.Close()
	out := map[string]State{}
	for rows.Next() {
		var s State
		var del uint8
		if err := rows.Scan(&s.Partition, &s.SnapshotID, &s.Rows, &s.Checksum, &del, &s.PushedAt); err != nil {
			return nil, err
		}
		if del == 0 {
			out[s.Partition] = s
		}
	}
	return out, rows.Err()
}

// ErrFault is a convenience error for fault injection.
var ErrFault = errors.New("injected fault")
