package main

import (
	"fmt"
	"net/url"
	"strings"
)

// maxQueryLen bounds the SQL text goldbridge query accepts.
const maxQueryLen = 1 << 20

// lakeQuerySettings are the ClickHouse settings every goldbridge query runs with.
//
// optimize_trivial_count_query=0: ClickHouse 26.7.2 (libchdb 26.7.3-stable.1, the newest
// build) answers a bare count() over an Iceberg table (count(*), count() WHERE 1 too)
// from metadata, the records of the data files less the position deletes, ignoring
// equality deletes: an upsert table's replaced versions were counted as rows (ClickHouse
// issue #112347). With the optimization off, the count comes from a read that applies
// the deletes. It is off for every table, not only the ones whose current snapshot has
// deletes: a query can read an older snapshot (SETTINGS iceberg_snapshot_id), which the
// rewrite does not see. On a table without deletes it costs a read of the Parquet
// footers (0.33 s instead of 0.01 s for 100k Bronze rows in 4 files).
func lakeQuerySettings() url.Values {
	return url.Values{"optimize_trivial_count_query": {"0"}}
}

// lakeTable is where ClickHouse's Iceberg reader finds one lake table.
type lakeTable struct {
	Dir      string // the table's directory (its location as a local path)
	Metadata string // the current metadata file, absolute
}

// tableFunction is the ClickHouse Iceberg table function reading t as of its current
// metadata file (not the newest file in the directory: a failed commit may leave one).
func (t lakeTable) tableFunction() string {
	return "icebergLocal(" + sqlString(t.Dir) + ", SETTINGS iceberg_metadata_file_path = " + sqlString(t.Metadata) + ")"
}

// sqlString quotes s as a ClickHouse string literal.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// rewriteLakeSQL replaces every reference to a lake table by name ("silver.orders",
// "`silver`.`orders`") with the Iceberg table function of tables[name]; names inside
// string literals and comments are left alone, as are longer chains (silver.orders.id).
// It returns the rewritten text and the tables it referenced, in order of first use.
func rewriteLakeSQL(sql string, tables map[string]lakeTable) (string, []string, error) {
	if len(sql) > maxQueryLen {
		return "", nil, fmt.Errorf("query is %d bytes, more than the %d allowed", len(sql), maxQueryLen)
	}
	var (
		out  strings.Builder
		used []string
		seen = map[string]bool{}
	)
	out.Grow(len(sql))
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == '\'':
			j, err := skipQuoted(sql, i, '\'')
			if err != nil {
				return "", nil, err
			}
			out.WriteString(sql[i:j])
			i = j
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			out.WriteString(sql[i : i+j])
			i += j
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 {
				return "", nil, fmt.Errorf("unterminated comment at byte %d", i)
			}
			out.WriteString(sql[i : i+2+j+2])
			i += 2 + j + 2
		case c >= '0' && c <= '9':
			j := i
			for j < len(sql) && (isIdentByte(sql[j]) || sql[j] == '.') {
				j++
			}
			out.WriteString(sql[i:j])
			i = j
		case isIdentStart(c) || c == '`' || c == '"':
			parts, j, err := identChain(sql, i)
			if err != nil {
				return "", nil, err
			}
			name := strings.Join(parts, ".")
			t, ok := tables[name]
			if ok && len(parts) == 2 && (i == 0 || sql[i-1] != '.') {
				out.WriteString(t.tableFunction())
				if !seen[name] {
					seen[name] = true
					used = append(used, name)
				}
			} else {
				out.WriteString(sql[i:j])
			}
			i = j
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String(), used, nil
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
