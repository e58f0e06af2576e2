package ddl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
)

// Rolling windows (serving.Mart.Windows). A dashboard's question over the last 7 or 30
// days merges 7 or 30 daily states per answer (a bitmap or hash set per day for a
// distinct count), which cost 2-5x a one-day question on the bench; <t>_windows holds
// those answers finished, one row per window length, end day, level and dimensions, so
// the question reads one row per key. Its rows are FinalExpr of every measure over the
// served daily rows of the window, exactly what the question itself would compute from
// <t>, and only for end days whose whole window is served: from the first served day
// plus the window's length less one, to the last served day, and no window that meets a
// hot partition ClickHouse does not serve (holes). <t>_windows is replaced whole, in
// one CREATE OR REPLACE (atomic for readers: they see the old table or the new one),
// and its comment records what it was built from (WindowsComment), so a sync rebuilds
// it only when <t> or its definition changed.
const (
	// WindowsSuffix names <t>_windows.
	WindowsSuffix = "_windows"
	// ColWindowDays is <t>_windows's window length column.
	ColWindowDays = "window_days"
	// windowsTag starts the comment of a table goldbridge built as <t>_windows.
	windowsTag = "goldbridge windows "
)

// WindowsCreate returns the CREATE OR REPLACE TABLE ... AS SELECT that builds <t>_windows
// from <t>, with comment, leaving out every end day whose window meets a hole (a grain
// range [start, end) not served). A mart without windows has none.
func WindowsCreate(m *serving.Mart, holes [][2]time.Time, comment string) string {
	if len(m.Windows.Days) == 0 {
		return ""
	}
	selects := make([]string, len(m.Windows.Days))
	for i, d := range m.Windows.Days {
		selects[i] = windowSelect(m, d, holes)
	}
	g := serving.Q(m.Grain.As)
	return fmt.Sprintf("CREATE OR REPLACE TABLE %s\nENGINE = MergeTree\nORDER BY (%s, %s, %s)\nSETTINGS index_granularity = %d\nCOMMENT %s\nAS %s",
		Name(m, m.Table+WindowsSuffix), serving.Q(mart.ColGroupingLevel), serving.Q(ColWindowDays), g, IndexGranularity,
		serving.QS(comment), strings.Join(selects, "\nUNION ALL\n"))
}

// WindowsSelect is the SELECT of <t>_windows's rows (WindowsCreate's), for Check to
// compare the stored rows with.
func WindowsSelect(m *serving.Mart, holes [][2]time.Time) string {
	selects := make([]string, len(m.Windows.Days))
	for i, d := range m.Windows.Days {
		selects[i] = windowSelect(m, d, holes)
	}
	return strings.Join(selects, "\nUNION ALL\n")
}

// WindowsColumns are <t>_windows's columns: the window length, then <t>_final's.
func WindowsColumns(m *serving.Mart) []Column {
	return append([]Column{{ColWindowDays, "UInt16"}}, finalColumns(m)...)
}

// windowSelect is the rows of the windows of days days: each served row of <t> is
// repeated for every end day whose window holds it (arrayJoin: one pass over <t>, where
// a join of end days with rows would compare every pair), then grouped by end day,
// level and dimensions with every measure's FinalExpr.
func windowSelect(m *serving.Mart, days int, holes [][2]time.Time) string {
	t, g := Name(m, m.Table), serving.Q(m.Grain.As)
	key := keyColumns(m)[2:] // dimensions and grouping flags
	group := []string{"__end", serving.Q(mart.ColGroupingLevel)}
	sel := []string{fmt.Sprintf("toUInt16(%d) AS %s", days, serving.Q(ColWindowDays)), "__end AS " + g}
	for _, c := range key {
		sel = append(sel, serving.Q(c.Name))
		group = append(group, serving.Q(c.Name))
	}
	sel = append(sel, serving.Q(mart.ColGroupingLevel))
	for _, ms := range m.Measures {
		sel = append(sel, fmt.Sprintf("CAST(%s, %s) AS %s", FinalExpr(m, ms), serving.QS(servedType(ms)), serving.Q(ms.Name)))
	}
	where := []string{
		fmt.Sprintf("__end >= (SELECT min(%s) FROM %s) + %d", g, t, days-1),
		fmt.Sprintf("__end <= (SELECT max(%s) FROM %s)", g, t),
	}
	for _, h := range holes {
		// The window [__end - days + 1, __end] meets [start, end).
		where = append(where, fmt.Sprintf("NOT (__end >= %s AND __end - %d < %s)", dayLit(h[0]), days-1, dayLit(h[1])))
	}
	inner := fmt.Sprintf("SELECT arrayJoin(arrayMap(i -> %s + i, range(%d))) AS __end, * EXCEPT (%s) FROM %s", g, days, g, t)
	if lv := m.Windows.Levels; len(lv) > 0 {
		q := make([]string, len(lv))
		for i, l := range lv {
			q[i] = serving.QS(l)
		}
		inner += fmt.Sprintf(" WHERE %s IN (%s)", serving.Q(mart.ColGroupingLevel), strings.Join(q, ", "))
	}
	return fmt.Sprintf("SELECT\n    %s\nFROM (%s)\nWHERE %s\nGROUP BY %s", strings.Join(sel, ",\n    "), inner,
		strings.Join(where, " AND "), strings.Join(group, ", "))
}

// dayLit is the Date32 literal of t's UTC day.
func dayLit(t time.Time) string { return "toDate32(" + serving.QS(t.UTC().Format(time.DateOnly)) + ")" }

// WindowsComment is the comment <t>_windows is built with from <t> as of source (what
// identifies <t>'s content: its table and its newest recorded push): it changes when
// the windows' definition or their source does.
func WindowsComment(m *serving.Mart, holes [][2]time.Time, source string) string {
	h := xxhash.New()
	_, _ = h.WriteString(WindowsSelect(m, holes)) // never fails
	_, _ = h.WriteString("\x00" + source)
	return windowsTag + strconv.FormatUint(h.Sum64(), 16)
}

// IsWindowsComment reports whether comment is one WindowsComment makes: the table is
// goldbridge's <t>_windows.
func IsWindowsComment(comment string) bool { return strings.HasPrefix(comment, windowsTag) }
