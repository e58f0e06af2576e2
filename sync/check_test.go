package sync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/gold"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// sipHash64 in Go (the row fingerprints of Check) is ClickHouse's.
func TestSipHash64MatchesClickHouse(t *testing.T) {
	db := chtest.Database(t)
	c := client(t, db)
	var in []string
	for n := range 40 {
		in = append(in, strings.Repeat("x", n), fmt.Sprintf("%d:ä€;%d", n, n*n))
	}
	for _, s := range in {
		want := scalar[uint64](t, c, "SELECT sipHash64("+serving.QS(s)+")")
		if got := gbsync.SipHash64([]byte(s)); got != want {
			t.Fatalf("sipHash64(%q) = %d, ClickHouse %d", s, got, want)
		}
	}
}

// The digest of a served state (check's comparison of states) is the same from the
// state's bytes in Go and from the state in ClickHouse (through groupArray, and through
// groupUniqArray past the limit), and equals the one of the keys' sipHash128 or of the
// values, computed by ClickHouse over the inputs.
func TestStateDigestMatchesClickHouse(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	tbl := serving.Q(db) + ".st"
	for _, q := range []string{
		"CREATE TABLE " + tbl + " (k UInt64, u AggregateFunction(uniqExact, String), q AggregateFunction(groupArray, Float64), want_u String, want_q String) ENGINE = Memory",
		// Row k: the keys and values of the numbers n < 3000 with n % 7 = k, k = 6 none.
		"INSERT INTO " + tbl + ` SELECT k, uniqExactStateIf(key, keep), groupArrayStateIf(v, keep),
			concat(toString(countIf(keep)), ':', toString(sumIf(sipHash64(sipHash128(key)), keep))),
			concat(toString(countIf(keep)), ':', toString(sumIf(sipHash64(v), keep)))
			FROM (SELECT number % 7 AS k, concat('key-', toString(number)) AS key, if(number % 11 = 0, -0., number / 3) AS v, k < 6 AS keep FROM numbers(3000))
			GROUP BY k`,
	} {
		if err := c.Conn().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := c.Conn().Query(ctx, fmt.Sprintf("SELECT k, CAST(u AS String), CAST(q AS String), want_u, want_q, %s, %s, %s FROM %s ORDER BY k",
		gbsync.StateDigestSQL("u", true, 1000), gbsync.StateDigestSQL("u", true, 100), gbsync.StateDigestSQL("q", false, 0), tbl))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var k uint64
		var u, q, wantU, wantQ, sqlU, sqlUniqU, sqlQ string
		if err := rows.Scan(&k, &u, &q, &wantU, &wantQ, &sqlU, &sqlUniqU, &sqlQ); err != nil {
			t.Fatal(err)
		}
		goU, err := gbsync.StateDigest([]byte(u), 16)
		if err != nil {
			t.Fatal(err)
		}
		goQ, err := gbsync.StateDigest([]byte(q), 8)
		if err != nil {
			t.Fatal(err)
		}
		if goU != wantU || sqlU != wantU || sqlUniqU != wantU || goQ != wantQ || sqlQ != wantQ {
			t.Fatalf("row %d: uniqExact Go %s, ClickHouse %s / %s, want %s; groupArray Go %s, ClickHouse %s, want %s",
				k, goU, sqlU, sqlUniqU, wantU, goQ, sqlQ, wantQ)
		}
		n++
	}
	if err := rows.Err(); err != nil || n != 7 {
		t.Fatalf("%d rows: %v", n, err)
	}
}

// TestCheckCleanByInput: a mart with every aggregate over a decimal, an integer or a
// double column, served through each state path: <t>_final equals ClickHouse GROUPING
// SETS over the live Silver rows (doubles summed in another order within 1e-9), and
// check finds no drift. An average over integers is a double to its readers although
// its hidden sum is Int64: check compares it as a double.
func TestCheckCleanByInput(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	oracleTable(t, lh, c, db)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	dims := []string{"country", "category"}
	levels := [][]string{dims, {"country"}, {}}
	for _, v := range allInputs {
		in := inputs{"revenue": v, "avg_amount": v, "max_amount": v, "p_amount": v, "big_paid_revenue": v}
		spec := withInputs(groupingMart("in_"+v.col, "rollup", nil), in)
		if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
			t.Fatalf("%s: gold: %v", v.col, err)
		}
		tbl, err := lh.LoadTable(ctx, spec.Table)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			distinct     string
			serverStates bool
		}{{"uniqExact", false}, {"uniqExact", true}, {"uniq", false}, {serving.DistinctBitmap, true}} {
			t.Run(fmt.Sprintf("%s/%s/server=%v", v.col, p.distinct, p.serverStates), func(t *testing.T) {
				m := servedMart(db, spec, p.distinct)
				m.Table = fmt.Sprintf("%s_%s_%v", spec.Name, p.distinct, p.serverStates)
				if _, err := gbsync.Sync(ctx, chtarget.WithServerStates(chtarget.NewClickHouse(c), p.serverStates), m, tbl, gbsync.Options{Now: clock}); err != nil {
					t.Fatal(err)
				}
				want := oracleQueryRows(t, c, db, oracleQuery{distinct: p.distinct, grain: "toDate(created_at)", dims: dims, levels: levels, in: in})
				if got := servedRows(t, c, m); len(want) == 0 || !sameRows(got, want) {
					t.Fatalf("_final (%d rows) != GROUPING SETS over Silver (%d rows)\n%s", len(got), len(want), diffRows(got, want))
				}
				if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
					t.Fatalf("check of correct data: %v %v", drifts, err)
				}
			})
		}
	}
}

// TestCheckRowExact: on a mart with every aggregate (timestamps' min and max too) over
// the demo orders, check is clean; then each tamper, on a fresh state, is drift naming
// the partition, and the repair (sync of the drifting partitions) makes check clean and
// <t>_final equal, row for row, to what it was (Gold's rows).
func TestCheckRowExact(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	spec := groupingMart("tamper", "rollup", nil)
	ts := silverType("timestamp")
	spec.Measures = append(spec.Measures,
		gold.MeasureSpec{Name: "first_order_at", Agg: "min", Column: "created_at", InputType: ts},
		gold.MeasureSpec{Name: "last_order_at", Agg: "max", Column: "created_at", InputType: ts})
	if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, spec.Table)
	if err != nil {
		t.Fatal(err)
	}
	m := servedMart(db, spec, "uniqExact")
	if err := m.CheckSchema(tbl.Schema()); err != nil {
		t.Fatal(err)
	}
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check of a fresh sync: %v %v", drifts, err)
	}
	target := fmt.Sprintf("%s.%s", serving.Q(db), serving.Q(m.Table))
	dump := func() string {
		return scalar[string](t, c, fmt.Sprintf("SELECT arrayStringConcat(groupArray(formatRow('TSV', *)), '') FROM (SELECT * FROM %s.%s ORDER BY ALL)", serving.Q(db), serving.Q(m.Table+"_final")))
	}
	want := dump()
	// The partition with most rows, two of its countries and two of its detail rows.
	p := scalar[string](t, c, fmt.Sprintf("SELECT _partition_id FROM %s GROUP BY 1 ORDER BY count() DESC, 1 LIMIT 1", target))
	pick := func(q string) []string {
		s := scalar[string](t, c, fmt.Sprintf("SELECT arrayStringConcat(groupArray(x), '|') FROM (SELECT %s AS x FROM %s WHERE _partition_id = '%s' AND %s LIMIT 2)", strings.SplitN(q, " WHERE ", 2)[0], target, p, strings.SplitN(q, " WHERE ", 2)[1]))
		return strings.Split(s, "|")
	}
	countries := pick("country WHERE grouping_level = 'by_country' AND country IS NOT NULL ORDER BY country")
	details := pick("concat(country, '/', category) WHERE grouping_level = 'detail' AND country IS NOT NULL AND category IS NOT NULL ORDER BY country, category")
	if len(countries) < 2 || len(details) < 2 {
		t.Fatalf("partition %s: countries %v, detail rows %v", p, countries, details)
	}
	// The detail row with most orders (the quantile tamper needs 3 values or more, so
	// that it can change the smallest without changing the row's quantiles).
	busiest := pick("concat(country, '/', category) WHERE grouping_level = 'detail' AND country IS NOT NULL AND category IS NOT NULL AND orders >= 3 ORDER BY orders DESC, country, category")
	if busiest[0] == "" {
		t.Fatalf("partition %s: no detail row with 3 orders", p)
	}
	details = append(details, busiest[0])
	byCountry := func(i int) string {
		return fmt.Sprintf("grouping_level = 'by_country' AND country = %s", serving.QS(countries[i]))
	}
	detail := func(i int) string {
		co, ca, _ := strings.Cut(details[i], "/")
		return fmt.Sprintf("grouping_level = 'detail' AND country = %s AND category = %s", serving.QS(co), serving.QS(ca))
	}
	// rewrite replaces partition p of <t> by its rows with the REPLACE expressions
	// applied, keeping the rows matching where.
	rewrite := func(replace, where string) []string {
		if replace != "" {
			replace = " REPLACE (" + replace + ")"
		}
		tmp := serving.Q(db) + "." + serving.Q(m.Table+"_t")
		return []string{
			"DROP TABLE IF EXISTS " + tmp,
			"CREATE TABLE " + tmp + " AS " + target,
			fmt.Sprintf("INSERT INTO %s SELECT *%s FROM %s WHERE _partition_id = '%s' AND %s", tmp, replace, target, p, where),
			fmt.Sprintf("ALTER TABLE %s REPLACE PARTITION ID '%s' FROM %s", target, p, tmp),
		}
	}
	// These tampers leave every value of <t>_final as it was (it reads the finished
	// values, not the states): only merges of the tampered state with other days would
	// differ, and check finds them by the states' digests.
	sameFinal := map[string]bool{"uniqexact_same_count": true, "quantile_same_result": true,
		"uniqexact_state": true, "uniqexact_state_update": true, "quantile": true}
	for _, tc := range []struct {
		name string
		sql  []string
	}{
		{"compensating_dimension_values", rewrite(fmt.Sprintf("multiIf(%s, revenue + 1000, %s, revenue - 1000, revenue) AS revenue", byCountry(0), byCountry(1)), "1")},
		{"moved_between_detail_rows", rewrite(fmt.Sprintf("multiIf(%s, revenue + 100, %s, revenue - 100, revenue) AS revenue", detail(0), detail(1)), "1")},
		{"swapped_dimension_value", rewrite(fmt.Sprintf("multiIf(country = %s, %s, country = %s, %s, country) AS country",
			serving.QS(countries[0]), serving.QS(countries[1]), serving.QS(countries[1]), serving.QS(countries[0])), "1")},
		{"uniqexact_state", rewrite(fmt.Sprintf("if(%s, arrayReduce('uniqExactState', arrayMap(i -> toString(i), range(1000))), customers__state) AS customers__state", detail(0)), "1")},
		{"uniqexact_state_update", []string{fmt.Sprintf("ALTER TABLE %s UPDATE customers__state = arrayReduce('uniqExactState', arrayMap(i -> toString(i), range(1000))) WHERE _partition_id = '%s' AND %s SETTINGS mutations_sync = 2", target, p, byCountry(0))}},
		{"sum_if", rewrite(fmt.Sprintf("if(%s, big_paid_revenue + 0.01, big_paid_revenue) AS big_paid_revenue", detail(0)), "1")},
		{"count_if_moved", rewrite(fmt.Sprintf("multiIf(%s, big_paid + 1, %s, big_paid - 1, big_paid) AS big_paid", detail(0), detail(1)), "1")},
		{"quantile", rewrite(fmt.Sprintf("if(%s, arrayReduce('groupArrayState', [toFloat64(12345.67)]), p_amount__state) AS p_amount__state", detail(0)), "1")},
		// As many other keys: the row's distinct count is unchanged, a merge with other
		// days is not.
		{"uniqexact_same_count", rewrite(fmt.Sprintf("if(%s, arrayReduce('uniqExactState', arrayMap(i -> concat('other-', toString(i)), range(finalizeAggregation(customers__state)))), customers__state) AS customers__state", detail(2)), "1")},
		// The smallest value 1 lower: the row's quantiles (ranks 2 and up) are unchanged.
		{"quantile_same_result", rewrite(fmt.Sprintf("if(%s, arrayReduce('groupArrayState', arrayMap((x, i) -> if(i = 1, x - 1, x), arraySort(finalizeAggregation(p_amount__state)) AS v, arrayEnumerate(v))), p_amount__state) AS p_amount__state", detail(2)), "1")},
		// The finished values <t>_final reads, their states left as they were.
		{"finished_distinct", rewrite(fmt.Sprintf("if(%s, customers + 1, customers) AS customers", detail(0)), "1")},
		{"finished_avg", rewrite(fmt.Sprintf("if(%s, avg_amount + 0.01, avg_amount) AS avg_amount", detail(0)), "1")},
		{"finished_quantile", rewrite(fmt.Sprintf("if(%s, arrayMap(x -> x + 1, p_amount), p_amount) AS p_amount", detail(0)), "1")},
		{"timestamp", rewrite(fmt.Sprintf("if(%s, last_order_at + toIntervalSecond(1), last_order_at) AS last_order_at", detail(0)), "1")},
		{"missing_row", rewrite("", "NOT ("+detail(1)+")")},
		{"extra_row", []string{fmt.Sprintf("INSERT INTO %s (report_date, grouping_level, country, category, grouping_country, grouping_category) SELECT report_date, 'detail', 'ZZ', 'zz', 0, 0 FROM %s WHERE _partition_id = '%s' LIMIT 1", target, target, p)}},
		{"dropped_column", []string{"ALTER TABLE " + target + " DROP COLUMN avg_amount__count"}},
		{"retyped_column", []string{"ALTER TABLE " + target + " MODIFY COLUMN avg_amount__sum SimpleAggregateFunction(sum, Float64)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, Force: true}); err != nil {
				t.Fatal(err)
			}
			if got := dump(); got != want {
				t.Fatal("fresh state differs from the first sync")
			}
			tp := tamper{c: c, m: m, tbl: tbl, clock: clock, final: dump, want: want}
			tp.foundAndRepaired(t, p, tc.sql, sameFinal[tc.name])
		})
	}
}

// tamper is a served mart whose rows a test changes behind goldbridge's back.
type tamper struct {
	c     *chconn.Client
	m     *serving.Mart
	tbl   *table.Table
	clock func() time.Time
	final func() string // <t>_final's rows, as text
	want  string        // final() before the tamper
}

// foundAndRepaired runs the tamper's statements, then asserts that check finds
// partition p drifting, that a sync of the drifting partitions leaves check clean,
// and that <t>_final reads what it did before; sameFinal: the tamper itself must
// leave <t>_final as it was (it changed states only).
func (tp tamper) foundAndRepaired(t *testing.T, p string, sql []string, sameFinal bool) {
	t.Helper()
	ctx := context.Background()
	for _, q := range sql {
		if err := tp.c.Conn().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if sameFinal && tp.final() != tp.want {
		t.Fatal("the tamper changed <t>_final")
	}
	target := chtarget.NewClickHouse(tp.c)
	drifts, err := gbsync.Check(ctx, target, tp.m, tp.tbl, gbsync.Options{Now: tp.clock})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(gbsync.DriftPartitions(drifts), p) {
		t.Fatalf("tamper of partition %s not found: %v", p, drifts)
	}
	t.Logf("%d drifts, first %+v", len(drifts), drifts[0])
	if _, err := gbsync.Sync(ctx, target, tp.m, tp.tbl, gbsync.Options{Now: tp.clock, Only: gbsync.DriftPartitions(drifts)}); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if drifts, err := gbsync.Check(ctx, target, tp.m, tp.tbl, gbsync.Options{Now: tp.clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check after repair: %v %v", drifts, err)
	}
	if tp.final() != tp.want {
		t.Fatal("_final after the repair differs from Gold's rows")
	}
}
