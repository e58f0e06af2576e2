package push

import (
	"context"
	"fmt"
	"time"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// How RefreshWindows brought <t>_windows up to <t>.
const (
	WindowsCurrent     = ""            // nothing to do
	WindowsRebuilt     = "rebuilt"     // built whole (ddl.WindowsCreate)
	WindowsIncremental = "incremental" // the windows a change touched (ddl.WindowsUpdate)
)

// WindowsChange is what one publication changed in <t>: the source <t> had before it
// (WindowsSource) and the grain ranges it pushed or dropped.
type WindowsChange struct {
	Before  string
	Changed [][2]time.Time
}

// RefreshWindows brings <t>_windows up to <t>: nothing when <t> did not change since it
// was built (its comment names WindowsSource then) and force is not set; the windows
// the change touched when it was built from change.Before (ddl.WindowsUpdate);
// otherwise the whole table (ddl.WindowsCreate). It drops the table when the mart
// declares no windows, and a next version an update left. holes are the hot grain ranges not
// served. A failure or crash leaves the old table or the new one whole (one statement,
// or one exchange), which the next call rebuilds if it is stale; a table under the name
// that goldbridge did not build is refused.
func RefreshWindows(ctx context.Context, c *chconn.Client, m *serving.Mart, holes [][2]time.Time, force bool, change *WindowsChange) (string, error) {
	win, next := m.Table+ddl.WindowsSuffix, m.Table+ddl.WindowsNextSuffix
	tables, err := tableComments(ctx, c, m.Database, m.Table, win, next)
	if err != nil {
		return "", fmt.Errorf("windows of %s: %w", m.Name, err)
	}
	have, exists := tables[win]
	if exists && !ddl.IsWindowsComment(have.comment) {
		return "", fmt.Errorf("windows of %s: table %s.%s exists and was not built by goldbridge", m.Name, m.Database, win)
	}
	if _, ok := tables[next]; ok {
		// Left by an update whose exchange succeeded but whose end was not seen.
		if err := c.Conn().Exec(ctx, "DROP TABLE IF EXISTS "+ddl.Name(m, next)); err != nil {
			return "", fmt.Errorf("windows of %s: drop %s: %w", m.Name, next, err)
		}
	}
	if len(m.Windows.Days) == 0 {
		if exists {
			if err := c.Conn().Exec(ctx, "DROP TABLE IF EXISTS "+ddl.Name(m, win)); err != nil {
				return "", fmt.Errorf("windows of %s: drop: %w", m.Name, err)
			}
		}
		return WindowsCurrent, nil
	}
	source, err := windowsSource(ctx, c, m, tables[m.Table].uuid)
	if err != nil {
		return "", err
	}
	want := ddl.WindowsComment(m, holes, source)
	switch {
	case force:
	case exists && have.comment == want:
		return WindowsCurrent, nil
	case exists && change != nil && have.comment == ddl.WindowsComment(m, holes, change.Before):
		for _, q := range ddl.WindowsUpdate(m, holes, change.Changed, want) {
			if err := c.Conn().Exec(ctx, q); err != nil {
				return "", fmt.Errorf("windows of %s: update: %w", m.Name, err)
			}
		}
		return WindowsIncremental, nil
	}
	if err := c.Conn().Exec(ctx, ddl.WindowsCreate(m, holes, want)); err != nil {
		return "", fmt.Errorf("windows of %s: build: %w", m.Name, err)
	}
	return WindowsRebuilt, nil
}

// WindowsSource identifies what <t> holds for its windows: its table (an exchange makes
// another) and the mart's recorded push states (each partition's Gold snapshot and
// checksum, or its drop; not the push times, which a clock may repeat). "" for a mart
// without windows.
func WindowsSource(ctx context.Context, c *chconn.Client, m *serving.Mart) (string, error) {
	if len(m.Windows.Days) == 0 {
		return "", nil
	}
	tables, err := tableComments(ctx, c, m.Database, m.Table)
	if err != nil {
		return "", fmt.Errorf("windows of %s: %w", m.Name, err)
	}
	return windowsSource(ctx, c, m, tables[m.Table].uuid)
}

// windowsSource is WindowsSource with <t>'s UUID read.
func windowsSource(ctx context.Context, c *chconn.Client, m *serving.Mart, uuid string) (string, error) {
	var states string
	if err := c.Conn().QueryRow(ctx, fmt.Sprintf(`SELECT toString(count()) || ' ' || hex(groupBitXor(cityHash64(partition, gold_snapshot_id, checksum, deleted)))
		FROM %s.%s FINAL WHERE mart = ?`, serving.Q(m.Database), serving.Q(ddl.SyncTable)), m.Name).Scan(&states); err != nil {
		return "", fmt.Errorf("windows of %s: push states: %w", m.Name, err)
	}
	return uuid + " " + states, nil
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

// Ranges are the grain ranges [start, end) of partitions (RefreshWindows' holes and
// changes).
func Ranges(parts []Partition) [][2]time.Time {
	var out [][2]time.Time
	for _, p := range parts {
		out = append(out, [2]time.Time{p.Start, p.End})
	}
	return out
}
