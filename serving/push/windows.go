package push

import (
	"context"
	"fmt"
	"time"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// RefreshWindows brings <t>_windows (ddl.WindowsCreate) up to <t>: it rebuilds the
// table when <t> changed since it was built (another table under the name, or a newer
// recorded push) or the windows' definition did, or when force, and drops it when the
// mart declares no windows. holes are the hot grain ranges not served. It reports
// whether it rebuilt.
// A failure or crash leaves the old table (the replacement is one statement), which the
// next call rebuilds; a table under the name that goldbridge did not build is refused.
func RefreshWindows(ctx context.Context, c *chconn.Client, m *serving.Mart, holes [][2]time.Time, force bool) (bool, error) {
	win := m.Table + ddl.WindowsSuffix
	tables, err := tableComments(ctx, c, m.Database, m.Table, win)
	if err != nil {
		return false, fmt.Errorf("windows of %s: %w", m.Name, err)
	}
	have, exists := tables[win]
	if exists && !ddl.IsWindowsComment(have.comment) {
		return false, fmt.Errorf("windows of %s: table %s.%s exists and was not built by goldbridge", m.Name, m.Database, win)
	}
	if len(m.Windows.Days) == 0 {
		if !exists {
			return false, nil
		}
		if err := c.Conn().Exec(ctx, "DROP TABLE IF EXISTS "+ddl.Name(m, win)); err != nil {
			return false, fmt.Errorf("windows of %s: drop: %w", m.Name, err)
		}
		return false, nil
	}
	var pushed string
	if err := c.Conn().QueryRow(ctx, fmt.Sprintf("SELECT toString(max(pushed_at)) FROM %s.%s WHERE mart = ?",
		serving.Q(m.Database), serving.Q(ddl.SyncTable)), m.Name).Scan(&pushed); err != nil {
		return false, fmt.Errorf("windows of %s: pushes: %w", m.Name, err)
	}
	want := ddl.WindowsComment(m, holes, tables[m.Table].uuid+" "+pushed)
	if exists && have.comment == want && !force {
		return false, nil
	}
	if err := c.Conn().Exec(ctx, ddl.WindowsCreate(m, holes, want)); err != nil {
		return false, fmt.Errorf("windows of %s: build: %w", m.Name, err)
	}
	return true, nil
}

// tableInfo is a table's UUID and comment.
type tableInfo struct{ uuid, comment string }

// tableComments returns the UUID and comment of each of the named tables of db that
// exists.
func tableComments(ctx context.Context, c *chconn.Client, db string, names ...string) (map[string]tableInfo, error) {
	rows, err := c.Conn().Query(ctx, "SELECT name, toString(uuid), comment FROM system.tables WHERE database = ? AND name IN ?", db, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]tableInfo{}
	for rows.Next() {
		var name string
		var ti tableInfo
		if err := rows.Scan(&name, &ti.uuid, &ti.comment); err != nil {
			return nil, err
		}
		out[name] = ti
	}
	return out, rows.Err()
}

// Holes are the grain ranges of partitions: what RefreshWindows and WindowsSelect leave
// out of every window.
func Holes(parts []Partition) [][2]time.Time {
	var out [][2]time.Time
	for _, p := range parts {
		out = append(out, [2]time.Time{p.Start, p.End})
	}
	return out
}
