// Package sync keeps the hot window of each Gold mart in the hot tier equal to Gold: it
// decides what changed (Gold's per-partition last-updated snapshot against the push
// state the target records), pushes those partitions, drops partitions that left the
// window, and reconciles (Check) the two tiers. It reaches the hot tier only through a
// Target, the contract of package serving/hot; ClickHouse (clickhouse.go: serving/ddl,
// serving/push and the _goldbridge_sync table) and Sharded implement it, and
// serving/hot/hotfake is the in-memory one the planner tests run against without a
// server. contract_test.go is the suite every implementation passes.
//
// Promise: when Sync returns nil, every hot partition of the mart in the target holds the
// Gold content of the snapshot Sync planned from, and no partition outside the window
// remains; hot Gold partitions holding a grain, dimension or min/max value that
// ClickHouse's date and time types cannot hold (serving.MinTime..MaxTime) are reported, not
// pushed. On a single server readers of <t> and <t>_final see one Gold snapshot at a
// time: a push is published by one EXCHANGE TABLES (serving/push); with a cluster, each
// partition is old or new. When it returns an error (or the process dies), the table
// holds its old or its new content, never a mix and never a double count; running Sync
// again converges. A served table that differs from the mart's DDL is rebuilt from
// Gold, never patched. Pushing a partition twice never changes totals. A mart whose circuit is
// open (Gold table property goldbridge.circuit=open) is not touched.
//
// Run one Sync per mart at a time: pushes of one mart share its staging tables.
package sync

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/cespare/xxhash/v2"

	"goldbridge/lakehouse/gold"
	"goldbridge/serving"
	"goldbridge/serving/hot"
)

// Options tune a sync.
type Options struct {
	Now         func() time.Time // clock (tests); default time.Now
	Parallelism int              // parallel insert streams of a push (default 2)
	BatchRows   int              // rows per insert block (default 100000)
	Force       bool             // push every hot partition
	Only        []string         // push these partition ids too (repair)
	Rebuild     bool             // drop and recreate the served tables first
	Log         *slog.Logger
	// Purge: after the push, delete from the target's disk every copy of rows no
	// longer in the table (outdated parts, dropped tables: hot.Batch.Purge). A forget sets it.
	Purge bool
}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Parallelism <= 0 {
		o.Parallelism = 2
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Planned is one partition to push and why.
type Planned struct {
	hot.Partition
	Reason string // new | changed | missing | forced | repair
}

// Plan says what a sync does.
type Plan struct {
	Hot  []hot.Partition // every hot partition Gold has, oldest first
	Push []Planned
	Drop []string // ClickHouse partitions to drop (out of the window, or gone from Gold)
	// Unservable: hot Gold partitions that ClickHouse cannot hold exactly: their grain
	// range, or a date or timestamp dimension or min/max measure value, lies outside
	// serving.MinTime..MaxTime (GoldPartitions). Never pushed (a live copy is dropped),
	// reported with their Gold row counts and the reason.
	Unservable []hot.Partition
	Gold       int       // Gold partitions, hot or not
	Newest     time.Time // start of the newest Gold partition (zero: none)
	Cutoff     time.Time // first grain instant of the hot window
}

// cold reports a plan with Gold partitions, none of them hot or unservable, under a
// clock-anchored window (see ColdError).
func (p Plan) cold(m *serving.Mart) error {
	if p.Gold == 0 || len(p.Hot) > 0 || len(p.Unservable) > 0 || m.HotAnchor == serving.AnchorData {
		return nil
	}
	return &ColdError{Mart: m.Name, Partitions: p.Gold, Newest: p.Newest, Cutoff: p.Cutoff}
}

// Result of a sync.
type Result struct {
	Skipped string // why nothing was done (circuit open, serving disabled)
	// Rebuilt lists the differences of the live <t> from the DDL that made this sync
	// rebuild it whole from Gold (columns dropped, added or retyped, the old Date grain).
	Rebuilt    []hot.Change
	Unservable []hot.Partition // Gold partitions not served (Plan.Unservable)
	Pushed     []Planned
	Rows       int64
	Dropped    []string
	Unchanged  int
	Purged     hot.Purged // Options.Purge
	Elapsed    time.Duration
	Cutoff     time.Time // the hot-window cutoff planned with (Records.Write)
	// Recorded: nothing was planned or pushed because the push record says ClickHouse
	// already holds this Gold table state (Records.Unchanged).
	Recorded bool
	Windows  string // how the rolling windows were brought up to date (hot.Published.Windows)
}

// Cutoff is the first grain instant inside the hot window: the anchor's day minus the
// window. With serving.AnchorClock the anchor is today (UTC, from the clock), which agrees
// with the TTL backstop; with serving.AnchorData it is the start of the newest servable
// partition of gold (GoldPartitions, oldest first), so a backfill is served whatever the
// date; with no such partition the clock is used.
func Cutoff(m *serving.Mart, now time.Time, gold []hot.Partition) time.Time {
	d := now.UTC().Truncate(24 * time.Hour)
	if m.HotAnchor == serving.AnchorData {
		for i := len(gold) - 1; i >= 0; i-- {
			if gold[i].Unservable == "" {
				d = gold[i].Start.UTC().Truncate(24 * time.Hour)
				break
			}
		}
	}
	return d.Add(-m.HotWindow)
}

// ColdError is returned by Sync when the mart's hot window counts back from the clock
// and Gold has partitions, but none inside the window: nothing is served (a backfill of
// old data, or a window too short). The sync itself was done (older partitions dropped).
type ColdError struct {
	Mart       string
	Partitions int       // Gold partitions, all older than the window
	Newest     time.Time // start of the newest one
	Cutoff     time.Time // first instant of the window
}

func (e *ColdError) Error() string {
	return fmt.Sprintf("sync %s: nothing served: none of Gold's %d partitions (newest %s) is in the hot window, which starts %s (counted back from today)",
		e.Mart, e.Partitions, e.Newest.Format(time.DateOnly), e.Cutoff.Format(time.DateOnly))
}

// GoldPartitions groups the Gold table's partitions into ClickHouse partitions:
// snapshot = the snapshot that added the newest data file (by sequence number),
// checksum = hash of (grain, snapshot, record count) of the Gold partitions inside. It
// reads the manifest entries of the current snapshot, which keep the id of the
// snapshot that added each file after that snapshot is expired (a forget expires
// every older snapshot: Inspect().Partitions would then report no snapshot, and every
// partition would look changed).
func GoldPartitions(ctx context.Context, m *serving.Mart, tbl *table.Table) ([]hot.Partition, error) {
	type gp struct {
		t      time.Time
		snap   int64
		seq    int64
		n      int64
		lo, hi []time.Time // per ranged column: the smallest and largest value (zero: none)
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, nil
	}
	fieldID := -1
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		if f.Name == m.Grain.As {
			fieldID = f.FieldID
		}
	}
	if fieldID < 0 {
		return nil, fmt.Errorf("gold %s: not partitioned by %s", m.Name, m.Grain.As)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("gold partitions %s: %w", m.Name, err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("gold partitions %s: %w", m.Name, err)
	}
	ranged := rangedColumns(m, tbl.Schema())
	grains := map[time.Time]*gp{}
	for _, mf := range manifests {
		for e, err := range mf.Entries(fs, true) {
			if err != nil {
				return nil, fmt.Errorf("gold partitions %s: %w", m.Name, err)
			}
			df := e.DataFile()
			if df.ContentType() != iceberg.EntryContentData {
				continue
			}
			var t time.Time
			switch v := df.Partition()[fieldID].(type) {
			case iceberg.Date:
				t = time.Unix(int64(v)*86400, 0).UTC()
			case int32:
				t = time.Unix(int64(v)*86400, 0).UTC()
			case iceberg.Timestamp:
				t = time.UnixMicro(int64(v)).UTC()
			case int64:
				t = time.UnixMicro(v).UTC()
			case nil:
				continue
			default:
				return nil, fmt.Errorf("gold %s: partition type %T", m.Name, v)
			}
			g := grains[t]
			if g == nil {
				g = &gp{t: t, seq: -1, lo: make([]time.Time, len(ranged)), hi: make([]time.Time, len(ranged))}
				grains[t] = g
			}
			g.n += df.Count()
			for i, rc := range ranged {
				if lo, ok := rc.bound(df.LowerBoundValues()); ok && (g.lo[i].IsZero() || lo.Before(g.lo[i])) {
					g.lo[i] = lo
				}
				if hi, ok := rc.bound(df.UpperBoundValues()); ok && (g.hi[i].IsZero() || hi.After(g.hi[i])) {
					g.hi[i] = hi
				}
			}
			if e.SequenceNum() > g.seq {
				g.seq, g.snap = e.SequenceNum(), e.SnapshotID()
			}
		}
	}
	by := map[string][]gp{}
	for _, g := range grains {
		if g.n == 0 {
			continue
		}
		id := m.PartitionID(g.t)
		by[id] = append(by[id], *g)
	}
	var out []hot.Partition
	for id, gps := range by {
		sort.Slice(gps, func(i, j int) bool { return gps[i].t.Before(gps[j].t) })
		h := xxhash.New()
		var snap, n int64
		var why []string
		for _, g := range gps {
			fmt.Fprintf(h, "%d:%d:%d;", g.t.UnixMicro(), g.snap, g.n)
			snap = max(snap, g.snap)
			n += g.n
			for i, rc := range ranged {
				for k, v := range []time.Time{g.lo[i], g.hi[i]} {
					if !v.IsZero() && !serving.Holds(v) && len(why) < 4 && (k == 0 || !v.Equal(g.lo[i])) {
						why = append(why, rc.name+" "+rc.format(v))
					}
				}
			}
		}
		s, e := m.PartitionRange(gps[0].t)
		p := hot.Partition{ID: id, Start: s, End: e, SnapshotID: snap, Checksum: strconv.FormatUint(h.Sum64(), 16), Rows: n}
		switch {
		case !serving.Servable(s, e):
			p.Unservable = "grain outside " + serving.TimeRange()
		case len(why) > 0:
			p.Unservable = strings.Join(why, ", ") + " outside " + serving.TimeRange()
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

// MakePlan decides what to push and drop.
func MakePlan(ctx context.Context, t Target, m *serving.Mart, tbl *table.Table, opt Options) (Plan, error) {
	opt.defaults()
	gold, err := GoldPartitions(ctx, m, tbl)
	if err != nil {
		return Plan{}, err
	}
	served, err := t.Partitions(ctx, m)
	if err != nil {
		return Plan{}, err
	}
	states, live := served.States, served.Live
	cutoff := Cutoff(m, opt.Now(), gold)
	p := Plan{Gold: len(gold), Cutoff: cutoff}
	if len(gold) > 0 {
		p.Newest = gold[len(gold)-1].Start
	}
	isHot := map[string]bool{}
	for _, g := range gold {
		if !g.End.After(cutoff) {
			continue
		}
		if g.Unservable != "" {
			p.Unservable = append(p.Unservable, g)
			continue
		}
		isHot[g.ID] = true
		p.Hot = append(p.Hot, g)
		st, have := states[g.ID]
		_, isLive := live[g.ID]
		reason := ""
		switch {
		case opt.Force:
			reason = "forced"
		case slices.Contains(opt.Only, g.ID):
			reason = "repair"
		case !have:
			reason = "new"
		case st.SnapshotID != g.SnapshotID || st.Checksum != g.Checksum:
			reason = "changed"
		case !isLive && st.Rows > 0:
			reason = "missing"
		}
		if reason != "" {
			p.Push = append(p.Push, Planned{g, reason})
		}
	}
	for id := range live {
		if !isHot[id] {
			p.Drop = append(p.Drop, id)
		}
	}
	for id := range states {
		if !isHot[id] && !slices.Contains(p.Drop, id) {
			p.Drop = append(p.Drop, id)
		}
	}
	sort.Strings(p.Drop)
	return p, nil
}

// CircuitOpen reports whether the Gold table's circuit breaker is open (gold.PropCircuit):
// its last computation failed a critical check, and it is not served.
func CircuitOpen(tbl *table.Table) bool { return tbl.Properties()[gold.PropCircuit] == "open" }

// Sync brings the mart's hot window in the target up to the Gold table tbl (see the
// package doc for the promise).
func Sync(ctx context.Context, t Target, m *serving.Mart, tbl *table.Table, opt Options) (Result, error) {
	opt.defaults()
	start := time.Now()
	var res Result
	if CircuitOpen(tbl) {
		res.Skipped = "circuit open: " + tbl.Properties()[gold.PropCircuitReason]
		opt.Log.Warn("sync skipped: circuit open", "reason", tbl.Properties()[gold.PropCircuitReason])
		return res, nil
	}
	if err := m.CheckGold(tbl); err != nil {
		return res, err
	}
	if _, err := windowsServer(t, m); err != nil {
		return res, fmt.Errorf("sync %s: %w", m.Name, err)
	}
	out, err := t.Ensure(ctx, m, tbl, opt.Rebuild)
	if err != nil {
		return res, err
	}
	if opt.Rebuild {
		opt.Force = true
	}
	if out.Rebuild {
		// <t> drifted from the DDL: rebuilt whole from Gold, never patched.
		res.Rebuilt = out.Changes
		opt.Force = true
		opt.Log.Warn("served table differs from the mart definition: rebuilding it from Gold", "changes", fmt.Sprint(out.Changes))
	}
	ensured := time.Now()
	plan, err := MakePlan(ctx, t, m, tbl, opt)
	if err != nil {
		return res, err
	}
	opt.Log.Debug("planned", "partitions", len(plan.Push), "ensure_s", ensured.Sub(start).Seconds(), "plan_s", time.Since(ensured).Seconds())
	res.Unchanged = len(plan.Hot) - len(plan.Push)
	res.Cutoff = plan.Cutoff
	res.Unservable = plan.Unservable
	for _, u := range plan.Unservable {
		opt.Log.Warn("gold partition not served: it holds a value outside what ClickHouse's date and time types hold",
			"partition", u.ID, "gold_rows", u.Rows, "reason", u.Unservable)
	}
	b := Batch{Drop: plan.Drop, Rebuild: out.Rebuild, Purge: opt.Purge, Rows: opt.BatchRows, Streams: opt.Parallelism, Now: opt.Now,
		Unservable: plan.Unservable, Windows: slices.Contains(opt.Only, WindowsPartition)}
	for _, pp := range plan.Push {
		b.Push = append(b.Push, pp.Partition)
	}
	pub, err := t.Publish(ctx, m, tbl, b)
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("sync %s: %w", m.Name, err)
	}
	if r := pub.Push; len(plan.Push) > 0 {
		for _, pp := range plan.Push {
			opt.Log.Debug("pushed", "partition", pp.ID, "reason", pp.Reason, "rows", r.ByID[pp.ID], "snapshot", pp.SnapshotID)
		}
		attrs := []any{"partitions", len(plan.Push), "rows", r.Rows, "exchanged", r.Exchanged, "seconds", r.Elapsed.Seconds()}
		for _, s := range slices.Sorted(maps.Keys(r.Steps)) {
			attrs = append(attrs, s+"_s", r.Steps[s].Seconds())
		}
		opt.Log.Debug("push", attrs...)
		res.Pushed = slices.Clone(plan.Push)
		sort.Slice(res.Pushed, func(i, j int) bool { return res.Pushed[i].ID < res.Pushed[j].ID })
		res.Rows = r.Rows
	}
	if len(plan.Drop) > 0 {
		opt.Log.Info("dropped partitions (left the hot window)", "partitions", plan.Drop)
		res.Dropped = plan.Drop
	}
	res.Purged = pub.Purged
	if res.Windows = pub.Windows; pub.Windows != "" {
		opt.Log.Debug("rolling windows", "days", fmt.Sprint(m.Windows.Days), "how", pub.Windows)
	}
	return res, plan.cold(m)
}

// windowsServer is t as the server of m's rolling windows: nil when m declares none, an
// error when it does and t cannot serve them (only a single ClickHouse server can).
func windowsServer(t Target, m *serving.Mart) (hot.WindowsServer, error) {
	if len(m.Windows.Days) == 0 {
		return nil, nil
	}
	ws, ok := t.(hot.WindowsServer)
	if !ok {
		return nil, errors.New("its rolling windows are served by a single ClickHouse server only")
	}
	return ws, nil
}

// WindowsPartition is the partition Check reports a drift of the rolling windows under
// (serving.Mart.Windows); Options.Only naming it rebuilds them.
const WindowsPartition = "windows"

// Summary is a one-line description of a result.
func (r Result) Summary(mart string) string {
	if r.Skipped != "" {
		return fmt.Sprintf("sync %s: skipped (%s)", mart, r.Skipped)
	}
	var ids []string
	for _, p := range r.Pushed {
		ids = append(ids, p.ID+"("+p.Reason+")")
	}
	s := fmt.Sprintf("sync %s: pushed %d partitions (%d rows), %d unchanged, dropped %d, %.2fs",
		mart, len(r.Pushed), r.Rows, r.Unchanged, len(r.Dropped), r.Elapsed.Seconds())
	if len(ids) > 0 && len(ids) <= 10 {
		s += ": " + strings.Join(ids, " ")
	}
	p := r.Purged
	if p.DictionaryKeys > 0 {
		s += fmt.Sprintf("; %d key hashes no row holds removed from the key dictionary", p.DictionaryKeys)
	}
	if p.DroppedTables+p.OutdatedParts > 0 {
		s += fmt.Sprintf("; purged %d dropped tables and %d outdated parts from disk", p.DroppedTables, p.OutdatedParts)
	} else if p.Skipped != "" {
		s += "; not purged (" + p.Skipped + ")"
	}
	if r.Recorded {
		s += "; Gold unchanged since the recorded push, ClickHouse not reached"
	}
	if len(r.Rebuilt) > 0 {
		s += fmt.Sprintf("; rebuilt the served table (%d differences from the mart definition)", len(r.Rebuilt))
	}
	if len(r.Unservable) > 0 {
		s += "; " + UnservableSummary(r.Unservable)
	}
	if r.Windows != "" {
		s += "; rolling windows " + r.Windows
	}
	return s
}

// UnservableSummary describes Gold partitions that are not served, with the reason of
// each of the first ten.
func UnservableSummary(parts []hot.Partition) string {
	var rows int64
	var ids []string
	for _, p := range parts {
		rows += p.Rows
		if len(ids) < 10 {
			ids = append(ids, p.ID+" ("+p.Unservable+")")
		}
	}
	return fmt.Sprintf("%d gold partitions (%d rows) not served: %s", len(parts), rows, strings.Join(ids, "; "))
}

// rangedColumn is a Gold column served as Date32 or DateTime64 beside the grain
// (serving.Mart.ValueColumns).
type rangedColumn struct {
	name string
	id   int
	date bool // Iceberg date (days); else timestamp (microseconds)
}

// rangedColumns are the mart's value columns whose Gold type is date or timestamp.
func rangedColumns(m *serving.Mart, sch *iceberg.Schema) []rangedColumn {
	var out []rangedColumn
	for _, name := range m.ValueColumns() {
		f, ok := sch.FindFieldByName(name)
		if !ok {
			continue
		}
		switch f.Type.(type) {
		case iceberg.DateType:
			out = append(out, rangedColumn{name: name, id: f.ID, date: true})
		case iceberg.TimestampType, iceberg.TimestampTzType:
			out = append(out, rangedColumn{name: name, id: f.ID})
		}
	}
	return out
}

// bound decodes the column's bound from a data file's lower or upper bounds (Iceberg's
// single-value serialization: little-endian days or microseconds).
func (rc rangedColumn) bound(bounds map[int][]byte) (time.Time, bool) {
	b := bounds[rc.id]
	switch {
	case rc.date && len(b) == 4:
		return time.Unix(int64(int32(binary.LittleEndian.Uint32(b)))*86400, 0).UTC(), true
	case !rc.date && len(b) == 8:
		return time.UnixMicro(int64(binary.LittleEndian.Uint64(b))).UTC(), true
	}
	return time.Time{}, false
}

// format prints a value of the column.
func (rc rangedColumn) format(t time.Time) string {
	if rc.date {
		return t.Format(time.DateOnly)
	}
	return t.Format("2006-01-02T15:04:05.999999Z")
}
