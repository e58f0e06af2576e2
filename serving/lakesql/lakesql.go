// Package lakesql rewrites a query over the lake's tables, named as in the catalog
// (silver.orders), into ClickHouse SQL that reads each through ClickHouse's Iceberg reader
// at its current metadata file or, with FOR VERSION|TIMESTAMP AS OF or a global as-of,
// at a past snapshot. It tokenizes only what it must (quotes, comments, identifiers), so
// a name inside a string or a comment is left alone; input is bounded (MaxQueryLen) and
// fuzzed (FuzzRewriteLakeSQL). goldbridge query is its user.
package lakesql

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"goldbridge/lakehouse/asof"
)

// MaxQueryLen bounds the SQL text goldbridge query accepts.
const MaxQueryLen = 1 << 20

// QuerySettings are the ClickHouse settings every goldbridge query runs with.
//
// optimize_trivial_count_query=0: ClickHouse 26.7.2 (libchdb 26.7.3-stable.1, the newest
// build) answers a bare count() over an Iceberg table (count(*), count() WHERE 1 too)
// from metadata, the records of the data files less the position deletes, ignoring
// equality deletes: an upsert table's replaced versions were counted as rows (ClickHouse
// issue #112347). With the optimization off, the count comes from a read that applies
// the deletes. It is off for every table, not only the ones whose current snapshot has
// deletes: a query can read an older snapshot (--as-of, FOR ... AS OF, or its own
// SETTINGS iceberg_snapshot_id), whose deletes the current metadata does not show. On
// a table without deletes it costs a read of the Parquet footers (0.33 s instead of
// 0.01 s for 100k Bronze rows in 4 files).
func QuerySettings() url.Values {
	return url.Values{"optimize_trivial_count_query": {"0"}}
}

// Table is where ClickHouse's Iceberg reader finds one lake table.
type Table struct {
	Dir      string // the table's directory (its location as a local path)
	Metadata string // the current metadata file, absolute
}

// TableFunction is the ClickHouse Iceberg table function reading t as of its current
// metadata file (not the newest file in the directory: a failed commit may leave one).
func (t Table) TableFunction() string {
	return "icebergLocal(" + quote(t.Dir) + ", SETTINGS iceberg_metadata_file_path = " + quote(t.Metadata) + ")"
}

// quote quotes s as a ClickHouse string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// AsOf are the reads of past snapshots in a query: Global, goldbridge query's
// --as-of, for every lake table named without a clause of its own ("FOR VERSION AS OF
// <snapshot id>", "FOR TIMESTAMP AS OF '<RFC 3339>'" after the name); Resolve turns a
// table's reference into the snapshot id to read. The zero value reads current
// snapshots only (a clause is then an error).
type AsOf struct {
	Global  *asof.Ref
	Resolve func(name string, r asof.Ref) (int64, error)
}

// Rewrite replaces every reference to a lake table by name ("silver.orders",
// "`silver`.`orders`") with the Iceberg table function of tables[name], and a reference
// read as of a snapshot (see AsOf) with a subquery reading that snapshot;
// names inside string literals and comments are left alone, as are longer chains
// (silver.orders.id). It returns the rewritten text and the tables it referenced, in
// order of first use.
func Rewrite(sql string, tables map[string]Table, opt AsOf) (string, []string, error) {
	if len(sql) > MaxQueryLen {
		return "", nil, fmt.Errorf("query is %d bytes, more than the %d allowed", len(sql), MaxQueryLen)
	}
	resolve := opt.Resolve
	if resolve == nil {
		resolve = func(string, asof.Ref) (int64, error) {
			return 0, errors.New("FOR ... AS OF: past snapshots are not read here")
		}
	}
	if opt.Global != nil && !opt.Global.IsTime() {
		// A first pass, resolving nothing, finds the tables the snapshot id applies to:
		// an id is one table's.
		dry := rewriter{tables: tables, ref: opt.Global, resolve: func(string, asof.Ref) (int64, error) { return 0, nil }}
		if err := dry.rewrite(sql); err != nil {
			return "", nil, err
		}
		if len(dry.global) > 1 {
			return "", nil, fmt.Errorf("--as-of %d names a snapshot of one table, and the query reads %s without a clause of their own: use --as-of with a time, or FOR VERSION AS OF <snapshot id> after each table",
				opt.Global.ID, strings.Join(dry.global, " and "))
		}
	}
	r := rewriter{tables: tables, ref: opt.Global, resolve: resolve}
	if err := r.rewrite(sql); err != nil {
		return "", nil, err
	}
	return r.out.String(), r.used, nil
}

// rewriter is one rewrite of a query (Rewrite).
type rewriter struct {
	tables   map[string]Table
	ref      *asof.Ref // global: the --as-of of tables without a clause, or nil
	resolve  func(name string, r asof.Ref) (int64, error)
	out      strings.Builder
	used     []string // the tables referenced, in order of first use
	global   []string // the tables the global reference applies to, in order of first use
	asOf     bool     // a table is read as of a past snapshot
	settings bool     // the query names ClickHouse's own time-travel settings
}

func (r *rewriter) rewrite(sql string) error {
	r.out.Grow(len(sql))
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == '\'':
			j, err := skipQuoted(sql, i, '\'')
			if err != nil {
				return err
			}
			r.out.WriteString(sql[i:j])
			i = j
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			r.out.WriteString(sql[i : i+j])
			i += j
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 {
				return fmt.Errorf("unterminated comment at byte %d", i)
			}
			r.out.WriteString(sql[i : i+2+j+2])
			i += 2 + j + 2
		case c >= '0' && c <= '9':
			j := i
			for j < len(sql) && (isIdentByte(sql[j]) || sql[j] == '.') {
				j++
			}
			r.out.WriteString(sql[i:j])
			i = j
		case isIdentStart(c) || c == '`' || c == '"':
			j, err := r.name(sql, i)
			if err != nil {
				return err
			}
			i = j
		default:
			r.out.WriteByte(c)
			i++
		}
	}
	if r.asOf && r.settings {
		return fmt.Errorf("the query sets %s or %s itself, and reads a table as of a snapshot: goldbridge sets them per table; drop the setting", settingSnapshotID, settingTimestamp)
	}
	return nil
}

// ClickHouse's time-travel settings of its Iceberg reader (a query-level setting; 26.7
// refuses them among a table function's SETTINGS, and applies a subquery's to that
// subquery only).
const (
	settingSnapshotID = "iceberg_snapshot_id"
	settingTimestamp  = "iceberg_timestamp_ms"
)

// name rewrites the identifier chain at sql[i:] and returns the index after it (and
// after its as-of clause).
func (r *rewriter) name(sql string, i int) (int, error) {
	parts, j, err := identChain(sql, i)
	if err != nil {
		return 0, err
	}
	name := strings.Join(parts, ".")
	if len(parts) == 1 && (strings.EqualFold(name, settingSnapshotID) || strings.EqualFold(name, settingTimestamp)) {
		r.settings = true
	}
	t, ok := r.tables[name]
	if !ok || len(parts) != 2 || i > 0 && sql[i-1] == '.' {
		r.out.WriteString(sql[i:j])
		return j, nil
	}
	if !slices.Contains(r.used, name) {
		r.used = append(r.used, name)
	}
	ref, end, clause, err := asOfClause(sql, j)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if !clause && r.ref != nil {
		ref = *r.ref
		if !slices.Contains(r.global, name) {
			r.global = append(r.global, name)
		}
	}
	if !clause && r.ref == nil {
		r.out.WriteString(t.TableFunction())
		return j, nil
	}
	r.asOf = true
	id, err := r.resolve(name, ref)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(&r.out, "(SELECT * FROM %s SETTINGS %s = %d)", t.TableFunction(), settingSnapshotID, id)
	return end, nil
}

// asOfClause reads "FOR VERSION AS OF <snapshot id>" or "FOR TIMESTAMP AS OF '<RFC 3339
// time>'" (keywords in any case) after a lake table's name, at sql[i:]; ok is false when
// no FOR follows.
func asOfClause(sql string, i int) (ref asof.Ref, end int, ok bool, err error) {
	j, isFor := keyword(sql, skipSpace(sql, i), "FOR")
	if !isFor {
		return asof.Ref{}, i, false, nil
	}
	bad := fmt.Errorf("at byte %d: want FOR VERSION AS OF <snapshot id> or FOR TIMESTAMP AS OF '<RFC 3339 time>'", i)
	kind := ""
	for _, k := range []string{"VERSION", "TIMESTAMP"} {
		if e, ok := keyword(sql, skipSpace(sql, j), k); ok {
			kind, j = k, e
			break
		}
	}
	for _, k := range []string{"AS", "OF"} {
		var ok bool
		if j, ok = keyword(sql, skipSpace(sql, j), k); !ok || kind == "" {
			return asof.Ref{}, 0, false, bad
		}
	}
	j = skipSpace(sql, j)
	var text string
	switch e := j; {
	case kind == "VERSION":
		for e < len(sql) && (sql[e] >= '0' && sql[e] <= '9' || e == j && sql[e] == '-') {
			e++
		}
		if e == j || sql[e-1] == '-' || e < len(sql) && isIdentByte(sql[e]) {
			return asof.Ref{}, 0, false, bad
		}
		text, j = sql[j:e], e
	case j < len(sql) && sql[j] == '\'':
		if e, err = skipQuoted(sql, j, '\''); err != nil {
			return asof.Ref{}, 0, false, err
		}
		text, j = sql[j+1:e-1], e
	default:
		return asof.Ref{}, 0, false, bad
	}
	if ref, err = asof.Parse(text); err != nil {
		return asof.Ref{}, 0, false, err
	}
	if ref.IsTime() != (kind == "TIMESTAMP") {
		return asof.Ref{}, 0, false, bad
	}
	return ref, j, true, nil
}

// keyword reports whether sql[i:] starts with the word k (any case), and the index after it.
func keyword(sql string, i int, k string) (int, bool) {
	e := i + len(k)
	if e > len(sql) || !strings.EqualFold(sql[i:e], k) || e < len(sql) && isIdentByte(sql[e]) {
		return i, false
	}
	return e, true
}

// skipSpace returns the index of the first byte from i on that is not white space.
func skipSpace(sql string, i int) int {
	for i < len(sql) && strings.IndexByte(" \t\r\n", sql[i]) >= 0 {
		i++
	}
	return i
}

// identChain reads identifiers joined by dots (no spaces) from sql[i:], returning their
// unquoted names and the index after the chain.
func identChain(sql string, i int) ([]string, int, error) {
	var parts []string
	for {
		name, j, err := ident(sql, i)
		if err != nil {
			return nil, 0, err
		}
		parts = append(parts, name)
		if j+1 < len(sql) && sql[j] == '.' && (isIdentStart(sql[j+1]) || sql[j+1] == '`' || sql[j+1] == '"') {
			i = j + 1
			continue
		}
		return parts, j, nil
	}
}

// ident reads one identifier, bare or quoted with ` or ", from sql[i:].
func ident(sql string, i int) (string, int, error) {
	if q := sql[i]; q == '`' || q == '"' {
		j, err := skipQuoted(sql, i, q)
		if err != nil {
			return "", 0, err
		}
		inner := sql[i+1 : j-1]
		inner = strings.ReplaceAll(inner, string([]byte{q, q}), string(q))
		inner = strings.ReplaceAll(inner, `\`+string(q), string(q))
		return inner, j, nil
	}
	j := i
	for j < len(sql) && isIdentByte(sql[j]) {
		j++
	}
	return sql[i:j], j, nil
}

// skipQuoted returns the index after the quoted text starting at sql[i] (quote q;
// a doubled quote or a backslash escapes).
func skipQuoted(sql string, i int, q byte) (int, error) {
	for j := i + 1; j < len(sql); j++ {
		switch sql[j] {
		case '\\':
			j++
		case q:
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated %c at byte %d", q, i)
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentByte(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') || c == '$' }
