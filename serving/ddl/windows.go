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
// hot partition ClickHouse does not serve (holes). <t>_windows is replaced whole, by one
// CREATE OR REPLACE (WindowsCreate) or by an exchange with a next version in which only
// the windows a change touched were recomputed (WindowsUpdate): readers see the old
// table or the new one. Its comment records what it was built from (WindowsComment).
const (
	// WindowsSuffix names <t>_windows.
	WindowsSuffix = "_windows"
	// windowsTag starts the comment of a table goldbridge built as <t>_windows.
	windowsTag = "goldbridge windows "
)

// WindowsCreate returns the CREATE OR REPLACE TABLE ... AS SELECT that builds <t>_windows
// whole from <t>, with comment, leaving out every end day whose window meets a hole (a
// grain range [start, end) not served). A mart without windows has none.
func WindowsCreate(m *serving.Mart, holes [][2]time.Time, comment string) string {
	if len(m.Windows.Days) == 0 {
		return ""
	}
	return windowsTable(m, "CREATE OR REPLACE TABLE ", m.Table+WindowsSuffix, comment, WindowsSelect(m, holes))
}

// WindowsUpdate returns the statements that bring <t>_windows up to <t> after the grain
// ranges changed were pushed or dropped, <t>_windows having been built from <t> as it
// was before: the next version (<t>__wnext) keeps the rows of every end day whose window
// meets no changed range and is still whole, recomputes the others, and is swapped in by
// EXCHANGE TABLES (atomic for readers) with comment. The cost follows what changed: an
// appended day recomputes the end days whose windows hold it.
func WindowsUpdate(m *serving.Mart, holes, changed [][2]time.Time, comment string) []string {
	win, next := Name(m, m.Table+WindowsSuffix), Name(m, m.Table+WindowsNextSuffix)
	var keep []string
	selects := []string{}
	wd := serving.Q(serving.ColWindowDays)
	for _, d := range m.Windows.Days {
		cond := append([]string{fmt.Sprintf("%s = %d", wd, d), "NOT (" + inRanges(serving.Q(m.Grain.As), d, changed) + ")"},
			wholeWindow(m, d, holes, serving.Q(m.Grain.As))...)
		keep = append(keep, "("+strings.Join(cond, " AND ")+")")
		selects = append(selects, windowSelect(m, d, holes, changed))
	}
	kept := fmt.Sprintf("SELECT * FROM %s WHERE %s", win, strings.Join(keep, " OR "))
	return []string{
		"DROP TABLE IF EXISTS " + next,
		windowsTable(m, "CREATE TABLE ", m.Table+WindowsNextSuffix, comment, kept+"\nUNION ALL\n"+strings.Join(selects, "\nUNION ALL\n")),
		"EXCHANGE TABLES " + win + " AND " + next,
		"DROP TABLE IF EXISTS " + next,
	}
}

// WindowsNextSuffix names the next version of <t>_windows that WindowsUpdate builds.
const WindowsNextSuffix = "__wnext"

// windowsTable is the statement verb table ... AS query with <t>_windows's engine, key
// and comment.
func windowsTable(m *serving.Mart, verb, table, comment, query string) string {
	return fmt.Sprintf("%s%s\nENGINE = MergeTree\nORDER BY (%s, %s, %s)\nSETTINGS index_granularity = %d\nCOMMENT %s\nAS %s",
		verb, Name(m, table), serving.Q(mart.ColGroupingLevel), serving.Q(serving.ColWindowDays), serving.Q(m.Grain.As), IndexGranularity,
		serving.QS(comment), query)
}

// WindowsSelect is the SELECT of <t>_windows's rows (WindowsCreate's), for Check to
// compare the stored rows with.
func WindowsSelect(m *serving.Mart, holes [][2]time.Time) string {
	selects := make([]string, len(m.Windows.Days))
	for i, d := range m.Windows.Days {
		selects[i] = windowSelect(m, d, holes, nil)
	}
	return strings.Join(selects, "\nUNION ALL\n")
}

// windowSelect is the rows of the windows of days days (those ending in a changed range
// or the days after it that the window reaches, when changed is not nil): each served
// row of <t> is repeated for every end day whose window holds it (arrayJoin: one pass
// over <t>, where a join of end days with rows would compare every pair), then grouped
// by end day, level and dimensions with every measure's FinalExpr.
func windowSelect(m *serving.Mart, days int, holes, changed [][2]time.Time) string {
	t, g := Name(m, m.Table), serving.Q(m.Grain.As)
	key := keyColumns(m)[2:] // dimensions and grouping flags
	group := []string{"__end", serving.Q(mart.ColGroupingLevel)}
	sel := []string{fmt.Sprintf("toUInt16(%d) AS %s", days, serving.Q(serving.ColWindowDays)), "__end AS " + g}
	for _, c := range key {
		sel = append(sel, serving.Q(c.Name))
		group = append(group, serving.Q(c.Name))
	}
	sel = append(sel, serving.Q(mart.ColGroupingLevel))
	for _, ms := range m.Measures {
		sel = append(sel, fmt.Sprintf("CAST(%s, %s) AS %s", FinalExpr(m, ms), serving.QS(servedType(ms)), serving.Q(ms.Name)))
	}
	where := wholeWindow(m, days, holes, "__end")
	var rows []string
	if lv := m.Windows.Levels; len(lv) > 0 {
		q := make([]string, len(lv))
		for i, l := range lv {
			q[i] = serving.QS(l)
		}
		rows = append(rows, fmt.Sprintf("%s IN (%s)", serving.Q(mart.ColGroupingLevel), strings.Join(q, ", ")))
	}
	if changed != nil {
		where = append(where, inRanges("__end", days, changed))
		// Only the rows some recomputed window holds: those within a window's length
		// less one before or after a changed range.
		var in []string
		for _, r := range changed {
			in = append(in, fmt.Sprintf("(%s >= %s - %d AND %s < %s + %d)", g, dayLit(r[0]), days-1, g, dayLit(r[1]), days-1))
		}
		rows = append(rows, "("+strings.Join(in, " OR ")+")")
	}
	inner := fmt.Sprintf("SELECT arrayJoin(arrayMap(i -> %s + i, range(%d))) AS __end, * EXCEPT (%s) FROM %s", g, days, g, t)
	if len(rows) > 0 {
		inner += " WHERE " + strings.Join(rows, " AND ")
	}
	return fmt.Sprintf("SELECT\n    %s\nFROM (%s)\nWHERE %s\nGROUP BY %s", strings.Join(sel, ",\n    "), inner,
		strings.Join(where, " AND "), strings.Join(group, ", "))
}

// wholeWindow is the conditions on the end day col of a window of days days that is
// served whole: within <t>'s first day plus days less one and its last day, and meeting
// no hole.
func wholeWindow(m *serving.Mart, days int, holes [][2]time.Time, col string) []string {
	t, g := Name(m, m.Table), serving.Q(m.Grain.As)
	where := []string{
		fmt.Sprintf("%s >= (SELECT min(%s) FROM %s) + %d", col, g, t, days-1),
		fmt.Sprintf("%s <= (SELECT max(%s) FROM %s)", col, g, t),
	}
	if len(holes) > 0 {
		where = append(where, "NOT "+inRanges(col, days, holes))
	}
	return where
}

// inRanges is the condition that the window of days days ending col holds a day of one
// of the ranges [start, end).
func inRanges(col string, days int, ranges [][2]time.Time) string {
	if len(ranges) == 0 {
		return "0"
	}
	var or []string
	for _, r := range ranges {
		or = append(or, fmt.Sprintf("(%s >= %s AND %s - %d < %s)", col, dayLit(r[0]), col, days-1, dayLit(r[1])))
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

// dayLit is the Date32 literal of t's UTC day.
func dayLit(t time.Time) string { return "toDate32(" + serving.QS(t.UTC().Format(time.DateOnly)) + ")" }

// WindowsComment is the comment <t>_windows is built with from <t> as of source (what
// identifies <t>'s content, push.WindowsSource): it changes when the windows' definition
// or their source does.
func WindowsComment(m *serving.Mart, holes [][2]time.Time, source string) string {
	h := xxhash.New()
	_, _ = h.WriteString(WindowsSelect(m, holes)) // never fails
	_, _ = h.WriteString("\x00" + source)
	return windowsTag + strconv.FormatUint(h.Sum64(), 16)
}

// IsWindowsComment reports whether comment is one WindowsComment makes: the table is
// goldbridge's <t>_windows.
func IsWindowsComment(comment string) bool { return strings.HasPrefix(comment, windowsTag) }
