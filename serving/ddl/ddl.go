// Package ddl generates the ClickHouse DDL of a served mart (target table, helper
// tables, the _final table, the sync state table) and checks a live table against it.
//
// Layout of a mart <t> in database <db>:
//
//	<t>            AggregatingMergeTree, one row per key and published partition:
//	               SimpleAggregateFunction columns for sum/count/min/max and avg's
//	               sum and count, AggregateFunction states for distinct counts and
//	               quantiles, then the finished value of each measure finished from
//	               those (FinishedColumns)
//	<t>__staging   same structure, always empty: the template of the table a push
//	               builds its partitions in (serving/push swaps them in)
//	<t>__detail    (AggregatingMergeTree marts) the Gold carrier rows with their
//	               hidden lists, from which the states are built server-side
//	<t>__ids       (a bitmap mart: serving.DistinctBitmap) the key dictionary: the
//	               ids the distinct counts' bitmaps hold (keydict.go)
//	<t>_final      Merge table over <t>: the finished values with Gold's column
//	               names, read as stored (no GROUP BY, no state finalized)
//	_goldbridge_sync  one row per (mart, partition) pushed
package ddl

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
)

// Column is one column of a generated table.
type Column struct {
	Name string
	Type string
}

// SyncTable is the name of the sync state table.
const SyncTable = "_goldbridge_sync"

// Suffixes of the helper tables.
const (
	StagingSuffix = "__staging"
	DetailSuffix  = "__detail"
	ViewSuffix    = "_final"
	// PrevSuffix: the version of <t> before the last exchange (serving/push), kept to
	// build the next version from.
	PrevSuffix = "__prev"
	// DistSuffix: the Distributed table over the nodes' <t> (a cluster).
	DistSuffix = "_dist"
)

// onCluster is the ON CLUSTER name of the mart's DDL: none for a single server or a
// sharded topology, whose nodes each run it themselves.
func onCluster(m *serving.Mart) string {
	if m.Sharded {
		return ""
	}
	return m.Cluster
}

func on(m *serving.Mart) string {
	if onCluster(m) == "" {
		return ""
	}
	return " ON CLUSTER " + serving.Q(m.Cluster)
}

// Name returns db.table quoted.
func Name(m *serving.Mart, table string) string {
	return serving.Q(m.Database) + "." + serving.Q(table)
}

// keyColumns are the ORDER BY columns: grain, level, dimensions, grouping flags.
func keyColumns(m *serving.Mart) []Column {
	cols := []Column{{m.Grain.As, m.GrainType()}, {mart.ColGroupingLevel, "LowCardinality(String)"}}
	for _, d := range m.Dimensions {
		cols = append(cols, Column{d.Name, "Nullable(" + d.Type + ")"})
	}
	for _, d := range m.Dimensions {
		cols = append(cols, Column{mart.GroupingCol(d.Name), "UInt8"})
	}
	return cols
}

// sortingKey is <t>'s ORDER BY: on a single server the level before the grain, so that a
// dashboard's question (one level over a range of grains) reads one run of rows in a
// partition of several grains (serving.partition_by: month) instead of a run per grain:
// on the 10M bench state, months and bitmaps, the 30-day KPIs 5.55 -> 4.5 ms of server
// CPU, distinct customers over 30 days 5.25-6.0 -> 4.1, 7 days by country 5.1 -> 4.5, one
// day unchanged (docs/serving.md). A cluster's tables keep the grain first: changing a
// live table's key needs a rebuild, which a cluster does only by hand (Ensure).
func sortingKey(m *serving.Mart) []Column {
	cols := keyColumns(m)
	if m.Cluster == "" {
		cols[0], cols[1] = cols[1], cols[0]
	}
	return cols
}

func avgCountName(ms serving.Measure) string { return mart.CountCol(ms.Name) }
func avgSumName(ms serving.Measure) string   { return mart.SumCol(ms.Name) }

// StateColumn names the AggregateFunction column of a count_distinct or quantiles measure.
func StateColumn(ms serving.Measure) string { return ms.Name + "__state" }

func quantileArgs(q []float64) string {
	s := make([]string, len(q))
	for i, v := range q {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ", ")
}

// valueType is the served type of a sum, min or max: Nullable, because Gold's value
// is NULL when every input of its group is (SQL's sum/min/max), and a NULL served as 0
// would be a wrong number.
func valueType(ms serving.Measure) string { return "Nullable(" + ms.Type + ")" }

// TargetColumns returns the columns of <t> and <t>__staging, in order: the key, every
// measure a SimpleAggregateFunction or AggregateFunction column of an
// AggregatingMergeTree (storedColumns), then the finished value of each measure that is
// finished from hidden columns or a state (FinishedColumns).
func TargetColumns(m *serving.Mart) []Column {
	return append(storedColumns(m), FinishedColumns(m)...)
}

// storedColumns are the key and the mergeable columns of every measure.
func storedColumns(m *serving.Mart) []Column {
	cols := keyColumns(m)
	for _, ms := range m.Measures {
		cols = append(cols, shapeOf(ms).stored(m, ms)...)
	}
	return cols
}

// Finished reports whether a measure's served value is finished from hidden columns or
// a state (avg, count_distinct, quantiles) and so stored finished in a column of its own,
// under the measure's name: a push writes it with the states, <t>_final reads it as is.
// Each key has exactly one row per published partition (a push builds partitions whole,
// one row per Gold row), so a single-grain read needs no GROUP BY and no state finalized.
func Finished(ms serving.Measure) bool { return ms.Agg.Simple() == "" }

// FinishedColumns are the finished values of the Finished measures: SimpleAggregateFunction
// (any, T) of the type readers see (finishedType), which a merge of the one row per key
// keeps as it is (an AggregatingMergeTree takes no plain column outside its key).
func FinishedColumns(m *serving.Mart) []Column {
	var cols []Column
	for _, ms := range m.Measures {
		if Finished(ms) {
			cols = append(cols, Column{ms.Name, "SimpleAggregateFunction(any, " + finishedType(ms) + ")"})
		}
	}
	return cols
}

// finishedType is the type readers see of a Finished measure (serving.Measure.FinalType;
// an average and a value are NULL over no input, a list is empty).
func finishedType(ms serving.Measure) string {
	switch ms.Agg.Result() {
	case mart.ResultAverage, mart.ResultValue:
		return "Nullable(" + ms.FinalType() + ")"
	}
	return ms.FinalType()
}

// WireColumns returns the columns goldbridge streams from Gold: into <t>__staging for
// an additive mart (all levels, the target's structure), into <t>__detail for a mart
// with a non-additive measure (the rows of the carrier levels, with the hidden lists).
// Names are Gold's.
func WireColumns(m *serving.Mart) []Column {
	if !m.Aggregating() {
		return TargetColumns(m)
	}
	cols := keyColumns(m)
	for _, ms := range m.Measures {
		cols = append(cols, shapeOf(ms).wire(ms)...)
	}
	return cols
}

func columnList(cols []Column) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "    %s %s", serving.Q(c.Name), c.Type)
	}
	return b.String()
}

func names(cols []Column) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = serving.Q(c.Name)
	}
	return strings.Join(s, ", ")
}

// engine is always AggregatingMergeTree, additive marts included: a SummingMergeTree
// deletes, when it merges parts, rows whose summed columns are all NULL (a served row
// lost), whereas SimpleAggregateFunction(sum, Nullable(T)) keeps them
// (TestNullMeasuresServedNull).
func engine(m *serving.Mart, table string, replicated bool) string {
	base := "AggregatingMergeTree"
	var args []string
	if replicated && onCluster(m) != "" {
		base = "Replicated" + base
		args = append([]string{
			serving.QS("/clickhouse/tables/{shard}/" + m.Database + "/" + table), serving.QS("{replica}"),
		}, args...)
	}
	return base + "(" + strings.Join(args, ", ") + ")"
}

func ttlDays(d time.Duration) int64 { return int64((d + 24*time.Hour - 1) / (24 * time.Hour)) }

// Statements returns the DDL that creates everything a mart needs, in order; every
// statement is idempotent (IF NOT EXISTS / OR REPLACE).
func Statements(m *serving.Mart) []string {
	out := []string{
		"CREATE DATABASE IF NOT EXISTS " + serving.Q(m.Database) + on(m),
		SyncTableDDL(m.Database, onCluster(m)),
		createTable(m, m.Table, true, true),
		createTable(m, m.Table+StagingSuffix, false, false),
	}
	if m.Aggregating() {
		out = append(out, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s\n(\n%s\n)\nENGINE = MergeTree\nPARTITION BY %s\nORDER BY tuple()",
			Name(m, m.Table+DetailSuffix), on(m), columnList(WireColumns(m)), m.PartitionExpr()))
	}
	if m.Bitmap() {
		out = append(out, IdsTable(m), idsGeneration(m))
	}
	if m.Cluster != "" {
		out = append(out, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s AS %s\nENGINE = Distributed(%s, %s, %s, rand())",
			Name(m, m.Table+DistSuffix), on(m), Name(m, m.Table), serving.QS(m.Cluster), serving.QS(m.Database), serving.QS(m.Table)))
	}
	out = append(out, Final(m))
	return out
}

// IndexGranularity is the rows per granule of <t>: a question reads whole granules, and
// a grain's rows are few (the bench's day: 1 total, 20 by_country, ~200 detail rows), so
// with ClickHouse's 8192 every read of one level read the states of every level of the
// day. Measured on the 10M bench state (docs/serving.md): 16 rows cut the 30-day
// distinct count 56 -> 40 ms of server CPU (uniqExact), 19 -> 11 ms (bitmap), and the
// 30-day KPIs 13 -> 10 ms; the index of a hot window stays small (a mark per 16 rows).
const IndexGranularity = 16

// TargetTable returns the CREATE TABLE of a table with the structure, engine, TTL and
// settings of <t> but never replicated: the next version of <t> that a push builds
// and exchanges with it.
func TargetTable(m *serving.Mart, table string) string {
	return createTable(m, table, false, true)
}

func createTable(m *serving.Mart, table string, replicated, ttl bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s%s\n(\n%s\n)\nENGINE = %s\nPARTITION BY %s\nORDER BY (%s)",
		Name(m, table), on(m), columnList(TargetColumns(m)), engine(m, table, replicated), m.PartitionExpr(), names(sortingKey(m)))
	if ttl && m.TTL > 0 {
		// toDate32, not toDate: Date wraps grains after 2149-06-06 into the past, and
		// the TTL would delete them at once.
		fmt.Fprintf(&b, "\nTTL toDate32(%s) + toIntervalDay(%d) DELETE", serving.Q(m.Grain.As), ttlDays(m.TTL))
	}
	fmt.Fprintf(&b, "\nSETTINGS allow_nullable_key = 1, index_granularity = %d", IndexGranularity)
	return b.String()
}

// SyncTableDDL creates the sync state table: one row per (mart, partition), the newest
// pushed_at wins; deleted = 1 marks a partition dropped from ClickHouse.
func SyncTableDDL(db, cluster string) string {
	eng := "ReplacingMergeTree(pushed_at)"
	onc := ""
	if cluster != "" {
		onc = " ON CLUSTER " + serving.Q(cluster)
		eng = "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/" + db + "/" + SyncTable + "', '{replica}', pushed_at)"
	}
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s%s
(
    mart LowCardinality(String),
    partition String,
    gold_snapshot_id Int64,
    rows UInt64,
    checksum String,
    deleted UInt8,
    pushed_at DateTime64(6, 'UTC')
)
ENGINE = %s
ORDER BY (mart, partition)`, serving.Q(db), serving.Q(SyncTable), onc, eng)
}

// The _final table. Dashboards read <t>_final: a Merge table over <t> (over <t>_dist
// when sharded) that declares the key columns and each measure's served value under
// Gold's names, in the types readers have always seen (finalColumns). A Merge table
// reads the one table its pattern names as that table's own query does (the WHERE
// reaches <t>'s primary key, one snapshot of <t>'s parts per read, as a view's) and
// converts each column to its declared type, a rename of a SimpleAggregateFunction.
// It replaced a view with the same columns (a SELECT of CASTs): on the 10M bench
// state, one day by country cost the server 4.1 ms a question through the view, 2.7
// through the Merge table and 2.6 read from <t> itself (docs/serving.md).

// Final returns the CREATE OR REPLACE TABLE of <t>_final.
func Final(m *serving.Mart) string { return finalDDL(m, "CREATE OR REPLACE TABLE ", on(m)) }

// finalCreate is <t>_final's CREATE TABLE as system.tables keeps it once formatted (no
// ON CLUSTER): what EnsureFinal compares the live table with.
func finalCreate(m *serving.Mart) string { return finalDDL(m, "CREATE TABLE ", "") }

// finalDDL is <t>_final's statement: verb, the name, cluster (an ON CLUSTER or ""), the body.
func finalDDL(m *serving.Mart, verb, cluster string) string {
	return fmt.Sprintf("%s%s%s\n(\n%s\n)\nENGINE = Merge(%s, %s)", verb, Name(m, m.Table+ViewSuffix), cluster,
		columnList(finalColumns(m)), serving.QS(m.Database), serving.QS(finalPattern(m)))
}

// finalPattern is the Merge table's regular expression: exactly the table it reads.
func finalPattern(m *serving.Mart) string {
	t := m.Table
	if m.Sharded {
		t += DistSuffix
	}
	return "^" + regexp.QuoteMeta(t) + "$"
}

// finalColumns are <t>_final's columns: the grain, the dimensions, the grouping flags,
// the level, then every measure in the plain type of its served value (servedType).
func finalColumns(m *serving.Mart) []Column {
	key := keyColumns(m) // grain, level, dimensions, flags
	cols := append([]Column{key[0]}, key[2:]...)
	cols = append(cols, key[1])
	for _, ms := range m.Measures {
		cols = append(cols, Column{ms.Name, servedType(ms)})
	}
	return cols
}

// FinalSelect is the SELECT of <t>_final's rows over the mart's table named table (<t>
// itself reads one node's rows only): each row as it is stored, one row per key
// (Finished), every measure cast from its SimpleAggregateFunction to its served type.
func FinalSelect(m *serving.Mart, table string) string {
	cols := finalColumns(m)
	nk := len(cols) - len(m.Measures)
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = serving.Q(c.Name)
		if i >= nk {
			sel[i] = "CAST(" + sel[i] + ", " + serving.QS(c.Type) + ") AS " + sel[i]
		}
	}
	return fmt.Sprintf("SELECT\n    %s\nFROM %s", strings.Join(sel, ",\n    "), Name(m, table))
}

// servedType is the plain type of a measure's served value: what sum/min/max over its
// SimpleAggregateFunction column returned, a count's own type, or the Finished type.
func servedType(ms serving.Measure) string {
	switch {
	case Finished(ms):
		return finishedType(ms)
	case ms.Agg == mart.Count:
		return ms.Type
	}
	return valueType(ms)
}

// FinalExpr is the aggregate expression that finishes measure ms over the rows of <t>
// (queries merging several partitions or grain values).
func FinalExpr(m *serving.Mart, ms serving.Measure) string {
	return shapeOf(ms).merge(m, ms)
}

// finishExpr finishes a Finished measure from the stored columns of one row (a push
// that builds the states server-side fills the finished columns with it).
func finishExpr(ms serving.Measure) string {
	if f := shapeOf(ms).finish; f != nil {
		return f(ms)
	}
	return "NULL"
}

// quantilesExpr is the nearest rank on the values arr: element ceil(p*n) of the sorted
// array, as Gold; an empty array over no values (Gold's NULL: ClickHouse has no Nullable
// array), not the zeros that indexing an empty array gives.
func quantilesExpr(ms serving.Measure, arr string) string {
	return fmt.Sprintf("if(empty(%s), CAST([], 'Array(Float64)'), arrayMap(p -> arraySort(%s)[greatest(1, toUInt64(ceil(p * length(%s))))], [%s]))",
		arr, arr, arr, quantileArgs(ms.Quantiles))
}

// avgExpr is the average of sum s over count c, NULL over no input.
func avgExpr(ms serving.Measure, s, c string) string {
	if scale, ok := decimalScale(ms.Type); ok {
		// Exact: divide with one extra digit (truncating), then round half away from
		// zero to s+6 digits, as Gold does. avg()/avgState() of a Decimal is Float64.
		return fmt.Sprintf("if(%s = 0, NULL, toDecimal128(round(toDecimal128(%s, %d) / %s, %d), %d))",
			c, s, scale+7, c, scale+6, scale+6)
	}
	return fmt.Sprintf("if(%s = 0, NULL, %s / %s)", c, s, c)
}

// decimalScale returns S of "Decimal(38, S)".
func decimalScale(t string) (int, bool) {
	var p, s int
	if _, err := fmt.Sscanf(t, "Decimal(%d, %d)", &p, &s); err != nil {
		return 0, false
	}
	return s, true
}

// BuildStates returns the INSERT ... SELECTs that fill partition id of <t>__staging from
// <t>__detail for an AggregatingMergeTree mart (StatesInsert with those tables).
func BuildStates(m *serving.Mart, partitionID string) ([]string, error) {
	return StatesInsert(m, Name(m, m.Table+StagingSuffix), Name(m, m.Table+DetailSuffix),
		"_partition_id = "+serving.QS(partitionID))
}

// StatesInsert returns the INSERT ... SELECTs that fill table into (the target's
// structure) from the carrier rows in table from (WireColumns) for an
// AggregatingMergeTree mart: every grouping level is rebuilt from the rows of its carrier
// level (mart.Level.From) with GROUPING SETS (sums of sums, min of mins, the union of
// the distinct keys as one state), so multi-day merges of the states stay exact; one
// statement per carrier level. where (optional) filters the carrier rows; settings
// (name = value) are added to group_by_use_nulls = 1.
func StatesInsert(m *serving.Mart, into, from, where string, settings ...string) ([]string, error) {
	levels, err := m.Levels()
	if err != nil {
		return nil, fmt.Errorf("mart %s: %w", m.Name, err)
	}
	carriers := mart.Carriers(levels)
	var out []string
	for ci, c := range levels {
		if !c.Carries(ci) {
			continue
		}
		f, w := from, where
		if len(carriers) > 1 {
			// Each carrier level's rows build only the levels merged from it. The filter
			// is applied in a subquery: in the SELECT, grouping_level is the alias of the
			// level computed.
			cond := serving.Q(mart.ColGroupingLevel) + " = " + serving.QS(c.Name)
			if where != "" {
				cond = "(" + where + ") AND " + cond
			}
			f, w = "(SELECT * FROM "+from+" WHERE "+cond+")", ""
		}
		var group []mart.Level
		for _, l := range levels {
			if l.From == ci {
				group = append(group, l)
			}
		}
		out = append(out, statesInsert(m, c, group, into, f, w, settings))
	}
	return out, nil
}

// statesInsert is the INSERT ... SELECT of the levels merged from carrier level c.
func statesInsert(m *serving.Mart, c mart.Level, group []mart.Level, into, from, where string, settings []string) string {
	q := serving.Q
	var sel []string
	sel = append(sel, q(m.Grain.As))
	// A dimension the carrier does not keep is NULL and rolled up in all its levels.
	kept := func(i int) bool { return slices.Contains(c.Keep, i) }
	for i, d := range m.Dimensions {
		if kept(i) {
			sel = append(sel, q(d.Name))
		} else {
			sel = append(sel, "NULL AS "+q(d.Name))
		}
	}
	var flags []string
	allKept := make([]string, len(m.Dimensions))
	noneKept := make([]string, len(m.Dimensions))
	for i, d := range m.Dimensions {
		if !kept(i) {
			sel = append(sel, "toUInt8(1) AS "+q(mart.GroupingCol(d.Name)))
			flags = append(flags, "''")
			allKept[i], noneKept[i] = "0", "1"
			continue
		}
		sel = append(sel, "toUInt8(grouping("+q(d.Name)+")) AS "+q(mart.GroupingCol(d.Name)))
		flags = append(flags, fmt.Sprintf("if(grouping(%s) = 0, %s, '')", q(d.Name), serving.QS(d.Name)))
		allKept[i] = "grouping(" + q(d.Name) + ") = 0"
		noneKept[i] = "grouping(" + q(d.Name) + ") = 1"
	}
	level := serving.QS(mart.LevelDetail)
	if len(m.Dimensions) > 0 {
		level = fmt.Sprintf("multiIf(%s, %s, %s, %s, concat('by_', arrayStringConcat(arrayFilter(x -> x != '', [%s]), '_')))",
			strings.Join(allKept, " AND "), serving.QS(mart.LevelDetail), strings.Join(noneKept, " AND "), serving.QS(mart.LevelTotal), strings.Join(flags, ", "))
	}
	sel = append(sel, level+" AS "+q(mart.ColGroupingLevel))
	for _, ms := range m.Measures {
		sel = append(sel, shapeOf(ms).build(m, ms)...)
	}
	var sets []string
	for _, lv := range group {
		s := []string{q(m.Grain.As)}
		for _, d := range lv.Keep {
			s = append(s, q(m.Dimensions[d].Name))
		}
		sets = append(sets, "("+strings.Join(s, ", ")+")")
	}
	cols := []Column{{Name: m.Grain.As}}
	for _, d := range m.Dimensions {
		cols = append(cols, Column{Name: d.Name})
	}
	for _, d := range m.Dimensions {
		cols = append(cols, Column{Name: mart.GroupingCol(d.Name)})
	}
	cols = append(cols, Column{Name: mart.ColGroupingLevel})
	cols = append(cols, storedColumns(m)[len(keyColumns(m)):]...)
	with := ""
	if m.Bitmap() {
		with = idsWith(m, from, where)
	}
	if where != "" {
		where = "\nWHERE " + where
	}
	inner := with + fmt.Sprintf("SELECT\n    %s\nFROM %s%s\nGROUP BY GROUPING SETS (%s)", strings.Join(sel, ",\n    "), from, where, strings.Join(sets, ", "))
	// The finished values from the states and sums of each row built.
	fin := FinishedColumns(m)
	outer := []string{names(cols)}
	for _, ms := range m.Measures {
		if Finished(ms) {
			outer = append(outer, finishExpr(ms)+" AS "+q(ms.Name))
		}
	}
	return fmt.Sprintf("INSERT INTO %s (%s)\nSELECT %s\nFROM (%s)\nSETTINGS %s",
		into, names(append(cols, fin...)), strings.Join(outer, ", "), inner,
		strings.Join(append([]string{"group_by_use_nulls = 1"}, settings...), ", "))
}
