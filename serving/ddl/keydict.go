package ddl

import (
	"context"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
)

// The key dictionary of a bitmap mart (serving.DistinctBitmap): <t>__ids numbers every
// distinct-count key the mart's states hold, by the key's SipHash-128 (the hash
// uniqExact keeps of it, so exact as uniqExact is), from 1 up in the order keys first
// arrive. A count_distinct state is then a groupBitmap of the ids: ClickHouse merged 30
// daily bitmaps of the 10M bench in ~a third of the server CPU of 30 uniqExact hash
// sets, and stores them in a seventh of the space (docs/serving.md).
//
// Promise: an id, once given, keeps its key for as long as a row of <t> holds it, so a
// bitmap merged across grain values and pushes counts each key once. AssignIds only
// adds keys (a crash leaves ids no state holds yet, harmless); CompactIds, run with no
// push in progress, keeps only the ids some row of <t> holds. The dictionary holds
// hashes, never keys: what uniqExact states hold too.
//
// A dictionary made anew (dropped by hand) would give its first ids again, which rows of
// <t> hold for other keys. So each dictionary has a generation, a random number in its
// row of id 0 (no key's id), and every push names it in <t>'s comment after publishing
// (DictionaryComment); a <t> with rows whose comment names another is rebuilt (Ensure),
// and stays so named until a rebuild has been published, crash or not.

// IdsSuffix names the key dictionary of a bitmap mart; IdsNextSuffix the dictionary a
// compaction builds (CompactIds).
const (
	IdsSuffix     = "__ids"
	IdsNextSuffix = "__ids_next"
)

// bitmapType is the stored type of a bitmap distinct count.
const bitmapType = "AggregateFunction(groupBitmap, UInt32)"

// idsAlias is the WITH alias of the (hashes, ids) arrays a states build looks keys up in.
const idsAlias = "__gb_ids"

// keyHash is the dictionary's hash of the key expression k: uniqExact(String)'s.
func keyHash(k string) string { return "reinterpretAsUInt128(sipHash128(" + k + "))" }

// IdsTable returns the CREATE TABLE of the mart's key dictionary.
func IdsTable(m *serving.Mart) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s\n(\n    h UInt128,\n    id UInt32\n)\nENGINE = MergeTree\nORDER BY h", Name(m, m.Table+IdsSuffix))
}

// idsGeneration is the statement that gives a new dictionary its generation (the row
// of id 0) and leaves one that has it as it is.
func idsGeneration(m *serving.Mart) string {
	ids := Name(m, m.Table+IdsSuffix)
	return fmt.Sprintf("INSERT INTO %s (h, id) SELECT reinterpretAsUInt128(generateUUIDv4()), 0 FROM system.one WHERE (SELECT count() FROM %s WHERE id = 0) = 0", ids, ids)
}

// Generation reads the generation of the mart's key dictionary.
func Generation(ctx context.Context, conn driver.Conn, m *serving.Mart) (string, error) {
	var gen string
	if err := conn.QueryRow(ctx, "SELECT toString(h) FROM "+Name(m, m.Table+IdsSuffix)+" WHERE id = 0").Scan(&gen); err != nil {
		return "", fmt.Errorf("generation of the key dictionary of %s: %w", m.Name, err)
	}
	return gen, nil
}

// DictionaryComment is the comment of a <t> whose bitmaps hold ids of the dictionary of
// generation gen.
func DictionaryComment(gen string) string { return "goldbridge key dictionary " + gen }

// MarkDictionary returns the ALTER that names the dictionary of generation gen in
// table's comment (a push, after publishing into it).
func MarkDictionary(m *serving.Mart, table, gen string) string {
	return "ALTER TABLE " + Name(m, table) + " MODIFY COMMENT " + serving.QS(DictionaryComment(gen))
}

// allKeys is the array of every distinct-count key of a carrier row.
func allKeys(m *serving.Mart) string {
	var cols []string
	for _, ms := range m.Measures {
		if ms.Agg == mart.CountDistinct {
			cols = append(cols, serving.Q(mart.KeysCol(ms.Name)))
		}
	}
	if len(cols) == 1 {
		return cols[0]
	}
	return "arrayConcat(" + strings.Join(cols, ", ") + ")"
}

// AssignIds returns the INSERT that gives the next ids to the keys of the carrier rows
// in table from (WireColumns) that the dictionary does not hold. An id past UInt32 fails
// the insert (accurateCast) rather than wrap onto another key's.
func AssignIds(m *serving.Mart, from string) string {
	ids := Name(m, m.Table+IdsSuffix)
	return fmt.Sprintf(`INSERT INTO %[1]s (h, id)
SELECT h, accurateCast((SELECT max(id) FROM %[1]s) + row_number() OVER (ORDER BY h), 'UInt32')
FROM (SELECT DISTINCT %[2]s AS h FROM %[3]s ARRAY JOIN %[4]s AS k)
WHERE h NOT IN (SELECT h FROM %[1]s)`, ids, keyHash("k"), from, allKeys(m))
}

// idsWith is the WITH clause of a states build over the carrier rows of from (where
// filters them, may be empty): the dictionary's entries for their keys, as two arrays
// for transform.
func idsWith(m *serving.Mart, from, where string) string {
	if where != "" {
		where = " WHERE " + where
	}
	return fmt.Sprintf("WITH (SELECT (groupArray(h), groupArray(id)) FROM %s WHERE h IN (SELECT %s FROM %s%s)) AS %s\n",
		Name(m, m.Table+IdsSuffix), keyHash("arrayJoin("+allKeys(m)+")"), from, where, idsAlias)
}

// bitmapBuild is the state of a bitmap distinct count from a carrier row's keys column
// keys, under idsWith. A key missing from the dictionary would be id 0, the
// generation's row, never a key's: check finds it (its hash is no key's of Gold).
func bitmapBuild(keys string) string {
	return fmt.Sprintf("CAST(groupBitmapArrayState(arrayMap(k -> transform(%s, %s.1, %s.2, toUInt32(0)), %s)), '%s')",
		keyHash("k"), idsAlias, idsAlias, keys, bitmapType)
}

// HashesWith is the WITH clause BitmapHashes needs: the whole dictionary, ids to hashes.
func HashesWith(m *serving.Mart) string {
	return fmt.Sprintf("WITH (SELECT (groupArray(id), groupArray(h)) FROM %s) AS %s\n", Name(m, m.Table+IdsSuffix), idsAlias)
}

// BitmapHashes is the array of the key hashes of the bitmap state column col (under
// HashesWith): what a uniqExact state of the same keys holds.
func BitmapHashes(col string) string {
	// transform maps to numbers up to 64 bits: an id to its position in the arrays.
	return fmt.Sprintf("arrayMap(i -> %[1]s.2[transform(i, %[1]s.1, arrayEnumerate(%[1]s.1), 0)], bitmapToArray(%[2]s))", idsAlias, col)
}

// CompactIds returns the statements that rebuild the dictionary with only the ids a
// row of <t> holds (and its generation), swapped in by one EXCHANGE, the old one
// dropped with SYNC (its data deleted now: a forget's purge). A crash leaves either
// dictionary whole, and the leftover table is dropped by the next run (push.Cleanup,
// or the next compaction). In a database that cannot EXCHANGE (exchange false) it is
// one mutation that deletes the ids no row holds; ClickHouse deletes the parts it
// replaces after old_parts_lifetime. Run it with no push in progress.
func CompactIds(m *serving.Mart, exchange bool) []string {
	ids, next := Name(m, m.Table+IdsSuffix), Name(m, m.Table+IdsNextSuffix)
	var held []string
	for _, ms := range m.Measures {
		if ms.Agg == mart.CountDistinct {
			held = append(held, fmt.Sprintf("SELECT arrayJoin(bitmapToArray(groupBitmapMergeState(%s))) FROM %s", serving.Q(StateColumn(ms)), Name(m, m.Table)))
		}
	}
	if !exchange {
		return []string{fmt.Sprintf("ALTER TABLE %s DELETE WHERE id != 0 AND id NOT IN (%s) SETTINGS mutations_sync = 2", ids, strings.Join(held, " UNION DISTINCT "))}
	}
	return []string{
		"DROP TABLE IF EXISTS " + next + " SYNC",
		"CREATE TABLE " + next + " AS " + ids,
		fmt.Sprintf("INSERT INTO %s SELECT h, id FROM %s WHERE id = 0 OR id IN (%s)", next, ids, strings.Join(held, " UNION DISTINCT ")),
		"EXCHANGE TABLES " + ids + " AND " + next,
		"DROP TABLE " + next + " SYNC",
	}
}
