package push

import (
	"context"
	"fmt"
	"goldbridge/serving/hot"
	"strings"
	"time"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// Purged is what Purge removed (serving/hot).
type Purged = hot.Purged

// Purge leaves on the server's disk no copy of rows that are no longer in the mart's
// table <t>: a forget calls it after pushing the recomputed partitions. ClickHouse keeps
// such rows for minutes: in the outdated parts a REPLACE or DROP PARTITION (or a merge)
// leaves, and in dropped tables (an exchanged-out <t>) until the database deletes them.
// Purge restores each dropped table of the mart (UNDROP) and drops it again with SYNC,
// keeps in a bitmap mart's key dictionary only the hashes of keys <t> still holds,
// then, when <t> has outdated parts, makes a new <t> from its active partitions (ATTACH
// PARTITION ... FROM: hard links), exchanges it in and drops the old one with SYNC,
// which deletes its parts, active and outdated. Readers see the same rows throughout.
// It needs the UNDROP TABLE grant and an Atomic database without a cluster
// (CanExchange; else it does nothing and says so in Skipped); run it with no push of
// the mart in progress.
func Purge(ctx context.Context, c *chconn.Client, m *serving.Mart) (Purged, error) {
	var res Purged
	fail := func(err error) (Purged, error) { return res, fmt.Errorf("purge %s: %w", m.Name, err) }
	ok, err := CanExchange(ctx, c, m)
	if err != nil {
		return fail(err)
	}
	if !ok {
		res.Skipped = "no exchange on a cluster or a non-Atomic database: ClickHouse deletes replaced parts after old_parts_lifetime"
		return res, nil
	}
	conn := c.Conn()
	// The previous version of <t> (kept to build the next one) holds old rows.
	if err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+ddl.Name(m, m.Table+ddl.PrevSuffix)+" SYNC"); err != nil {
		return fail(err)
	}
	dropped, err := droppedTables(ctx, c, m)
	if err != nil {
		return fail(err)
	}
	for _, d := range dropped {
		name := ddl.Name(m, d[0])
		if err := conn.Exec(ctx, "UNDROP TABLE "+name+" UUID "+serving.QS(d[1])); err != nil {
			// A server with prompt cleanup (the embedded one) may be deleting it now.
			if gone, gerr := deleted(ctx, c, d[1]); gerr == nil && gone {
				continue
			}
			return fail(fmt.Errorf("undrop %s to delete its data now: %w", d[0], err))
		}
		if err := conn.Exec(ctx, "DROP TABLE "+name+" SYNC"); err != nil {
			return fail(err)
		}
		res.DroppedTables++
	}
	if m.Bitmap() {
		n, err := compactIds(ctx, c, m, true) // ok: CanExchange
		if err != nil {
			return fail(err)
		}
		res.DictionaryKeys = n
	}
	var outdated uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = ? AND table = ? AND NOT active", m.Database, m.Table).Scan(&outdated); err != nil {
		return fail(fmt.Errorf("parts of %s: %w", m.Table, err))
	}
	if outdated == 0 {
		return res, nil
	}
	batch := ddl.Name(m, m.Table+PushSuffix)
	if err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+batch+" SYNC"); err != nil {
		return fail(err)
	}
	if err := conn.Exec(ctx, ddl.TargetTable(m, m.Table+PushSuffix)); err != nil {
		return fail(err)
	}
	live, err := ActivePartitions(ctx, c, m.Database, m.Table)
	if err != nil {
		return fail(err)
	}
	if err := carryOver(ctx, c, m, live, nil); err != nil {
		return fail(err)
	}
	if err := conn.Exec(ctx, "EXCHANGE TABLES "+ddl.Name(m, m.Table)+" AND "+batch); err != nil {
		return fail(err)
	}
	if err := conn.Exec(ctx, "DROP TABLE "+batch+" SYNC"); err != nil {
		return fail(err)
	}
	res.OutdatedParts = int(outdated)
	return res, nil
}

// deleted reports whether the server deletes the dropped table uuid by itself: it
// leaves system.dropped_tables within 5 s.
func deleted(ctx context.Context, c *chconn.Client, uuid string) (bool, error) {
	for range 50 {
		var n uint64
		if err := c.Conn().QueryRow(ctx, "SELECT count() FROM system.dropped_tables WHERE toString(uuid) = ?", uuid).Scan(&n); err != nil {
			return false, err
		}
		if n == 0 {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false, nil
}

// droppedTables lists the (name, uuid) of the mart's tables (<t> and <t>__*) that are
// dropped but not yet deleted.
func droppedTables(ctx context.Context, c *chconn.Client, m *serving.Mart) ([][2]string, error) {
	rows, err := c.Conn().Query(ctx, "SELECT table, toString(uuid) FROM system.dropped_tables WHERE database = ? ORDER BY table_dropped_time", m.Database)
	if err != nil {
		return nil, fmt.Errorf("dropped tables: %w", err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var name, uuid string
		if err := rows.Scan(&name, &uuid); err != nil {
			return nil, err
		}
		if name == m.Table || strings.HasPrefix(name, m.Table+"__") {
			out = append(out, [2]string{name, uuid})
		}
	}
	return out, rows.Err()
}
