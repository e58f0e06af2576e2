package ddl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"goldbridge/serving/hot"
	"regexp"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"goldbridge/serving"
)

// ErrDrift is returned by Ensure when a live table differs from the expected DDL in a
// way no safe ALTER can fix.
var ErrDrift = errors.New("live table differs from the mart definition")

// Tables returns the tables of a mart with their expected columns.
func Tables(m *serving.Mart) map[string][]Column {
	t := map[string][]Column{
		m.Table:                 TargetColumns(m),
		m.Table + StagingSuffix: TargetColumns(m),
	}
	if m.Aggregating() {
		t[m.Table+DetailSuffix] = WireColumns(m)
	}
	if m.Bitmap() {
		t[m.Table+IdsSuffix] = []Column{{"h", "UInt128"}, {"id", "UInt32"}}
	}
	return t
}

// Diff compares the live columns of the mart's tables (from system.columns) with the
// expected ones. safe lists additions of trailing columns that ALTER TABLE ADD COLUMN can
// apply (a new measure); unsafe lists everything else.
func Diff(ctx context.Context, conn driver.Conn, m *serving.Mart) (safe, unsafe []Change, err error) {
	for table, want := range Tables(m) {
		have, err := liveColumns(ctx, conn, m.Database, table)
		if err != nil {
			return nil, nil, err
		}
		if len(have) == 0 {
			continue // created by Statements
		}
		nk := len(keyColumns(m))
		for i, c := range want {
			if i < len(have) {
				if have[i].Name != c.Name || have[i].Type != c.Type {
					unsafe = append(unsafe, Change{Table: table, Column: c.Name, Want: c.Type, Have: have[i].Type + " (" + have[i].Name + ")"})
				}
				continue
			}
			ch := Change{Table: table, Column: c.Name, Want: c.Type}
			if i >= nk {
				safe = append(safe, ch)
			} else {
				unsafe = append(unsafe, ch)
			}
		}
		for _, h := range have[min(len(have), len(want)):] {
			unsafe = append(unsafe, Change{Table: table, Column: h.Name, Have: h.Type})
		}
		if table != m.Table && table != m.Table+StagingSuffix {
			continue
		}
		if ch, err := keyDrift(ctx, conn, m, table); err != nil {
			return nil, nil, err
		} else if ch != nil {
			unsafe = append(unsafe, *ch)
		}
	}
	if ch, err := ttlDrift(ctx, conn, m); err != nil || ch != nil {
		if ch != nil {
			unsafe = append(unsafe, *ch)
		}
		return safe, unsafe, err
	}
	return safe, unsafe, nil
}

// keyDrift compares the sorting key of the live table with the DDL's (sortingKey): a
// table made before the level came first in it keeps its key until rebuilt, and parts
// move between tables (REPLACE, ATTACH PARTITION FROM) only with the same key.
func keyDrift(ctx context.Context, conn driver.Conn, m *serving.Mart, table string) (*Change, error) {
	var key string
	err := conn.QueryRow(ctx, "SELECT sorting_key FROM system.tables WHERE database = ? AND name = ?", m.Database, table).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sorting key of %s.%s: %w", m.Database, table, err)
	}
	var have, want []string
	for _, k := range strings.Split(key, ",") {
		have = append(have, strings.Trim(strings.TrimSpace(k), "`"))
	}
	for _, c := range sortingKey(m) {
		want = append(want, c.Name)
	}
	if slices.Equal(have, want) {
		return nil, nil
	}
	return &Change{Table: table, Column: "(sorting key)", Want: strings.Join(want, ", "), Have: key}, nil
}

var ttlDaysRE = regexp.MustCompile(`TTL .*toIntervalDay\((\d+)\)`)

// ttlDrift compares the TTL backstop of the live <t> with the DDL's (a mart whose window
// moved to hot_window_anchor: data has none: the server's clock would delete a backfill).
func ttlDrift(ctx context.Context, conn driver.Conn, m *serving.Mart) (*Change, error) {
	var engine string
	err := conn.QueryRow(ctx, "SELECT engine_full FROM system.tables WHERE database = ? AND name = ?", m.Database, m.Table).Scan(&engine)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine of %s.%s: %w", m.Database, m.Table, err)
	}
	want, have := "none", "none"
	if m.TTL > 0 {
		want = fmt.Sprintf("%d days", ttlDays(m.TTL))
	}
	if g := ttlDaysRE.FindStringSubmatch(engine); g != nil {
		have = g[1] + " days"
	}
	if want == have {
		return nil, nil
	}
	return &Change{Table: m.Table, Column: "TTL", Want: want, Have: have}, nil
}

func liveColumns(ctx context.Context, conn driver.Conn, db, table string) ([]Column, error) {
	rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ? ORDER BY position", db, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s.%s: %w", db, table, err)
	}
	defer rows.Close()
	var out []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Change and Outcome are the hot tier's terms (serving/hot).
type (
	Change  = hot.Change
	Outcome = hot.Outcome
)

// Ensure creates the mart's database, tables and view if missing and compares the
// live tables with the DDL. The helper tables (staging, detail), which hold nothing
// between pushes, are recreated when they differ. A difference of <t> itself, or a
// bitmap mart's <t> made with another key dictionary (staleBitmaps), is returned as
// Outcome.Rebuild on a single server; with a cluster (no atomic exchange
// there) it fails with ErrDrift naming `goldbridge sync --rebuild MART`. It never
// drops or alters <t>, and never adds a column over existing rows.
func Ensure(ctx context.Context, conn driver.Conn, m *serving.Mart) (Outcome, error) {
	stmts := Statements(m)
	exec := func(q string) error {
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("ddl %s: %w", m.Name, err)
		}
		return nil
	}
	for _, s := range stmts[:len(stmts)-1] {
		if err := exec(s); err != nil {
			return Outcome{}, err
		}
	}
	safe, unsafe, err := Diff(ctx, conn, m)
	if err != nil {
		return Outcome{}, err
	}
	var out Outcome
	helpers := map[string]bool{}
	for _, c := range append(safe, unsafe...) {
		out.Changes = append(out.Changes, c)
		if c.Table == m.Table {
			out.Rebuild = true
		} else {
			helpers[c.Table] = true
		}
	}
	if out.Rebuild && onCluster(m) != "" {
		var s []string
		for _, c := range out.Changes {
			s = append(s, c.String())
		}
		return out, fmt.Errorf("mart %s: %w: %s; run `goldbridge sync --rebuild %s` to recreate it from Gold",
			m.Name, ErrDrift, strings.Join(s, "; "), m.Name)
	}
	if len(helpers) > 0 {
		for t := range helpers {
			if err := exec(fmt.Sprintf("DROP TABLE IF EXISTS %s%s SYNC", Name(m, t), on(m))); err != nil {
				return out, err
			}
		}
		for _, s := range stmts[:len(stmts)-1] {
			if err := exec(s); err != nil {
				return out, err
			}
		}
	}
	if ch, err := staleBitmaps(ctx, conn, m); err != nil || ch != nil {
		if ch != nil {
			out.Changes, out.Rebuild = append(out.Changes, *ch), true
		}
		if err != nil {
			return out, err
		}
	}
	if out.Rebuild {
		return out, nil
	}
	return out, EnsureFinal(ctx, conn, m)
}

// staleBitmaps returns a Change when a bitmap mart's <t> holds rows whose ids are not
// (or not known to be) of the live key dictionary: its comment does not name the
// dictionary's generation (keydict.go). That is a dictionary dropped or recreated by
// hand, or a rebuild for one that has not finished; <t> is then rebuilt.
func staleBitmaps(ctx context.Context, conn driver.Conn, m *serving.Mart) (*Change, error) {
	if !m.Bitmap() {
		return nil, nil
	}
	var rows uint64
	var comment string
	err := conn.QueryRow(ctx, "SELECT ifNull(total_rows, 0), comment FROM system.tables WHERE database = ? AND name = ?", m.Database, m.Table).Scan(&rows, &comment)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && rows == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("comment of %s.%s: %w", m.Database, m.Table, err)
	}
	gen, err := Generation(ctx, conn, m)
	if err != nil {
		return nil, err
	}
	if want := DictionaryComment(gen); comment != want {
		return &Change{Table: m.Table, Column: "(comment)", Want: want, Have: comment}, nil
	}
	return nil, nil
}

// EnsureFinal creates or replaces the mart's _final table, unless the live one already
// is the one finalCreate describes (as the server formats it): DDL that did not change
// is not re-executed (each CREATE OR REPLACE rewrites the table's metadata file, which
// a full disk can leave empty). It replaces a _final view of an older goldbridge in one
// step in an Atomic database; in another it drops it first (readers miss it meanwhile).
func EnsureFinal(ctx context.Context, conn driver.Conn, m *serving.Mart) error {
	var same uint64
	err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ? AND create_table_query = formatQuerySingleLine(?)",
		m.Database, m.Table+ViewSuffix, finalCreate(m)).Scan(&same)
	if err != nil || same > 0 {
		return wrapFinal(m, err)
	}
	engine, err := DatabaseEngine(ctx, conn, m.Database)
	if err != nil {
		return wrapFinal(m, err)
	}
	if engine == "Atomic" || engine == "Replicated" {
		return wrapFinal(m, conn.Exec(ctx, Final(m)))
	}
	// Another database may not replace (rename) a table: drop, then create.
	if err := conn.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s%s SYNC", Name(m, m.Table+ViewSuffix), on(m))); err != nil {
		return wrapFinal(m, err)
	}
	return wrapFinal(m, conn.Exec(ctx, finalDDL(m, "CREATE TABLE ", on(m))))
}

// DatabaseEngine returns the engine of database db ("Atomic", "Replicated", "Ordinary",
// ...): what decides whether a table can be replaced or exchanged in one step.
func DatabaseEngine(ctx context.Context, conn driver.Conn, db string) (string, error) {
	var engine string
	if err := conn.QueryRow(ctx, "SELECT engine FROM system.databases WHERE name = ?", db).Scan(&engine); err != nil {
		return "", fmt.Errorf("engine of database %s: %w", db, err)
	}
	return engine, nil
}

func wrapFinal(m *serving.Mart, err error) error {
	if err != nil {
		return fmt.Errorf("ddl %s final table: %w", m.Name, err)
	}
	return nil
}

// TargetDrift returns the differences of the live <t> from the DDL (empty if <t> does
// not exist yet).
func TargetDrift(ctx context.Context, conn driver.Conn, m *serving.Mart) ([]Change, error) {
	safe, unsafe, err := Diff(ctx, conn, m)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, c := range append(safe, unsafe...) {
		if c.Table == m.Table {
			out = append(out, c)
		}
	}
	return out, nil
}

// Drop removes the mart's tables and view (for --rebuild); the sync state rows are
// the caller's to retire. The key dictionary goes with <t>, whose bitmaps alone hold
// its ids.
func Drop(ctx context.Context, conn driver.Conn, m *serving.Mart) error {
	for _, t := range []string{m.Table + ViewSuffix, m.Table + WindowsSuffix, m.Table + WindowsNextSuffix, m.Table, m.Table + StagingSuffix, m.Table + DetailSuffix, m.Table + PrevSuffix, m.Table + DistSuffix, m.Table + IdsSuffix} {
		// DROP TABLE drops a _final view of an older goldbridge as well.
		if err := conn.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s%s SYNC", Name(m, t), on(m))); err != nil {
			return fmt.Errorf("drop %s: %w", t, err)
		}
	}
	return nil
}
