// Package push moves a set of ClickHouse partitions of a mart from a Gold Iceberg table
// into ClickHouse in one batch, and publishes them to readers in one atomic step:
//
//  1. clear: drop leftovers of a crashed push and create the batch table <t>__push:
//     the next version of <t> (its DDL) when the push is published by exchange,
//     otherwise a table of the target's structure
//  2. stage: stream the Gold rows of every partition into it in columnar blocks (ch-go
//     over the native protocol, or Native format over HTTP), in parallel streams of
//     whole partitions. Gold is read grain by grain (its partitions), and for an
//     AggregatingMergeTree mart goldbridge builds every row's uniqExact and groupArray
//     states itself from the detail rows' lists (ClientStates), so the server only
//     stores rows, as in its own bulk load of them
//  3. states: only for marts whose states ClickHouse must build (`uniq`, or
//     Options.ServerStates): the detail rows were staged into <t>__push_detail
//     (ENGINE = Memory) and one INSERT ... SELECT ... GROUP BY GROUPING SETS per stream
//     builds every level's states into <t>__push
//  4. replace (publish): on a single server with an Atomic database, when the push
//     changes more than one partition (pushed or dropped) or rebuilds the table, the
//     next version of <t> is built and swapped in by EXCHANGE TABLES — the one step
//     readers see. It is built in <t>__prev (the version before the last exchange):
//     during step 2 the dropped partitions are dropped there and those whose parts
//     differ from <t>'s refreshed from <t> (prepareNext); then the pushed ones are
//     replaced from <t>__push, so the cost follows what changed; without a usable
//     <t>__prev, every other active partition of <t> is attached to <t>__push (ATTACH
//     PARTITION ... FROM: hard links, no copy) and the old <t> is kept as <t>__prev
//     (publishExchange). A single changed partition is replaced in place (REPLACE
//     PARTITION, or DROP PARTITION when Gold has no rows for it: a partition is never
//     replaced from an empty source). With a cluster (no exchange there) each partition
//     is replaced in place
//  5. record: one insert of the (mart, partition, snapshot, rows, checksum) rows into
//     _goldbridge_sync
//  6. cleanup: drop the batch tables and, after an exchange, bring <t>__prev up to the
//     new <t> in the partitions the push changed (settlePrev), so that it keeps no row
//     <t> does not hold
//
// Promise: on a single server every read of <t> (and of the view <t>_final over it)
// sees the table before or after a push as a whole: one Gold snapshot, never a mix of
// two. A failure or crash at any step leaves <t> old (before 4) or new (from 4 on); the
// whole push is safe to repeat and repeating it never changes totals, because step 4
// replaces instead of appending. If 4 succeeded but 5 did not, the next sync pushes the
// same content again. With clickhouse.cluster the promise is per partition: a reader
// sees each partition old or new, never a double, but may see some partitions of a
// push before others. One pusher per mart at a time (they share the batch tables).
package push

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	gosync "sync"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// Batch tables of a push (created per push, dropped after it).
const (
	PushSuffix       = "__push"        // the target's structure: the partitions being built
	PushDetailSuffix = "__push_detail" // ENGINE = Memory: the detail rows of an AggregatingMergeTree mart
)

// maxPartitionsPerStream keeps one insert under ClickHouse's default
// max_partitions_per_insert_block (100) when it goes into a partitioned table.
const maxPartitionsPerStream = 100

// maxStreamRows bounds the Gold rows of one stream; a push of more rows runs in waves
// (AggregatingMergeTree marts build the states of each wave, which bounds the memory of
// the Memory detail table and of the GROUP BY).
const maxStreamRows = 2_000_000

// maxBlockElems ends an insert block early when its list columns (the distinct keys and
// quantile values of an AggregatingMergeTree mart's detail rows) hold this many values:
// a day's detail rows carry tens of thousands of keys, so batch_rows rows would make one
// block of millions of strings per stream, built and encoded in buffers grown from
// scratch (most of the stage's CPU) and sent only when complete. Bounded blocks reuse
// their buffers and reach the server while the next one is read.
const maxBlockElems = 1 << 18

// statesSettings run the states INSERT ... SELECT so that every grouping set reaches
// the table as one block, inserted as it is. By default the aggregation of large
// distinct-count states goes two-level (256 blocks per grouping set) and the insert
// squashes those blocks into larger ones: squashing a column of aggregate states that
// it does not own copies every state (for uniqExact: every hash set, element by
// element), which cost more than building the states. So: no two-level aggregation,
// output blocks as large as a stream (maxStreamRows), no squashing. Each grouping set
// is then one part per partition (3 parts for a rollup of two dimensions), merged in
// the background.
var statesSettings = []string{
	"max_partitions_per_insert_block = 0", "optimize_on_insert = 0",
	"group_by_two_level_threshold = 0", "group_by_two_level_threshold_bytes = 0",
	fmt.Sprintf("max_block_size = %d", maxStreamRows),
	"min_insert_block_size_rows = 0", "min_insert_block_size_bytes = 0",
}

// statesSettingsOf are the states INSERT's settings for mart m: a bitmap mart's blocks
// are squashed (the server's default) into one part per partition, as goldbridge's own
// states insert makes: copying a bitmap costs little, and with a part per grouping set
// (3 a day) the bench's one-day questions cost ~50% more server CPU.
func statesSettingsOf(m *serving.Mart) []string {
	if !m.Bitmap() {
		return statesSettings
	}
	return slices.DeleteFunc(slices.Clone(statesSettings), func(s string) bool {
		return strings.HasPrefix(s, "min_insert_block_size_")
	})
}

// Steps of a push, in order, as passed to Options.Fault.
const (
	StepClear   = "clear"
	StepStage   = "stage"
	StepStates  = "states"
	StepReplace = "replace"
	StepMark    = "mark" // a bitmap mart's <t> names its key dictionary (ddl.MarkDictionary)
	StepRecord  = "record"
	StepCleanup = "cleanup"
)

// Steps lists the steps in order.
var Steps = []string{StepClear, StepStage, StepStates, StepReplace, StepMark, StepRecord, StepCleanup}

// Options tune a push.
type Options struct {
	BatchRows int // rows per insert block (default 100000)
	Streams   int // parallel insert streams (default 2)
	// Drop lists partitions of <t> to remove in the same publication (they left the
	// hot window or Gold). With an exchange they are simply not carried over; otherwise
	// the caller drops them after the push (Result.Exchanged is false).
	Drop []string
	// Rebuild: <t> is replaced whole by the pushed partitions (nothing carried over),
	// because its structure differs from the DDL. Needs an exchange (no cluster, Atomic
	// database); the push fails otherwise.
	Rebuild bool
	// Fault, if set, is called before each step for every partition of the batch; a
	// non-nil error aborts the push there (fault injection in tests).
	Fault func(partition, step string) error
	Now   func() time.Time
	// ServerStates builds an AggregatingMergeTree mart's states on the server from the
	// detail rows even where goldbridge builds them itself (ClientStates).
	ServerStates bool
}

// Push copies the partitions parts of the Gold table tbl into the mart's ClickHouse
// table (see the package doc for the steps and the promise). It does not retry; callers
// retry the whole push.
func Push(ctx context.Context, c *chconn.Client, m *serving.Mart, tbl *table.Table, parts []Partition, opt Options) (Result, error) {
	start := time.Now()
	if len(parts) == 0 {
		return Result{}, nil
	}
	if opt.BatchRows <= 0 {
		opt.BatchRows = 100_000
	}
	if opt.Streams <= 0 {
		opt.Streams = 2
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	parts = append([]Partition(nil), parts...)
	sort.Slice(parts, func(i, j int) bool { return parts[i].Start.Before(parts[j].Start) })
	what := fmt.Sprintf("push %s %s", m.Name, span(parts))
	steps := map[string]time.Duration{}
	mark := time.Now()
	fault := func(step string) error {
		now := time.Now()
		if prev := prevStep(step); prev != "" {
			steps[prev] += now.Sub(mark)
		}
		mark = now
		if opt.Fault == nil {
			return nil
		}
		for _, p := range parts {
			if err := opt.Fault(p.ID, step); err != nil {
				return fmt.Errorf("%s: %s: %w", what, step, err)
			}
		}
		return nil
	}
	conn := c.Conn()
	exec := func(step, q string) error {
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %s: %w", what, step, err)
		}
		return nil
	}
	batch := ddl.Name(m, m.Table+PushSuffix)
	detail := ddl.Name(m, m.Table+PushDetailSuffix)
	dropBatch := "DROP TABLE IF EXISTS " + batch + ", " + detail

	canExchange, err := CanExchange(ctx, c, m)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", what, err)
	}
	var gen string // the key dictionary's generation (a bitmap mart)
	if m.Bitmap() {
		if gen, err = ddl.Generation(ctx, conn, m); err != nil {
			return Result{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	if opt.Rebuild && !canExchange {
		return Result{}, fmt.Errorf("%s: the table must be rebuilt, which needs an Atomic database without a cluster; run `goldbridge sync --rebuild %s`", what, m.Name)
	}
	// One partition changes atomically in place; several, or a rebuild, go through the
	// next version of the table and one exchange.
	exchange := canExchange && (opt.Rebuild || len(parts)+len(opt.Drop) > 1)

	if err := fault(StepClear); err != nil {
		return Result{}, err
	}
	// DROP TABLE without SYNC returns at once (an Atomic database removes the data in
	// the background), unlike dropping or truncating partitions part by part.
	if err := exec(StepClear, dropBatch); err != nil {
		return Result{}, err
	}
	if opt.Rebuild {
		// The previous version has the old structure: not a base for the next one.
		if err := exec(StepClear, "DROP TABLE IF EXISTS "+ddl.Name(m, m.Table+ddl.PrevSuffix)); err != nil {
			return Result{}, err
		}
	}
	create := "CREATE TABLE " + batch + " AS " + ddl.Name(m, m.Table+ddl.StagingSuffix) // never replicated, no TTL
	if exchange {
		// The next version of <t>: its DDL (engine, TTL, settings), not a copy of the
		// live table, which may have drifted.
		create = ddl.TargetTable(m, m.Table+PushSuffix)
	}
	if err := exec(StepClear, create); err != nil {
		return Result{}, err
	}
	// The batch table is filled from Gold grain by grain (additive marts, and
	// marts whose states goldbridge builds), or else the detail rows
	// go into a Memory table and the server builds the states.
	grouped := (!m.Aggregating() || (ClientStates(m) && !opt.ServerStates)) && grainField(m, tbl) >= 0
	serverStates := m.Aggregating() && !grouped
	wire := batch
	if serverStates {
		if err := exec(StepClear, "CREATE TABLE "+detail+" AS "+ddl.Name(m, m.Table+ddl.DetailSuffix)+" ENGINE = Memory"); err != nil {
			return Result{}, err
		}
		wire = detail
	}

	if err := fault(StepStage); err != nil {
		return Result{}, err
	}
	// While the stage runs, <t>__prev is brought up to <t> but for the pushed partitions
	// (prepareNext); every return waits for it.
	next := func() (liveVersions, error) { return liveVersions{}, nil }
	if exchange && !opt.Rebuild {
		done := make(chan struct{})
		var live liveVersions
		var perr error
		go func() {
			defer close(done)
			live, perr = prepareNext(ctx, c, m, parts, opt.Drop)
		}()
		next = func() (liveVersions, error) { <-done; return live, perr }
		defer next()
	}
	res := Result{ByID: map[string]int64{}}
	streams := splitStreams(parts, opt.Streams)
	for w := 0; w < len(streams); w += opt.Streams {
		wave := streams[w:min(w+opt.Streams, len(streams))]
		var (
			mu   gosync.Mutex
			wg   gosync.WaitGroup
			errs []error
		)
		for _, st := range wave {
			wg.Go(func() {
				var n map[string]int64
				var err error
				if grouped {
					n, err = stageGroups(ctx, c, m, tbl, st, batch, opt.BatchRows)
				} else {
					n, err = stage(ctx, c, m, tbl, st, wire, opt.BatchRows)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				for id, k := range n {
					res.ByID[id] += k
					res.Rows += k
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return Result{}, fmt.Errorf("%s: stage: %w", what, errors.Join(errs...))
		}
		if !serverStates {
			continue
		}
		if w == 0 {
			if err := fault(StepStates); err != nil {
				return Result{}, err
			}
		}
		if m.Bitmap() {
			// The wave's new keys get their ids before any state is built from them.
			if err := exec(StepStates, ddl.AssignIds(m, detail)); err != nil {
				return Result{}, err
			}
		}
		// One GROUP BY per stream over its detail rows, the streams in parallel (a GROUP
		// BY of distinct-count states over a Memory table runs on one thread): whole
		// partitions, so one row per key.
		for _, st := range wave {
			wg.Go(func() {
				qs, err := ddl.StatesInsert(m, batch, detail, grainWhere(m, st), statesSettingsOf(m)...)
				for _, q := range qs {
					if err != nil {
						break
					}
					err = exec(StepStates, q)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return Result{}, errors.Join(errs...)
		}
		if w+opt.Streams < len(streams) {
			if err := exec(StepStates, "TRUNCATE TABLE "+detail); err != nil {
				return Result{}, err
			}
		}
	}
	if !serverStates {
		if err := fault(StepStates); err != nil {
			return Result{}, err
		}
	}

	if err := fault(StepReplace); err != nil {
		return Result{}, err
	}
	var before map[string]string // active partitions of <t> before an exchange: now <t>__prev's
	if exchange {
		live, err := next()
		if err == nil {
			err = publishExchange(ctx, c, m, parts, res.ByID, live, opt)
		}
		if err != nil {
			return Result{}, fmt.Errorf("%s: %s: %w", what, StepReplace, err)
		}
		res.Exchanged = true
		if !opt.Rebuild {
			before = live.target
		}
	} else if err := publishInPlace(ctx, c, m, parts, res.ByID); err != nil {
		return Result{}, fmt.Errorf("%s: %s: %w", what, StepReplace, err)
	}

	if err := fault(StepMark); err != nil {
		return Result{}, err
	}
	if m.Bitmap() {
		// <t>'s bitmaps now hold ids of this dictionary (ddl.staleBitmaps). A push that
		// ends before this leaves <t>'s comment naming another generation only when the
		// dictionary is new; the next sync then rebuilds <t>.
		if err := exec(StepMark, ddl.MarkDictionary(m, m.Table, gen)); err != nil {
			return Result{}, err
		}
	}

	if err := fault(StepRecord); err != nil {
		return Result{}, err
	}
	now := opt.Now()
	states := make([]State, len(parts))
	for i, p := range parts {
		states[i] = State{Partition: p.ID, SnapshotID: p.SnapshotID, Rows: uint64(res.ByID[p.ID]), Checksum: p.Checksum, PushedAt: now}
	}
	if err := RecordStates(ctx, c, m, states); err != nil {
		return Result{}, fmt.Errorf("%s: record: %w", what, err)
	}

	if err := fault(StepCleanup); err != nil {
		return Result{}, err
	}
	if err := exec(StepCleanup, dropBatch); err != nil {
		return Result{}, err
	}
	if before != nil {
		if err := settlePrev(ctx, c, m, parts, res.ByID, opt.Drop, before); err != nil {
			return Result{}, fmt.Errorf("%s: %s: %w", what, StepCleanup, err)
		}
	}
	steps[StepCleanup] = time.Since(mark)
	res.Elapsed = time.Since(start)
	res.Steps = steps
	return res, nil
}
