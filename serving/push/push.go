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
	"goldbridge/serving/hot"
	"iter"
	"slices"
	"sort"
	"strings"
	gosync "sync"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/mart"
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
		// One GROUP BY per stream over its detail rows, the streams in parallel (a GROUP
		// BY of distinct-count states over a Memory table runs on one thread): whole
		// partitions, so one row per key.
		for _, st := range wave {
			wg.Go(func() {
				qs, err := ddl.StatesInsert(m, batch, detail, grainWhere(m, st), statesSettings...)
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

// CanExchange reports whether the mart's table can be replaced by EXCHANGE TABLES:
// no ON CLUSTER topology (a sharded node is a single server), and an Atomic database.
func CanExchange(ctx context.Context, c *chconn.Client, m *serving.Mart) (bool, error) {
	if m.Cluster != "" && !m.Sharded {
		return false, nil
	}
	var engine string
	if err := c.Conn().QueryRow(ctx, "SELECT engine FROM system.databases WHERE name = ?", m.Database).Scan(&engine); err != nil {
		return false, fmt.Errorf("database engine: %w", err)
	}
	return engine == "Atomic", nil
}

// publishExchange publishes the push as the next version of <t>, swapped in by one
// EXCHANGE TABLES, the one step readers see; until then <t> is untouched. When
// <t>__prev, the version before the last exchange, has <t>'s structure, prepareNext
// has already made it equal to <t> but for the pushed partitions: they are replaced
// from the batch table (or dropped when Gold has none of their rows) and <t>__prev is
// swapped in, so the cost follows what changed, not the hot window. Otherwise (the
// first push, a rebuild, a push of every partition, a <t>__prev of another structure)
// the batch table, which holds
// the pushed partitions, becomes the next version: every other partition of <t> not
// dropped is attached to it (hard links, no data copied), and after the exchange the
// old <t> is kept as <t>__prev.
func publishExchange(ctx context.Context, c *chconn.Client, m *serving.Mart, parts []Partition, byID map[string]int64, live liveVersions, opt Options) error {
	target := ddl.Name(m, m.Table)
	batch := ddl.Name(m, m.Table+PushSuffix)
	prev := ddl.Name(m, m.Table+ddl.PrevSuffix)
	exchange := func(next string) error { return c.Conn().Exec(ctx, "EXCHANGE TABLES "+target+" AND "+next) }
	if opt.Rebuild {
		return exchange(batch)
	}
	// A push of every partition <t> holds has nothing to carry over: the batch table is
	// the next version as it is (one EXCHANGE instead of a REPLACE PARTITION per
	// partition into <t>__prev, which cost ~3 ms each: a forced push of 120 days).
	if live.prevUsable() && !replacesAll(live.target, parts, opt.Drop) {
		var cmds []string
		for _, p := range parts {
			if byID[p.ID] > 0 {
				cmds = append(cmds, "REPLACE PARTITION ID "+serving.QS(p.ID)+" FROM "+batch)
			} else if _, ok := live.prev[p.ID]; ok {
				cmds = append(cmds, "DROP PARTITION ID "+serving.QS(p.ID))
			}
		}
		if err := alterChunks(ctx, c, prev, cmds); err != nil {
			return fmt.Errorf("build the next version in %s: %w", m.Table+ddl.PrevSuffix, err)
		}
		return exchange(prev)
	}
	skip := make(map[string]bool, len(parts)+len(opt.Drop))
	for _, p := range parts {
		skip[p.ID] = true
	}
	for _, id := range opt.Drop {
		skip[id] = true
	}
	if err := carryOver(ctx, c, m, sortedKeys(live.target), skip); err != nil {
		return err
	}
	if live.hasPrev {
		if err := c.Conn().Exec(ctx, "DROP TABLE "+prev); err != nil {
			return err
		}
	}
	if err := exchange(batch); err != nil {
		return err
	}
	return c.Conn().Exec(ctx, "RENAME TABLE "+batch+" TO "+prev)
}

// settlePrev brings <t>__prev, the version an exchange has just swapped out, up to the
// new <t> in the partitions the push changed (before lists <t>__prev's partitions): the
// pushed ones are replaced from <t> (hard links) and those gone from <t> are dropped.
// <t>__prev then holds no row <t> does not, and shares every file with it; its
// replaced parts are outdated, which a server with prompt cleanup deletes within a
// second (docs/serving.md, "Disk"). The next push's prepareNext finds nothing left to
// refresh but the partitions merged since, so the work is moved, not added.
func settlePrev(ctx context.Context, c *chconn.Client, m *serving.Mart, parts []Partition, byID map[string]int64, drop []string, before map[string]string) error {
	var cmds []string
	for _, p := range parts {
		if byID[p.ID] > 0 {
			cmds = append(cmds, "REPLACE PARTITION ID "+serving.QS(p.ID)+" FROM "+ddl.Name(m, m.Table))
		} else if _, ok := before[p.ID]; ok {
			cmds = append(cmds, "DROP PARTITION ID "+serving.QS(p.ID))
		}
	}
	for _, id := range drop {
		if _, ok := before[id]; ok {
			cmds = append(cmds, "DROP PARTITION ID "+serving.QS(id))
		}
	}
	if err := alterChunks(ctx, c, ddl.Name(m, m.Table+ddl.PrevSuffix), cmds); err != nil {
		return fmt.Errorf("bring %s up to %s: %w", m.Table+ddl.PrevSuffix, m.Table, err)
	}
	return nil
}

// replacesAll reports whether every partition of <t> (target) is pushed or dropped.
func replacesAll(target map[string]string, parts []Partition, drop []string) bool {
	gone := make(map[string]bool, len(parts)+len(drop))
	for _, p := range parts {
		gone[p.ID] = true
	}
	for _, id := range drop {
		gone[id] = true
	}
	for id := range target {
		if !gone[id] {
			return false
		}
	}
	return true
}

// prepareNext reads the live versions of <t> (partHashes) and, when <t>__prev has <t>'s
// structure, makes <t>__prev equal to <t> except for the pushed partitions parts: the
// partitions to drop and those <t> lacks are dropped, and those whose parts differ
// from <t>'s (compared by the hashes of their files: a cloned part has its source's)
// are replaced from <t>. <t>__prev is never read, so this may run beside the stage.
func prepareNext(ctx context.Context, c *chconn.Client, m *serving.Mart, parts []Partition, drop []string) (liveVersions, error) {
	live, err := partHashes(ctx, c, m)
	if err != nil || !live.prevUsable() {
		return live, err
	}
	pushed := make(map[string]bool, len(parts))
	for _, p := range parts {
		pushed[p.ID] = true
	}
	var cmds []string
	for _, id := range sortedKeys(live.prev) {
		if _, ok := live.target[id]; (!ok || slices.Contains(drop, id)) && !pushed[id] {
			cmds = append(cmds, "DROP PARTITION ID "+serving.QS(id))
		}
	}
	for _, id := range sortedKeys(live.target) {
		if !pushed[id] && !slices.Contains(drop, id) && live.prev[id] != live.target[id] {
			cmds = append(cmds, "REPLACE PARTITION ID "+serving.QS(id)+" FROM "+ddl.Name(m, m.Table))
		}
	}
	if err := alterChunks(ctx, c, ddl.Name(m, m.Table+ddl.PrevSuffix), cmds); err != nil {
		return live, fmt.Errorf("bring %s up to %s: %w", m.Table+ddl.PrevSuffix, m.Table, err)
	}
	return live, nil
}

// alterChunks runs the ALTER TABLE commands cmds on table, up to 100 per statement.
func alterChunks(ctx context.Context, c *chconn.Client, table string, cmds []string) error {
	for i := 0; i < len(cmds); i += maxPartitionsPerStream {
		if err := c.Conn().Exec(ctx, "ALTER TABLE "+table+" "+strings.Join(cmds[i:min(i+maxPartitionsPerStream, len(cmds))], ", ")); err != nil {
			return err
		}
	}
	return nil
}

// carryOver attaches the partitions ids of <t> not in skip to the batch table (hard
// links, no data copied).
func carryOver(ctx context.Context, c *chconn.Client, m *serving.Mart, ids []string, skip map[string]bool) error {
	target := ddl.Name(m, m.Table)
	var carry []string
	for _, id := range ids {
		if !skip[id] {
			carry = append(carry, id)
		}
	}
	for i := 0; i < len(carry); i += maxPartitionsPerStream {
		var cmds []string
		for _, id := range carry[i:min(i+maxPartitionsPerStream, len(carry))] {
			cmds = append(cmds, "ATTACH PARTITION ID "+serving.QS(id)+" FROM "+target)
		}
		if err := c.Conn().Exec(ctx, "ALTER TABLE "+ddl.Name(m, m.Table+PushSuffix)+" "+strings.Join(cmds, ", ")); err != nil {
			return fmt.Errorf("carry over %d partitions: %w", len(carry), err)
		}
	}
	return nil
}

// liveVersions are the active partitions of <t> and <t>__prev, each with the sorted
// hashes of its parts' files, and the two tables' structures.
type liveVersions struct {
	target, prev           map[string]string
	hasPrev                bool
	targetShape, prevShape string // create_table_query after the table's name
}

// prevUsable reports whether <t>__prev exists with <t>'s structure.
func (v liveVersions) prevUsable() bool {
	return v.hasPrev && v.targetShape != "" && v.prevShape == v.targetShape
}

// partHashes reads the active partitions and structures of <t> and <t>__prev in one
// query.
func partHashes(ctx context.Context, c *chconn.Client, m *serving.Mart) (liveVersions, error) {
	prevName := m.Table + ddl.PrevSuffix
	rows, err := c.Conn().Query(ctx, `SELECT table, partition_id, arrayStringConcat(arraySort(groupArray(hash_of_all_files)), ',') FROM system.parts
		WHERE database = ? AND table IN (?, ?) AND active GROUP BY table, partition_id
		UNION ALL SELECT name, '', substring(create_table_query, position(create_table_query, '(')) FROM system.tables WHERE database = ? AND name IN (?, ?)`,
		m.Database, m.Table, prevName, m.Database, m.Table, prevName)
	if err != nil {
		return liveVersions{}, fmt.Errorf("partitions of %s: %w", m.Table, err)
	}
	defer rows.Close()
	v := liveVersions{target: map[string]string{}, prev: map[string]string{}}
	for rows.Next() {
		var table, id, h string
		if err := rows.Scan(&table, &id, &h); err != nil {
			return liveVersions{}, err
		}
		isPrev := table == prevName
		switch {
		case id == "" && isPrev:
			v.hasPrev, v.prevShape = true, h
		case id == "":
			v.targetShape = h
		case isPrev:
			v.prev[id] = h
		default:
			v.target[id] = h
		}
	}
	return v, rows.Err()
}

// sortedKeys returns the keys of a set, sorted.
func sortedKeys[V any](set map[string]V) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// publishInPlace replaces each pushed partition of <t> from the batch table (atomic
// per partition), or drops it where Gold has no rows for it: ClickHouse refuses to
// replace a partition from an empty source, and an empty partition is a dropped one.
func publishInPlace(ctx context.Context, c *chconn.Client, m *serving.Mart, parts []Partition, byID map[string]int64) error {
	batch := ddl.Name(m, m.Table+PushSuffix)
	for i := 0; i < len(parts); i += maxPartitionsPerStream {
		var cmds []string
		for _, p := range parts[i:min(i+maxPartitionsPerStream, len(parts))] {
			if byID[p.ID] > 0 {
				cmds = append(cmds, "REPLACE PARTITION ID "+serving.QS(p.ID)+" FROM "+batch)
			} else {
				cmds = append(cmds, "DROP PARTITION ID "+serving.QS(p.ID))
			}
		}
		if err := c.Conn().Exec(ctx, "ALTER TABLE "+ddl.Name(m, m.Table)+" "+strings.Join(cmds, ", ")); err != nil {
			return err
		}
	}
	return nil
}

// ActivePartitions returns the ids of the active partitions of db.table, sorted.
func ActivePartitions(ctx context.Context, c *chconn.Client, db, table string) ([]string, error) {
	rows, err := c.Conn().Query(ctx, "SELECT DISTINCT partition_id FROM system.parts WHERE database = ? AND table = ? AND active ORDER BY partition_id", db, table)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s.%s: %w", db, table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// prevStep is the step before step ("" for the first).
func prevStep(step string) string {
	for i, s := range Steps {
		if s == step && i > 0 {
			return Steps[i-1]
		}
	}
	return ""
}

// Cleanup drops the batch tables a push that failed after its swap may have left (a
// sync that has nothing to push calls it; a push drops them itself).
func Cleanup(ctx context.Context, c *chconn.Client, m *serving.Mart) error {
	q := "DROP TABLE IF EXISTS " + ddl.Name(m, m.Table+PushSuffix) + ", " + ddl.Name(m, m.Table+PushDetailSuffix)
	if err := c.Conn().Exec(ctx, q); err != nil {
		return fmt.Errorf("push %s: cleanup: %w", m.Name, err)
	}
	return nil
}

// span names a sorted batch of partitions for errors: "20260501" or "20260501..20260630 (61)".
func span(parts []Partition) string {
	if len(parts) == 1 {
		return parts[0].ID
	}
	return fmt.Sprintf("%s..%s (%d)", parts[0].ID, parts[len(parts)-1].ID, len(parts))
}

// splitStreams cuts the sorted partitions into contiguous runs of whole partitions, one
// insert stream each: at least n runs (when there are n partitions) balanced by rows,
// each of at most maxPartitionsPerStream partitions and (unless one partition is larger)
// maxStreamRows rows.
func splitStreams(parts []Partition, n int) [][]Partition {
	var total int64
	for _, p := range parts {
		total += max(p.Rows, 1)
	}
	k := max(min(n, len(parts)), (len(parts)+maxPartitionsPerStream-1)/maxPartitionsPerStream,
		int((total+maxStreamRows-1)/maxStreamRows))
	target := (total + int64(k) - 1) / int64(k)
	var out [][]Partition
	var cur []Partition
	var acc int64
	for i, p := range parts {
		r := max(p.Rows, 1)
		// Close the run before p when p would overfill it, or when the partitions left
		// are just enough to give every remaining run one.
		left := len(parts) - i
		if len(cur) > 0 && (len(cur) >= maxPartitionsPerStream || acc+r > target || acc+r > maxStreamRows ||
			left <= k-len(out)-1) {
			out = append(out, cur)
			cur, acc = nil, 0
		}
		cur = append(cur, p)
		acc += r
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// goldFilter selects the Gold rows of the sorted partitions parts that the server-side
// path streams: grainFilter, and for a mart with a non-additive measure the rows of the carrier
// levels (mart.Level.Carries), which hold the lists every level is merged from.
func goldFilter(m *serving.Mart, parts []Partition) (iceberg.BooleanExpression, error) {
	f := grainFilter(m, parts)
	if m.Aggregating() {
		levels, err := m.Levels()
		if err != nil {
			return nil, fmt.Errorf("mart %s: %w", m.Name, err)
		}
		f = iceberg.NewAnd(f, iceberg.IsIn(iceberg.Reference(mart.ColGroupingLevel), mart.Carriers(levels)...))
	}
	return f, nil
}

// grainFilter selects the Gold rows of the sorted partitions parts: their grain ranges,
// adjacent ones merged, OR-ed.
func grainFilter(m *serving.Mart, parts []Partition) iceberg.BooleanExpression {
	g := iceberg.Reference(m.Grain.As)
	rng := func(s, e time.Time) iceberg.BooleanExpression {
		if m.Grain.Unit == "hour" {
			return iceberg.NewAnd(iceberg.GreaterThanEqual(g, iceberg.Timestamp(s.UnixMicro())),
				iceberg.LessThan(g, iceberg.Timestamp(e.UnixMicro())))
		}
		return iceberg.NewAnd(iceberg.GreaterThanEqual(g, iceberg.Date(s.Unix()/86400)),
			iceberg.LessThan(g, iceberg.Date(e.Unix()/86400)))
	}
	var f iceberg.BooleanExpression
	s, e := parts[0].Start, parts[0].End
	for _, p := range parts[1:] {
		if p.Start.Equal(e) {
			e = p.End
			continue
		}
		f = or(f, rng(s, e))
		s, e = p.Start, p.End
	}
	return or(f, rng(s, e))
}

// grainWhere is the SQL condition selecting the grain ranges of the sorted partitions
// parts, adjacent ones merged.
func grainWhere(m *serving.Mart, parts []Partition) string {
	g := serving.Q(m.Grain.As)
	var conds []string
	add := func(s, e time.Time) {
		conds = append(conds, fmt.Sprintf("(%s >= fromUnixTimestamp64Micro(%d, 'UTC') AND %s < fromUnixTimestamp64Micro(%d, 'UTC'))",
			g, s.UnixMicro(), g, e.UnixMicro()))
	}
	s, e := parts[0].Start, parts[0].End
	for _, p := range parts[1:] {
		if p.Start.Equal(e) {
			e = p.End
			continue
		}
		add(s, e)
		s, e = p.Start, p.End
	}
	add(s, e)
	return strings.Join(conds, " OR ")
}

func or(a, b iceberg.BooleanExpression) iceberg.BooleanExpression {
	if a == nil {
		return b
	}
	return iceberg.NewOr(a, b)
}

// stage streams the Gold rows of the sorted partitions parts into table (one INSERT) and
// returns the row count per partition.
func stage(ctx context.Context, c *chconn.Client, m *serving.Mart, tbl *table.Table, parts []Partition, into string, batchRows int) (map[string]int64, error) {
	wcols := ddl.WireColumns(m)
	fields := make([]string, len(wcols))
	cols := make([]*column, len(wcols))
	input := make(proto.Input, len(wcols))
	grain := -1
	for i, wc := range wcols {
		col, err := newColumn(wc)
		if err != nil {
			return nil, err
		}
		fields[i], cols[i] = wc.Name, col
		input[i] = proto.InputColumn{Name: wc.Name, Data: col.col}
		if wc.Name == m.Grain.As {
			grain = i
		}
	}
	if grain < 0 {
		return nil, fmt.Errorf("wire columns have no grain %s", m.Grain.As)
	}
	var lists []int // the list columns: a block also ends at maxBlockElems list values
	for i, wc := range wcols {
		if strings.HasPrefix(wc.Type, "Array(") {
			lists = append(lists, i)
		}
	}
	filter, err := goldFilter(m, parts)
	if err != nil {
		return nil, err
	}
	_, recs, err := tbl.Scan(table.WithRowFilter(filter), table.WithSelectedFields(fields...)).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan gold: %w", err)
	}
	next, stop := iter.Pull2(recs)
	defer stop()

	counts := make([]int64, len(parts))
	starts, ends := make([]int64, len(parts)), make([]int64, len(parts))
	for i, p := range parts {
		starts[i], ends[i] = p.Start.UnixMicro(), p.End.UnixMicro()
	}
	var (
		cur arrow.RecordBatch
		off int
		idx []int
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
		n, elems := 0, 0
		for n < batchRows && elems < maxBlockElems {
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
			for _, li := range lists {
				to = listRows(cur.Column(idx[li]), off, to, maxBlockElems-elems)
			}
			for _, li := range lists {
				elems += listLen(cur.Column(idx[li]), off, to)
			}
			for i, col := range cols {
				if err := col.append(cur.Column(idx[i]), off, to); err != nil {
					return false, err
				}
			}
			if err := countIn(cur.Column(idx[grain]), off, to, starts, ends, counts); err != nil {
				return false, err
			}
			n += to - off
			off = to
		}
		return n > 0, nil
	}
	if err := c.Insert(ctx, into, input, fill); err != nil {
		return nil, err
	}
	return byID(parts, counts), nil
}

// listRows returns the end e in (from, to] of the list rows [from, e) of a (a list
// array) holding at most budget values, but at least one row.
func listRows(a arrow.Array, from, to, budget int) int {
	if listLen(a, from, to) <= budget {
		return to
	}
	// The largest e with listLen(from, e) <= budget; one row even if it holds more.
	e := from + sort.Search(to-from, func(k int) bool { return listLen(a, from, from+k+1) > budget })
	return max(e, from+1)
}

// listLen is the number of values in the list rows [from, to) of a (0 if a is not a list).
func listLen(a arrow.Array, from, to int) int {
	if to <= from {
		return 0
	}
	switch l := a.(type) {
	case *array.List:
		s, _ := l.ValueOffsets(from)
		_, e := l.ValueOffsets(to - 1)
		return int(e - s)
	case *array.LargeList:
		s, _ := l.ValueOffsets(from)
		_, e := l.ValueOffsets(to - 1)
		return int(e - s)
	}
	return 0
}

// byID maps the row counts of the sorted partitions parts to their ids.
func byID(parts []Partition, counts []int64) map[string]int64 {
	out := make(map[string]int64, len(parts))
	for i, p := range parts {
		out[p.ID] = counts[i]
	}
	return out
}

// countIn adds the rows [from, to) of the grain column a to the partition they fall in:
// counts[i] for the range [starts[i], ends[i]) holding the grain (in microseconds). A
// grain outside every range is an error: it would be pushed into a partition that is
// not replaced.
func countIn(a arrow.Array, from, to int, starts, ends, counts []int64) error {
	at := func(i int) (int64, error) {
		switch v := a.(type) {
		case *array.Date32:
			return int64(v.Value(i)) * 86_400_000_000, nil
		case *array.Timestamp:
			t := int64(v.Value(i))
			switch v.DataType().(*arrow.TimestampType).Unit {
			case arrow.Second:
				return t * 1e6, nil
			case arrow.Millisecond:
				return t * 1e3, nil
			case arrow.Nanosecond:
				return t / 1e3, nil
			}
			return t, nil
		}
		return 0, fmt.Errorf("grain column: unexpected Arrow type %s", a.DataType())
	}
	for i := from; i < to; i++ {
		if a.IsNull(i) {
			return fmt.Errorf("gold row with a NULL grain")
		}
		t, err := at(i)
		if err != nil {
			return err
		}
		k := sort.Search(len(ends), func(k int) bool { return ends[k] > t })
		if k == len(ends) || t < starts[k] {
			return fmt.Errorf("gold row with grain %s outside the pushed partitions", time.UnixMicro(t).UTC().Format(time.RFC3339))
		}
		counts[k]++
	}
	return nil
}

// Partition, Result and State are the hot tier's terms (serving/hot).
type (
	Partition = hot.Partition
	Result    = hot.Result
	State     = hot.State
)

// RecordState writes a sync state row for mart m.
func RecordState(ctx context.Context, c *chconn.Client, m *serving.Mart, s State) error {
	return RecordStates(ctx, c, m, []State{s})
}

// RecordStates writes sync state rows for mart m in one insert.
func RecordStates(ctx context.Context, c *chconn.Client, m *serving.Mart, states []State) error {
	if len(states) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s.%s (mart, partition, gold_snapshot_id, rows, checksum, deleted, pushed_at) VALUES",
		serving.Q(m.Database), serving.Q(ddl.SyncTable))
	for i, s := range states {
		del := 0
		if s.Deleted {
			del = 1
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " (%s, %s, %d, %d, %s, %d, fromUnixTimestamp64Micro(%d, 'UTC'))",
			serving.QS(m.Name), serving.QS(s.Partition), s.SnapshotID, s.Rows, serving.QS(s.Checksum), del, s.PushedAt.UnixMicro())
	}
	return c.Conn().Exec(ctx, b.String())
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
