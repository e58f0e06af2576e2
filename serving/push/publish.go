package push

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// Publication: the staged partitions swapped in (EXCHANGE TABLES of a whole next
// table, or REPLACE PARTITION in place), the previous version kept for readers, and the
// cleanup of what a push left.

// CanExchange reports whether the mart's table can be replaced by EXCHANGE TABLES:
// no ON CLUSTER topology (a sharded node is a single server), and an Atomic database.
func CanExchange(ctx context.Context, c *chconn.Client, m *serving.Mart) (bool, error) {
	if m.Cluster != "" && !m.Sharded {
		return false, nil
	}
	engine, err := ddl.DatabaseEngine(ctx, c.Conn(), m.Database)
	return engine == "Atomic", err
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
	if m.Bitmap() {
		q += ", " + ddl.Name(m, m.Table+ddl.IdsNextSuffix) // a compaction's (ddl.CompactIds)
	}
	if err := c.Conn().Exec(ctx, q); err != nil {
		return fmt.Errorf("push %s: cleanup: %w", m.Name, err)
	}
	return nil
}
