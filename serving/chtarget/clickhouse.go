// Package chtarget implements the hot tier's contract (serving/hot) on ClickHouse: one
// server or a cluster reached through one node (ClickHouse), and a sharded topology
// without Keeper (Sharded). Tables come from serving/ddl, pushes from serving/push, the
// recorded push states live in each database's _goldbridge_sync table, and ReadBack
// reads the served rows as serving/fingerprint renders them. The contract suite in
// sync/contract_test.go runs against both.
package chtarget

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/shopspring/decimal"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
	"goldbridge/serving/fingerprint"
	"goldbridge/serving/hot"
	"goldbridge/serving/push"
)

var (
	_ hot.StorageReporter = (*ClickHouse)(nil)
	_ hot.StorageReporter = (*Sharded)(nil)
)

// ClickHouse is the hot.Target of one ClickHouse server (or a cluster through one node)
// reached by a client: tables by serving/ddl, pushes by serving/push, the push states in
// the _goldbridge_sync table. Every statement is retried on connection errors
// (chconn.Client.Retry). Safe for concurrent use by different marts.
type ClickHouse struct {
	c *chconn.Client

	// Knobs for tests and measurements (knobs.go): ClickHouse builds every aggregate
	// state from the detail rows (push.Options.ServerStates), and a fault injected
	// before each push step.
	serverStates bool
	fault        func(partition, step string) error

	// local: a node of a sharded topology (Sharded), read back from its own <t>, not from
	// <t>_final, which reads every shard.
	local bool

	mu      sync.Mutex
	ensured map[string]ensured // by mart: Prepare's outcome, for the next Ensure
}

// ensured is an Ensure done ahead (Prepare) for a Gold schema.
type ensured struct {
	schema  *iceberg.Schema
	outcome hot.Outcome
}

// NewClickHouse returns the ClickHouse target reached through c; c stays the caller's
// to close.
func NewClickHouse(c *chconn.Client) *ClickHouse {
	return &ClickHouse{c: c, ensured: map[string]ensured{}}
}

// Storage implements hot.StorageReporter (push.TableStorage).
func (t *ClickHouse) Storage(ctx context.Context, m *serving.Mart) (hot.Storage, error) {
	var s hot.Storage
	err := t.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		s, err = push.TableStorage(ctx, t.c, m)
		return err
	})
	return s, err
}

// Client is the connection the target uses.
func (t *ClickHouse) Client() *chconn.Client { return t.c }

// Prepare ensures the mart's tables for the Gold table tbl ahead of its Sync (as `run`
// does while the lakehouse stages work, ~8 statements a mart): the next Ensure of the
// mart is answered from it without reaching the server, if tbl's schema is still the
// same by then and no rebuild is asked. tbl must have been built for m (Servable).
func (t *ClickHouse) Prepare(ctx context.Context, m *serving.Mart, tbl *table.Table) error {
	if err := m.CheckGold(tbl); err != nil {
		return err
	}
	out, err := t.ensure(ctx, m)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ensured[m.Name] = ensured{schema: tbl.Schema(), outcome: out}
	return nil
}

// Ensure implements hot.Target (ddl.Ensure; with rebuild, ddl.Drop first).
func (t *ClickHouse) Ensure(ctx context.Context, m *serving.Mart, tbl *table.Table, rebuild bool) (hot.Outcome, error) {
	t.mu.Lock()
	e, ok := t.ensured[m.Name]
	delete(t.ensured, m.Name)
	t.mu.Unlock()
	if rebuild {
		if err := t.c.Retry(ctx, func(ctx context.Context) error { return ddl.Drop(ctx, t.c.Conn(), m) }); err != nil {
			return hot.Outcome{}, err
		}
	} else if ok && e.schema.Equals(tbl.Schema()) {
		return e.outcome, nil
	}
	return t.ensure(ctx, m)
}

func (t *ClickHouse) ensure(ctx context.Context, m *serving.Mart) (out hot.Outcome, err error) {
	err = t.c.Retry(ctx, func(ctx context.Context) error {
		out, err = ddl.Ensure(ctx, t.c.Conn(), m)
		return err
	})
	return out, err
}

// Partitions implements hot.Target: the push states (hot.States) and the active parts of
// <t> by partition.
func (t *ClickHouse) Partitions(ctx context.Context, m *serving.Mart) (hot.Served, error) {
	var s hot.Served
	err := t.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		if s.States, err = push.States(ctx, t.c, m); err != nil {
			return err
		}
		s.Live, err = t.live(ctx, m)
		return err
	})
	return s, err
}

// live returns the active partitions of <t> with their rows.
func (t *ClickHouse) live(ctx context.Context, m *serving.Mart) (map[string]uint64, error) {
	rows, err := t.c.Conn().Query(ctx, "SELECT partition_id, sum(rows) FROM system.parts WHERE database = ? AND table = ? AND active GROUP BY partition_id",
		m.Database, m.Table)
	if err != nil {
		return nil, fmt.Errorf("parts of %s: %w", m.Table, err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var id string
		var n uint64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// Publish implements hot.Target. The partitions are staged, swapped in and recorded in one
// push (serving/push: one EXCHANGE TABLES on a single server, REPLACE PARTITION per
// partition on a cluster), retried as a whole; partitions to drop are left out of an
// exchange, or dropped after it and recorded deleted.
func (t *ClickHouse) Publish(ctx context.Context, m *serving.Mart, tbl *table.Table, b hot.Batch) (hot.Published, error) {
	var pub hot.Published
	// What <t> held before, for the windows of what this batch changes.
	var before string
	err := t.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		before, err = push.WindowsSource(ctx, t.c, m)
		return err
	})
	if err != nil {
		return pub, err
	}
	if b.Rebuild && len(b.Push) == 0 {
		// Nothing hot in Gold: the rebuilt table is empty.
		if err := t.c.Retry(ctx, func(ctx context.Context) error { return t.rebuildEmpty(ctx, m) }); err != nil {
			return pub, fmt.Errorf("rebuild: %w", err)
		}
	}
	if len(b.Push) > 0 {
		err := t.c.Retry(ctx, func(ctx context.Context) error {
			var err error
			pub.Push, err = push.Push(ctx, t.c, m, tbl, b.Push, push.Options{BatchRows: b.Rows, Streams: b.Streams,
				Drop: b.Drop, Rebuild: b.Rebuild, Fault: t.fault, Now: b.Now, ServerStates: t.serverStates})
			return err
		})
		if err != nil {
			return pub, fmt.Errorf("%d partitions not pushed: %w", len(b.Push), err)
		}
		if b.Rebuild {
			if err := t.c.Retry(ctx, func(ctx context.Context) error { return ddl.EnsureFinal(ctx, t.c.Conn(), m) }); err != nil {
				return pub, err
			}
		}
	} else if err := t.c.Retry(ctx, func(ctx context.Context) error { return push.Cleanup(ctx, t.c, m) }); err != nil {
		// Leftovers of a push that failed after its swap (cheap when there are none).
		return pub, err
	}
	if len(b.Drop) > 0 {
		if err := t.c.Retry(ctx, func(ctx context.Context) error { return t.drop(ctx, m, b, pub.Push.Exchanged) }); err != nil {
			return pub, fmt.Errorf("drop partitions %s: %w", strings.Join(b.Drop, " "), err)
		}
		// Keys of the dropped days no row holds any longer (a forget's purge below
		// compacts in any case).
		if !b.Purge {
			n, err := push.CompactIdsIfSparse(ctx, t.c, m)
			if err != nil {
				return pub, err
			}
			pub.Purged.DictionaryKeys += n
		}
	}
	// The windows after every change of <t> (a no-op when none), before a purge, which
	// then removes the replaced windows' rows too.
	change, err := windowsChange(m, b, before)
	if err != nil {
		return pub, err
	}
	err = t.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		pub.Windows, err = push.RefreshWindows(ctx, t.c, m, push.Ranges(b.Unservable), b.Windows, change)
		return err
	})
	if err != nil {
		return pub, err
	}
	if b.Purge {
		err := t.c.Retry(ctx, func(ctx context.Context) error {
			p, err := push.Purge(ctx, t.c, m)
			pub.Purged.DroppedTables += p.DroppedTables
			pub.Purged.OutdatedParts += p.OutdatedParts
			pub.Purged.DictionaryKeys += p.DictionaryKeys
			pub.Purged.Skipped = p.Skipped
			return err
		})
		if err != nil {
			return pub, err
		}
	}
	return pub, nil
}

// drop removes the batch's Drop partitions from <t> (unless an exchange already left
// them out) and records them deleted.
func (t *ClickHouse) drop(ctx context.Context, m *serving.Mart, b hot.Batch, exchanged bool) error {
	if !exchanged {
		for i := 0; i < len(b.Drop); i += 100 {
			var cmds []string
			for _, id := range b.Drop[i:min(i+100, len(b.Drop))] {
				cmds = append(cmds, "DROP PARTITION ID "+serving.QS(id))
			}
			if err := t.c.Conn().Exec(ctx, "ALTER TABLE "+ddl.Name(m, m.Table)+" "+strings.Join(cmds, ", ")); err != nil {
				return err
			}
		}
	}
	states := make([]hot.State, len(b.Drop))
	for i, id := range b.Drop {
		states[i] = hot.State{Partition: id, Deleted: true, PushedAt: b.Now()}
	}
	return push.RecordStates(ctx, t.c, m, states)
}

// rebuildEmpty replaces <t> by an empty table of the DDL (a rebuild with nothing parts).
func (t *ClickHouse) rebuildEmpty(ctx context.Context, m *serving.Mart) error {
	if err := t.c.Conn().Exec(ctx, "DROP TABLE IF EXISTS "+ddl.Name(m, m.Table)+" SYNC"); err != nil {
		return err
	}
	_, err := ddl.Ensure(ctx, t.c.Conn(), m)
	return err
}

// ReadBack implements hot.Target: the columns of <t> against the DDL (ddl.TargetDrift), and
// the hot partitions of <t>_final aggregated by partition id and level in one query.
func (t *ClickHouse) ReadBack(ctx context.Context, m *serving.Mart, parts []hot.Partition) (hot.ReadBack, error) {
	var rb hot.ReadBack
	err := t.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		if rb.Columns, err = ddl.TargetDrift(ctx, t.c.Conn(), m); err != nil || len(rb.Columns) > 0 || len(parts) == 0 {
			return err
		}
		if rb.Stats, err = t.stats(ctx, m, parts); err != nil {
			return err
		}
		return t.stateStats(ctx, m, parts, rb.Stats)
	})
	return rb, err
}

// hotWhere is the condition selecting the grain range of the sorted hot partitions.
func hotWhere(m *serving.Mart, parts []hot.Partition) string {
	from, to := fingerprint.HotRange(parts)
	g := serving.Q(m.Grain.As)
	return fmt.Sprintf("%s >= fromUnixTimestamp64Micro(%d, 'UTC') AND %s < fromUnixTimestamp64Micro(%d, 'UTC')", g, from.UnixMicro(), g, to.UnixMicro())
}

// stateStats adds to out, by partition id and level, the fingerprints of the states of
// the hot rows of <t> as stored (CheckedStates), row by row: a row a merge would fold
// into another is a row Gold does not have.
func (t *ClickHouse) stateStats(ctx context.Context, m *serving.Mart, parts []hot.Partition, out map[string]map[string]*hot.LevelStats) error {
	checks := fingerprint.CheckedStates(m)
	if len(checks) == 0 {
		return nil
	}
	sel := []string{"toString(" + m.PartitionExpr() + ") AS _p", "toString(" + serving.Q(mart.ColGroupingLevel) + ") AS _l"}
	with := ""
	for _, sc := range checks {
		col := serving.Q(ddl.StateColumn(sc.Measure))
		digest := fingerprint.StateDigestSQL(col, sc.Measure.Agg == mart.CountDistinct, fingerprint.GroupArrayMax)
		if sc.Bitmap {
			digest, with = fingerprint.BitmapDigestSQL(col), ddl.HashesWith(m)
		}
		sel = append(sel, "sum(sipHash64(concat("+fingerprint.RowKeySQL(m)+", "+digest+", ';')))")
	}
	q := with + fmt.Sprintf("SELECT %s FROM %s WHERE %s GROUP BY _p, _l", strings.Join(sel, ", "), ddl.Name(m, m.Table), hotWhere(m, parts))
	rows, err := t.c.Conn().Query(ctx, q)
	if err != nil {
		return fmt.Errorf("check %s states: %w", m.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var p, l string
		hs := make([]uint64, len(checks))
		dest := []any{&p, &l}
		for i := range hs {
			dest = append(dest, &hs[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("check %s states: %w", m.Name, err)
		}
		if out[p] == nil {
			out[p] = map[string]*hot.LevelStats{}
		}
		if out[p][l] == nil {
			out[p][l] = hot.NewLevelStats()
		}
		for i, sc := range checks {
			out[p][l].States[sc.Measure.Name] = hs[i]
		}
	}
	return rows.Err()
}

// stats aggregates the hot partitions of <t>_final by partition id and level.
func (t *ClickHouse) stats(ctx context.Context, m *serving.Mart, parts []hot.Partition) (map[string]map[string]*hot.LevelStats, error) {
	sums := fingerprint.Summed(m)
	sel := []string{"toString(" + m.PartitionExpr() + ") AS _p", "toString(" + serving.Q(mart.ColGroupingLevel) + ") AS _l", "count()", "sum(" + fingerprint.RowHashSQL(m) + ")"}
	for _, ms := range sums {
		// NULL values are skipped, as on Gold's side: a level of NULLs sums to 0.
		if fingerprint.IsFloat(ms) {
			sel = append(sel, "toString(toDecimal128(ifNull(sum("+serving.Q(ms.Name)+"), 0), 9))")
		} else {
			sel = append(sel, "toString(ifNull(sum("+serving.Q(ms.Name)+"), 0))")
		}
	}
	var weighted []serving.Measure
	for _, ms := range m.Measures {
		if fingerprint.Approx(ms) {
			weighted = append(weighted, ms)
			sel = append(sel, "ifNull(sum("+fingerprint.RowWeightSQL(m)+" * "+serving.Q(ms.Name)+"), 0)")
		}
	}
	src := ddl.Name(m, m.Table+ddl.ViewSuffix)
	if t.local {
		src = "(" + ddl.FinalSelect(m, m.Table) + ")"
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s GROUP BY _p, _l", strings.Join(sel, ", "), src, hotWhere(m, parts))
	rows, err := t.c.Conn().Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", m.Name, err)
	}
	defer rows.Close()
	out := map[string]map[string]*hot.LevelStats{}
	for rows.Next() {
		var p, l string
		var n, h uint64
		vals := make([]string, len(sums))
		ws := make([]float64, len(weighted))
		dest := []any{&p, &l, &n, &h}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		for i := range ws {
			dest = append(dest, &ws[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		st := hot.NewLevelStats()
		st.Rows, st.Hash = int64(n), h
		for i, ms := range weighted {
			st.Weighted[ms.Name] = ws[i]
		}
		for i, v := range vals {
			d, err := decimal.NewFromString(v)
			if err != nil {
				return nil, fmt.Errorf("check %s %s: %w", m.Name, sums[i].Name, err)
			}
			st.Sums[sums[i].Name] = d
		}
		if out[p] == nil {
			out[p] = map[string]*hot.LevelStats{}
		}
		out[p][l] = st
	}
	return out, rows.Err()
}
