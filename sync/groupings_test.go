package sync_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/shopspring/decimal"

	"goldbridge/demo"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

func silverType(s string) silver.Type { t, _ := silver.ParseType(s); return t }

// demoOrders is the orders entity of examples/orders.yaml, as the Silver stage takes it,
// with the amount derived as an integer (amount_cents) and a double (amount_f) for the
// measures over other input types (input).
func demoOrders() silver.EntitySpec {
	col := func(name, t string, req bool) silver.ColumnSpec {
		return silver.ColumnSpec{Name: name, Path: "$." + name, Type: silverType(t), Required: req}
	}
	return silver.EntitySpec{
		Name: "orders", Table: "silver.orders", QuarantineTable: "silver.orders_quarantine",
		Mode: "upsert", Key: []string{"order_id"}, UpdatedAt: "updated_at", Op: "op", Buckets: 2,
		Columns: []silver.ColumnSpec{
			col("order_id", "string", true), col("user_id", "string", true), col("amount", "decimal(18,2)", false),
			col("country", "string", false), col("category", "string", false), col("status", "string", false),
			col("created_at", "timestamp", false), col("updated_at", "timestamp", true), col("op", "string", false),
		},
		Rules: []silver.RuleSpec{
			{ID: "E1", Kind: "derive", Column: inInt.col, Type: "int64", Expr: "round(amount * 100)"},
			// Not `amount`: an expression sees a decimal through decimal128's ToFloat64,
			// up to an ulp from the nearest double (42.3 as 42.300000000000004).
			{ID: "E2", Kind: "derive", Column: inFloat.col, Type: "float64", Expr: "amount_cents / 100"},
		},
	}
}

// input is a numeric column of the demo orders a measure takes, with its Silver type and
// the oracle's SQL of it over <db>.s (computed there from amount, not read from Silver).
type input struct{ col, typ, sql string }

var (
	inDecimal = input{"amount", "decimal(18,2)", "amount"}
	inInt     = input{"amount_cents", "int64", "toInt64(amount * 100)"}
	inFloat   = input{"amount_f", "float64", "toFloat64(amount)"}
	allInputs = []input{inDecimal, inInt, inFloat}
)

// inputs are the inputs of groupingMart's measures over the amount, by measure name
// (revenue, avg_amount, max_amount, p_amount, big_paid_revenue); a missing one is the
// decimal amount.
type inputs map[string]input

func (in inputs) of(measure string) input {
	if v, ok := in[measure]; ok {
		return v
	}
	return inDecimal
}

// withInputs points spec's measures over the amount to their inputs.
func withInputs(spec gold.MartSpec, in inputs) gold.MartSpec {
	spec.Measures = slices.Clone(spec.Measures)
	for i, ms := range spec.Measures {
		if v, ok := in[ms.Name]; ok {
			spec.Measures[i].Column, spec.Measures[i].InputType = v.col, silverType(v.typ)
		}
	}
	return spec
}

// servedDemo is the setup of the served-mart tests (a ClickHouse server required): the
// demo's Silver orders up to end in a fresh lakehouse, a fresh ClickHouse database and
// a client to it.
func servedDemo(t *testing.T, end time.Time) (*catalog.Lakehouse, string, *chconn.Client) {
	t.Helper()
	chtest.Require(t)
	lh := lakehousetest.Open(t)
	demoSilver(t, lh, end)
	db := chtest.Database(t)
	return lh, db, client(t, db)
}

// demoSilver fills silver.orders from a generated demo stream.
func demoSilver(t *testing.T, lh *catalog.Lakehouse, end time.Time) {
	t.Helper()
	demoBatch(t, lh, "landing", 7, end)
}

// demoBatch merges a demo stream (4 days up to end, from seed; the same order ids as
// every other seed's) into silver.orders through Bronze source src.
func demoBatch(t *testing.T, lh *catalog.Lakehouse, src string, seed uint64, end time.Time) {
	t.Helper()
	ctx := context.Background()
	landing := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: landing, Events: 3000, Seed: seed, End: end, Days: 4}); err != nil {
		t.Fatal(err)
	}
	fs := bronze.FileSource{Name: src, System: "shop_file", Dir: landing}
	if _, err := bronze.IngestFiles(ctx, lh, "bronze.orders", []bronze.FileSource{fs}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := silver.Run(ctx, lh, demoOrders(), "bronze.orders", silver.Options{}); err != nil {
		t.Fatal(err)
	}
}

// oracleTable copies the live Silver orders into a ClickHouse Memory table <db>.s.
func oracleTable(t *testing.T, lh *catalog.Lakehouse, c *chconn.Client, db string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Conn().Exec(ctx, fmt.Sprintf(`CREATE TABLE %s.s (created_at DateTime64(6,'UTC'), country Nullable(String),
		category Nullable(String), amount Nullable(Decimal(18,2)), user_id String, status Nullable(String),
		updated_at DateTime64(6,'UTC')) ENGINE=Memory`, serving.Q(db))); err != nil {
		t.Fatal(err)
	}
	batch, err := c.Conn().PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.s", serving.Q(db)))
	if err != nil {
		t.Fatal(err)
	}
	stbl, err := lh.LoadTable(ctx, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := stbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		for i := range int(rec.NumRows()) {
			if col(silver.ColIsDeleted).(*array.Boolean).Value(i) || col("created_at").IsNull(i) {
				continue
			}
			str := func(name string) *string {
				if col(name).IsNull(i) {
					return nil
				}
				s := col(name).ValueStr(i)
				return &s
			}
			ts := time.UnixMicro(int64(col("created_at").(*array.Timestamp).Value(i))).UTC()
			up := time.UnixMicro(int64(col("updated_at").(*array.Timestamp).Value(i))).UTC()
			if err := batch.Append(ts, str("country"), str("category"), str("amount"), *str("user_id"), str("status"), up); err != nil {
				t.Fatal(err)
			}
			n++
		}
		rec.Release()
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no live Silver rows")
	}
}

// groupingMart is a mart over the demo orders with every aggregate (oracleRows has each
// one's SQL).
func groupingMart(name, grouping string, sets [][]string) gold.MartSpec {
	cols := map[string]silver.Type{silver.ColIsDeleted: {Kind: silver.Bool}}
	for _, c := range demoOrders().Columns {
		cols[c.Name] = c.Type
	}
	for _, in := range allInputs {
		cols[in.col] = silverType(in.typ)
	}
	dec := silverType("decimal(18,2)")
	return gold.MartSpec{
		Name: name, Table: "gold." + name, SourceTable: "silver.orders", SourceKey: []string{"order_id"},
		SourceColumns: cols, Filter: "not is_deleted",
		GrainColumn: "created_at", GrainUnit: "day", GrainAs: "report_date",
		Dims:     []gold.Dim{{Name: "country", Type: silverType("string")}, {Name: "category", Type: silverType("string")}},
		Grouping: grouping, GroupingSets: sets,
		Measures: []gold.MeasureSpec{
			{Name: "revenue", Agg: "sum", Column: "amount", InputType: dec},
			{Name: "orders", Agg: "count"},
			{Name: "customers", Agg: "count_distinct", Column: "user_id", InputType: silverType("string")},
			{Name: "avg_amount", Agg: "avg", Column: "amount", InputType: dec},
			{Name: "max_amount", Agg: "max", Column: "amount", InputType: dec},
			{Name: "p_amount", Agg: "quantiles", Column: "amount", InputType: dec, Quantiles: []float64{0.5, 0.9}},
			{Name: "big_paid", Agg: "count_if", If: `status == "paid" && amount >= 100`},
			{Name: "big_paid_revenue", Agg: "sum_if", Column: "amount", InputType: dec, If: `status == "paid" && amount >= 100`},
		},
		Checks: []gold.CheckSpec{
			{Name: "unique", Type: "unique_grain", Severity: "critical"},
			{Name: "consistency", Type: "consistency", Severity: "critical"},
		},
	}
}

// servedMart is the serving model of groupingMart, built as the commands build it.
func servedMart(db string, g gold.MartSpec, distinct string) *serving.Mart {
	partitionBy := "day"
	if g.GrainUnit == "month" {
		partitionBy = "month"
	}
	m, err := serving.NewMart(g, serving.Target{Database: db, Table: g.Name, PartitionBy: partitionBy, HotWindow: 30 * 24 * time.Hour, Distinct: distinct})
	if err != nil {
		panic(err) // a test's spec that serving refuses
	}
	return m
}

// oracleRows computes the mart over <db>.s with ClickHouse GROUPING SETS: the level
// name from the grouping flags, the average as the exact quotient rounded half away
// from zero at 8 digits, nearest-rank quantiles, sum_if 0 where no row matches (as
// sumIf over a non-Nullable column; over Nullable(amount) ClickHouse says NULL). grain
// is the SQL of the grain value.
func oracleRows(t *testing.T, c *chconn.Client, db, distinct, grain string, dims []string, levels [][]string) []string {
	t.Helper()
	return oracleQueryRows(t, c, db, oracleQuery{distinct: distinct, grain: grain, dims: dims, levels: levels})
}

// oracleQuery is the SQL of one mart over <db>.s (and <db>.c, the live customers): the
// join, the filter beyond not is_deleted (the rows of s are live), and the conditions of
// big_paid (count_if) and big_paid_revenue (sum_if); empty parts take groupingMart's.
type oracleQuery struct {
	distinct, grain string
	dims            []string
	levels          [][]string
	join            string // "", "LEFT" or "INNER": s joined with c on user_id = customer_id
	where           string
	countIf, sumIf  string
	in              inputs // the measures' inputs (withInputs)
	by              bool   // the mart has byMeasures
}

// oracleQueryRows computes the mart of o over <db>.s with ClickHouse GROUPING SETS, in
// servedRows' form (see oracleRows).
func oracleQueryRows(t *testing.T, c *chconn.Client, db string, o oracleQuery) []string {
	t.Helper()
	distinct, grain, dims, levels := o.distinct, o.grain, o.dims, o.levels
	if distinct == serving.DistinctBitmap {
		distinct = serving.DistinctExact // a bitmap of the keys' ids is exact
	}
	from := serving.Q(db) + ".s"
	if o.join != "" {
		from = fmt.Sprintf("%s.s %s JOIN %s.c ON s.user_id = c.customer_id", serving.Q(db), o.join, serving.Q(db))
	}
	where := "1"
	if o.where != "" {
		where = o.where
	}
	countIf, sumIf := cmp.Or(o.countIf, bigPaidSQL), cmp.Or(o.sumIf, bigPaidSQL)
	var sets []string
	for _, l := range levels {
		sets = append(sets, "("+strings.Join(append([]string{"g"}, l...), ", ")+")")
	}
	// A dimension no set keeps is no GROUP BY key: NULL and rolled up.
	var sel []string
	for _, d := range dims {
		if slices.ContainsFunc(levels, func(l []string) bool { return slices.Contains(l, d) }) {
			sel = append(sel, "ifNull("+d+", '∅')", "grouping("+d+")")
		} else {
			sel = append(sel, "'∅'", "toUInt64(1)")
		}
	}
	rev, avg, mx, p, sif := o.in.of("revenue"), o.in.of("avg_amount"), o.in.of("max_amount"), o.in.of("p_amount"), o.in.of("big_paid_revenue")
	aif, last := o.in.of("big_paid_avg"), o.in.of("latest_amount")
	by := "" // byMeasures: avg_if's sum and divisor, max_by, min_by (NULL over no row with both inputs)
	if o.by {
		both := func(v, by string) string { return v + " IS NOT NULL AND " + by + " IS NOT NULL" }
		by = fmt.Sprintf(`, toString(ifNull(sumIf(%s, %s), 0)), countIf(%s IS NOT NULL AND (%s)),
		if(countIf(%s) = 0, 'NULL', toString(argMaxIf(%s, (updated_at, %s), %s))),
		if(countIf(%s) = 0, 'NULL', toString(argMinIf(category, (amount, category), %s)))`,
			aif.sql, sumIf, aif.sql, sumIf, both(last.sql, "updated_at"), last.sql, last.sql, both(last.sql, "updated_at"),
			both("category", "amount"), both("category", "amount"))
	}
	q := fmt.Sprintf(`SELECT formatDateTime(%s AS g, '%%F %%T'), [%s], [%s],
		toString(sum(%s)), count(), %s(user_id), toString(sum(%s)), count(%s), toString(max(%s)),
		arrayMap(p -> arraySort(groupArray(toFloat64(%s)))[greatest(1, toUInt64(ceil(p * count(%s))))], [0.5, 0.9]),
		countIf(%s), toString(ifNull(sumIf(%s, %s), 0))%s
		FROM %s WHERE %s GROUP BY GROUPING SETS (%s) SETTINGS group_by_use_nulls = 1, join_use_nulls = 1`,
		grain, strings.Join(oddEven(sel, 0), ", "), strings.Join(oddEven(sel, 1), ", "), rev.sql, distinct, avg.sql, avg.sql, mx.sql,
		p.sql, p.sql, countIf, sif.sql, sumIf, by, from, where, strings.Join(sets, ", "))
	rows, err := c.Conn().Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d, sum, avgSum, maxA, bigRev string
		var vals []string
		var flags []uint64
		var n, uniq, nAmount, big uint64
		var qs []float64
		var aifSum, lastA, cheapest string
		var aifN uint64
		dest := []any{&d, &vals, &flags, &sum, &n, &uniq, &avgSum, &nAmount, &maxA, &qs, &big, &bigRev}
		if o.by {
			dest = append(dest, &aifSum, &aifN, &lastA, &cheapest)
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		var kept []string
		for i, f := range flags {
			if f == 0 {
				kept = append(kept, dims[i])
			}
		}
		level := "by_" + strings.Join(kept, "_")
		switch len(kept) {
		case len(dims):
			level = "detail"
		case 0:
			level = "total"
		}
		row := fmt.Sprintf("%s|%v|%v|%s|%s|%d|%d|%s|%s|%v|%d|%s", d, vals, flags, level,
			valueText(rev.typ, 2, true, sum), n, uniq, oracleAvg(avg.typ, avgSum, nAmount), valueText(mx.typ, 2, false, maxA), qs,
			big, valueText(sif.typ, 2, true, bigRev))
		if o.by {
			row += byText(oracleAvg(aif.typ, aifSum, aifN), valueText(last.typ, 2, false, lastA), cheapest)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// valueText is a measure's value s (its text, or NULL) over an input of Silver type typ
// in the rows' form: decimals at places, integers exact, doubles in their shortest text,
// marked ~ when approx (their sums are compared within 1e-9 by sameRow: ClickHouse and
// Gold add them in other orders).
func valueText(typ string, places int32, approx bool, s string) string {
	switch {
	case s == "NULL":
		return s
	case strings.HasPrefix(typ, "decimal"):
		return decimal.RequireFromString(s).StringFixed(places)
	case typ == "int64":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			panic(err)
		}
		return strconv.FormatInt(n, 10)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	if approx {
		return "~" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// avgText is an average (text, or NULL) over an input of Silver type typ in the rows'
// form: of decimals, a decimal at 8 places; of integers, the exact double sum/n; of
// doubles, a double within 1e-9.
func avgText(typ, s string) string {
	if strings.HasPrefix(typ, "decimal") {
		return valueText(typ, 8, false, s)
	}
	return valueText("float64", 0, typ == "float64", s)
}

// oracleAvg is the average of n inputs of type typ summing to sum (avgText's form):
// rounded half away from zero at 8 places for decimals, float64(sum)/n for integers.
func oracleAvg(typ, sum string, n uint64) string {
	switch {
	case n == 0:
		return "NULL"
	case strings.HasPrefix(typ, "decimal"):
		return decimal.RequireFromString(sum).DivRound(decimal.NewFromInt(int64(n)), 8).StringFixed(8)
	case typ == "int64":
		i, err := strconv.ParseInt(sum, 10, 64)
		if err != nil {
			panic(err)
		}
		return avgText(typ, strconv.FormatFloat(float64(i)/float64(n), 'g', -1, 64))
	}
	f, err := strconv.ParseFloat(sum, 64)
	if err != nil {
		panic(err)
	}
	return avgText(typ, strconv.FormatFloat(f/float64(n), 'g', -1, 64))
}

// sameRow reports whether two rows in the oracle's form are equal: field by field, the
// ~-marked doubles within a relative 1e-9.
func sameRow(a, b string) bool {
	if a == b {
		return true
	}
	fa, fb := strings.Split(a, "|"), strings.Split(b, "|")
	if len(fa) != len(fb) {
		return false
	}
	for i := range fa {
		if fa[i] == fb[i] {
			continue
		}
		x, ok1 := strings.CutPrefix(fa[i], "~")
		y, ok2 := strings.CutPrefix(fb[i], "~")
		if !ok1 || !ok2 {
			return false
		}
		u, err1 := strconv.ParseFloat(x, 64)
		v, err2 := strconv.ParseFloat(y, 64)
		if err1 != nil || err2 != nil || math.Abs(u-v) > 1e-9*math.Max(1, math.Max(math.Abs(u), math.Abs(v))) {
			return false
		}
	}
	return true
}

// sameRows reports whether two sorted lists of rows are equal row by row (sameRow).
func sameRows(got, want []string) bool {
	return slices.EqualFunc(got, want, sameRow)
}

// oddEven returns the elements of s at even (from 0) or odd (from 1) positions.
func oddEven(s []string, from int) []string {
	var out []string
	for i := from; i < len(s); i += 2 {
		out = append(out, s[i])
	}
	return out
}

// servedRows reads <t>_final in the oracle's form.
func servedRows(t *testing.T, c *chconn.Client, m *serving.Mart) []string {
	t.Helper()
	return martRows(t, c, m, "formatDateTime("+serving.Q(m.Grain.As)+", '%F %T')",
		func(ms serving.Measure) string { return serving.Q(ms.Name) }, serving.Q(m.Database)+"."+serving.Q(m.Table+"_final"), "")
}

// martRows reads a groupingMart-shaped mart from ClickHouse in the oracle's form: grain
// is the SQL of the grain's text, measure the SQL of a measure's value, read from from
// (with groupBy, when the values aggregate rows).
func martRows(t *testing.T, c *chconn.Client, m *serving.Mart, grain string, measure func(serving.Measure) string, from, groupBy string) []string {
	t.Helper()
	// The measure's input type, as valueText takes it: Decimal(38, 2) as decimal, ...;
	// an avg's is its hidden sum's.
	typ := func(measure string) string {
		i := slices.IndexFunc(m.Measures, func(ms serving.Measure) bool { return ms.Name == measure })
		return strings.ToLower(m.Measures[i].Type)
	}
	var vals, flags, sel []string
	for _, d := range m.Dimensions {
		vals = append(vals, "ifNull(toString("+serving.Q(d.Name)+"), '∅')")
		flags = append(flags, "toUInt64("+serving.Q("grouping_"+d.Name)+")")
	}
	for _, ms := range m.Measures {
		switch e := measure(ms); ms.Name {
		case "orders", "customers", "big_paid", "p_amount":
			sel = append(sel, e)
		case "big_paid_revenue":
			sel = append(sel, "toString("+e+")")
		default:
			sel = append(sel, "ifNull(toString("+e+"), 'NULL')")
		}
	}
	hasBy := slices.ContainsFunc(m.Measures, func(ms serving.Measure) bool { return ms.Name == "latest_amount" })
	q := fmt.Sprintf("SELECT %s, [%s], [%s], toString(grouping_level), %s FROM %s %s",
		grain, strings.Join(vals, ", "), strings.Join(flags, ", "), strings.Join(sel, ", "), from, groupBy)
	rows, err := c.Conn().Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d, lv, rev, avg, maxA, bigRev string
		var vs []string
		var fs []uint64
		var orders, cust, big int64
		var qs []float64
		var aif, lastA, cheapest string
		dest := []any{&d, &vs, &fs, &lv, &rev, &orders, &cust, &avg, &maxA, &qs, &big, &bigRev}
		if hasBy {
			dest = append(dest, &aif, &lastA, &cheapest)
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		row := fmt.Sprintf("%s|%v|%v|%s|%s|%d|%d|%s|%s|%v|%d|%s", d, vs, fs, lv,
			valueText(typ("revenue"), 2, true, rev), orders, cust, avgText(typ("avg_amount"), avg), valueText(typ("max_amount"), 2, false, maxA), qs,
			big, valueText(typ("big_paid_revenue"), 2, true, bigRev))
		if hasBy {
			row += byText(avgText(typ("big_paid_avg"), aif), valueText(typ("latest_amount"), 2, false, lastA), cheapest)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// goldMartRows reads the Gold table of a groupingMart-shaped mart in the oracle's form.
func goldMartRows(t *testing.T, tbl *table.Table, spec gold.MartSpec) []string {
	t.Helper()
	typ := func(measure string) string {
		i := slices.IndexFunc(spec.Measures, func(ms gold.MeasureSpec) bool { return ms.Name == measure })
		return spec.Measures[i].InputType.String()
	}
	str := func(a arrow.Array, i int) string {
		if a.IsNull(i) {
			return "NULL"
		}
		return a.ValueStr(i)
	}
	hasBy := slices.ContainsFunc(spec.Measures, func(ms gold.MeasureSpec) bool { return ms.Name == "latest_amount" })
	var out []string
	forRows(t, tbl, func(col func(string) arrow.Array, i int) {
		var g time.Time
		switch a := col(spec.GrainAs).(type) {
		case *array.Date32:
			g = a.Value(i).ToTime()
		case *array.Timestamp:
			g = time.UnixMicro(int64(a.Value(i))).UTC()
		default:
			t.Fatalf("grain column %T", a)
		}
		var vals []string
		var flags []uint64
		for _, d := range spec.Dims {
			v := "∅"
			if a := col(d.Name); !a.IsNull(i) {
				v = a.ValueStr(i)
			}
			vals = append(vals, v)
			f := uint64(0)
			if s := col(mart.GroupingCol(d.Name)).ValueStr(i); s == "1" || s == "true" {
				f = 1
			}
			flags = append(flags, f)
		}
		qa := col("p_amount").(*array.List)
		var qs []float64
		if !qa.IsNull(i) {
			lo, hi := qa.ValueOffsets(i)
			for j := lo; j < hi; j++ {
				qs = append(qs, qa.ListValues().(*array.Float64).Value(int(j)))
			}
		}
		n := func(name string) int64 { return col(name).(*array.Int64).Value(i) }
		row := fmt.Sprintf("%s|%v|%v|%s|%s|%d|%d|%s|%s|%v|%d|%s", g.Format("2006-01-02 15:04:05"), vals, flags,
			col(mart.ColGroupingLevel).ValueStr(i), valueText(typ("revenue"), 2, true, str(col("revenue"), i)), n("orders"), n("customers"),
			avgText(typ("avg_amount"), str(col("avg_amount"), i)), valueText(typ("max_amount"), 2, false, str(col("max_amount"), i)), qs,
			n("big_paid"), valueText(typ("big_paid_revenue"), 2, true, str(col("big_paid_revenue"), i)))
		if hasBy {
			row += byText(avgText(typ("big_paid_avg"), str(col("big_paid_avg"), i)), valueText(typ("latest_amount"), 2, false, str(col("latest_amount"), i)),
				str(col("cheapest_category"), i))
		}
		out = append(out, row)
	})
	slices.Sort(out)
	return out
}

// TestServedGroupings: every grouping, with or without the detail level, is computed by
// Gold without a false consistency alarm and served exactly (distinct counts and
// quantiles too, from goldbridge's states and from the server's): <t>_final equals
// ClickHouse GROUPING SETS over the live Silver rows, and Check is clean.
func TestServedGroupings(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	oracleTable(t, lh, c, db)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }

	for _, tc := range []struct {
		name     string
		grouping string
		sets     [][]string
		levels   [][]string // the oracle's grouping sets
	}{
		{"rollup", "rollup", nil, [][]string{{"country", "category"}, {"country"}, {}}},
		{"country_total", "sets", [][]string{{"country"}, {}}, [][]string{{"country"}, {}}},
		{"total_only", "sets", [][]string{{}}, [][]string{{}}},
		{"two_carriers", "sets", [][]string{{"category"}, {"country"}, {}}, [][]string{{"category"}, {"country"}, {}}},
		{"cube", "cube", nil, [][]string{{"country", "category"}, {"country"}, {"category"}, {}}},
	} {
		spec := groupingMart("g_"+tc.name, tc.grouping, tc.sets)
		if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
			t.Fatalf("%s: gold: %v", tc.name, err)
		}
		tbl, err := lh.LoadTable(ctx, spec.Table)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			distinct     string
			serverStates bool
		}{{"uniqExact", false}, {"uniqExact", true}, {"uniq", false}, {serving.DistinctBitmap, true}} {
			name := fmt.Sprintf("%s/%s/server=%v", tc.name, v.distinct, v.serverStates)
			t.Run(name, func(t *testing.T) {
				m := servedMart(db, spec, v.distinct)
				m.Table = fmt.Sprintf("%s_%s_%v", spec.Name, v.distinct, v.serverStates)
				if err := m.CheckSchema(tbl.Schema()); err != nil {
					t.Fatal(err)
				}
				if _, err := gbsync.Sync(ctx, chtarget.WithServerStates(chtarget.NewClickHouse(c), v.serverStates), m, tbl, gbsync.Options{Now: clock}); err != nil {
					t.Fatal(err)
				}
				want := oracleRows(t, c, db, v.distinct, "toDate(created_at)", []string{"country", "category"}, tc.levels)
				if got := servedRows(t, c, m); !sameRows(got, want) {
					t.Fatalf("_final (%d rows) != GROUPING SETS over Silver (%d rows)\n%s", len(got), len(want), diffRows(got, want))
				}
				if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
					t.Fatalf("check: %v %v", drifts, err)
				}
			})
		}
	}
}

// diffRows shows the first rows only one side has.
func diffRows(got, want []string) string {
	var b strings.Builder
	n := 0
	has := func(rows []string, r string) bool {
		return slices.ContainsFunc(rows, func(x string) bool { return sameRow(x, r) })
	}
	for _, g := range got {
		if !has(want, g) && n < 4 {
			fmt.Fprintf(&b, "goldbridge only: %s\n", g)
			n++
		}
	}
	n = 0
	for _, w := range want {
		if !has(got, w) && n < 4 {
			fmt.Fprintf(&b, "oracle only: %s\n", w)
			n++
		}
	}
	return b.String()
}

// randomMarts is the number of random marts TestServedRandomMarts checks
// (GB_RANDOM_MARTS raises it).
func randomMarts() int {
	if n, err := strconv.Atoi(os.Getenv("GB_RANDOM_MARTS")); err == nil && n > 0 {
		return n
	}
	return 50
}

// bigPaidSQL is the SQL of groupingMart's count_if and sum_if condition.
const bigPaidSQL = "status = 'paid' AND amount >= 100"

// byMeasures are the measures TestServedRandomMarts adds to one mart in two (a mart with
// them has its states built by the server: push.ClientStates): big_paid_avg, the avg_if
// of the amount under the sum_if condition cond; latest_amount, the max_by of the amount
// by update time (the last update's); cheapest_category, the min_by of the category by
// amount (amounts tie: the smallest category of the smallest amount). The amounts'
// inputs are withInputs'.
func byMeasures(cond string) []gold.MeasureSpec {
	dec := silverType("decimal(18,2)")
	return []gold.MeasureSpec{
		{Name: "big_paid_avg", Agg: mart.AvgIf, Column: "amount", InputType: dec, If: cond},
		{Name: "latest_amount", Agg: mart.MaxBy, Column: "amount", InputType: dec, By: "updated_at", ByType: silverType("timestamp")},
		{Name: "cheapest_category", Agg: mart.MinBy, Column: "category", InputType: silverType("string"), By: "amount", ByType: dec},
	}
}

// byText is the rows' form of byMeasures' values.
func byText(avgIf, latest, cheapest string) string {
	return "|" + avgIf + "|" + latest + "|" + cheapest
}

// cond is a boolean expression over the mart's rows, in goldbridge's expression language
// and in ClickHouse SQL.
type cond struct{ expr, sql string }

// randomFilters and randomConds are the filters (besides not is_deleted) and the count_if
// and sum_if conditions randomMart draws from; those over segment need the customers
// join, whose unmatched rows (and customers without a segment) have a NULL segment: a
// comparison with NULL is unknown, unknown OR true is true, NOT unknown is unknown.
var (
	randomFilters = []cond{
		{"", ""},
		{`status != "created"`, "status != 'created'"},
		{`amount >= 20`, "amount >= 20"},
		{`country in ["DE", "FR", "US"]`, "country IN ('DE', 'FR', 'US')"},
		{`not (category == "books") && amount < 500`, "NOT (category = 'books') AND amount < 500"},
	}
	randomJoinFilters = []cond{
		{`segment != "new"`, "segment != 'new'"},
		{`segment == "vip" || amount >= 150`, "segment = 'vip' OR amount >= 150"},
		{`segment == nil || segment in ["vip", "regular"]`, "segment IS NULL OR segment IN ('vip', 'regular')"},
		{`not (segment startsWith "v") || amount > 400`, "NOT startsWith(segment, 'v') OR amount > 400"},
	}
	randomConds = []cond{
		{`status == "paid" && amount >= 100`, bigPaidSQL},
		{`status in ["shipped", "delivered"]`, "status IN ('shipped', 'delivered')"},
		{`amount < 30 || category == "books"`, "amount < 30 OR category = 'books'"},
		{`not (country == "DE")`, "NOT (country = 'DE')"},
		{`created_at.Hour() < 12`, "toHour(created_at) < 12"},
		{`amount > 1000`, "amount > 1000"}, // no row: count_if 0, sum_if 0
	}
	randomJoinConds = []cond{
		{`segment == "vip"`, "segment = 'vip'"},
		{`segment != "vip" || amount < 50`, "segment != 'vip' OR amount < 50"},
		{`not (segment == "new") && status == "paid"`, "NOT (segment = 'new') AND status = 'paid'"},
		{`(segment ?? "none") == "none"`, "ifNull(segment, 'none') = 'none'"},
		{`segment not in ["new"]`, "segment NOT IN ('new')"},
	}
)

// customersJoin is the join of the customers entity (loadDemoCustomers) on user_id.
func customersJoin(joinType string) gold.JoinSpec {
	return gold.JoinSpec{Entity: "customers", Table: "silver.customers", Type: joinType,
		On: []gold.JoinOn{{Local: "user_id", Joined: "customer_id"}}, Columns: []string{"segment"},
		ColumnTypes: map[string]silver.Type{"customer_id": silverType("string"), "segment": silverType("string"),
			"updated_at": silverType("timestamp"), "op": silverType("string")},
		HasDeleted: true}
}

// randomMart draws a mart over the demo orders: 1-3 dimensions in any order, a grouping
// (none, rollup, cube, sets with or without the detail level, with or without ()), an
// hour, day or month grain, a filter, the count_if and sum_if conditions, and one time in
// three a LEFT or INNER join of the customers (whose segment may then be a dimension and
// appear in the filter and conditions); it returns the spec and the oracle's query
// (without its distinct function).
func randomMart(r *rand.Rand, name string) (gold.MartSpec, oracleQuery) {
	var o oracleQuery
	all := []string{"country", "category", "status"}
	filters, conds := randomFilters, randomConds
	if r.IntN(3) == 0 {
		o.join = []string{"LEFT", "INNER"}[r.IntN(2)]
		all = append(all, "segment")
		filters = append(slices.Clone(filters), randomJoinFilters...)
		conds = append(slices.Clone(conds), randomJoinConds...)
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	dims := all[:1+r.IntN(3)]
	subset := func() []string {
		var s []string
		for _, d := range dims {
			if r.IntN(2) == 0 {
				s = append(s, d)
			}
		}
		return s
	}
	var grouping string
	var sets, levels [][]string
	add := func(l []string) {
		if !slices.ContainsFunc(levels, func(x []string) bool { return slices.Equal(x, l) }) {
			levels = append(levels, l)
			sets = append(sets, l)
		}
	}
	switch r.IntN(5) {
	case 0:
		grouping, levels = "none", [][]string{dims}
	case 1:
		grouping = "rollup"
		for k := len(dims); k >= 0; k-- {
			levels = append(levels, dims[:k])
		}
	case 2:
		grouping = "cube"
		for mask := 0; mask < 1<<len(dims); mask++ {
			var l []string
			for i, d := range dims {
				if mask&(1<<i) != 0 {
					l = append(l, d)
				}
			}
			levels = append(levels, l)
		}
	default: // sets, with the detail level one time in three
		grouping = "sets"
		if r.IntN(3) == 0 {
			add(dims)
		}
		for range 1 + r.IntN(3) {
			add(subset())
		}
		if r.IntN(2) == 0 {
			add([]string{})
		}
	}
	spec := groupingMart(name, grouping, nil)
	if grouping == "sets" {
		spec.GroupingSets = sets
	}
	spec.Dims = nil
	for _, d := range dims {
		spec.Dims = append(spec.Dims, gold.Dim{Name: d, Type: silverType("string")})
	}
	unit := []string{"hour", "day", "month"}[r.IntN(3)]
	spec.GrainUnit = unit
	o.grain = map[string]string{"hour": "toStartOfHour(created_at)", "day": "toDate(created_at)", "month": "toStartOfMonth(created_at)"}[unit]
	o.dims, o.levels = dims, levels
	if o.join != "" {
		spec.Joins = []gold.JoinSpec{customersJoin(strings.ToLower(o.join))}
	}
	if f := filters[r.IntN(len(filters))]; f.expr != "" {
		spec.Filter += " and (" + f.expr + ")"
		o.where = f.sql
	}
	countIf, sumIf := conds[r.IntN(len(conds))], conds[r.IntN(len(conds))]
	for i, ms := range spec.Measures {
		switch ms.Agg {
		case "count_if":
			spec.Measures[i].If = countIf.expr
		case "sum_if":
			spec.Measures[i].If = sumIf.expr
		}
	}
	o.countIf, o.sumIf = countIf.sql, sumIf.sql
	return spec, o
}

// loadDemoCustomers fills silver.customers, one customer per user of the live orders
// but about one in eight (their orders find no match), about one in twenty deleted after
// its creation, one in twelve without a segment, and one in five changing segment once;
// and copies the live customers into the ClickHouse Memory table <db>.c for the oracle.
func loadDemoCustomers(t *testing.T, lh *catalog.Lakehouse, c *chconn.Client, db string) {
	t.Helper()
	ctx := context.Background()
	rows, err := c.Conn().Query(ctx, fmt.Sprintf("SELECT DISTINCT user_id FROM %s.s ORDER BY user_id", serving.Q(db)))
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	rows.Close()
	if err := c.Conn().Exec(ctx, fmt.Sprintf("CREATE TABLE %s.c (customer_id String, segment Nullable(String)) ENGINE=Memory", serving.Q(db))); err != nil {
		t.Fatal(err)
	}
	batch, err := c.Conn().PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.c", serving.Q(db)))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	line := func(id string, seg *string, at, op string) {
		s := "null"
		if seg != nil {
			s = strconv.Quote(*seg)
		}
		lines = append(lines, fmt.Sprintf(`{"customer_id":%q,"segment":%s,"updated_at":"2026-05-01T00:00:%sZ","op":%q}`, id, s, at, op))
	}
	segments := []string{"vip", "regular", "new"}
	for i, u := range users {
		h := (uint64(i)*2654435761 + 12345) % 120
		if h < 15 {
			continue // no customer row
		}
		seg := &segments[h%3]
		if h < 25 {
			seg = nil
		}
		if h%5 == 0 {
			line(u, &segments[(h+1)%3], "00", "c") // replaced by the version below
			line(u, seg, "01", "u")
		} else {
			line(u, seg, "00", "c")
		}
		if h >= 25 && h < 31 {
			line(u, nil, "02", "d")
			continue
		}
		if err := batch.Append(u, seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "customers.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := bronze.FileSource{Name: "customers", System: "crm_file", Dir: dir}
	if _, err := bronze.IngestFiles(ctx, lh, "bronze.customers", []bronze.FileSource{fs}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
	col := func(name, typ string, req bool) silver.ColumnSpec {
		return silver.ColumnSpec{Name: name, Path: "$." + name, Type: silverType(typ), Required: req}
	}
	spec := silver.EntitySpec{
		Name: "customers", Table: "silver.customers", QuarantineTable: "silver.customers_quarantine",
		Mode: "upsert", Key: []string{"customer_id"}, UpdatedAt: "updated_at", Op: "op", Buckets: 2,
		Columns: []silver.ColumnSpec{col("customer_id", "string", true), col("segment", "string", false),
			col("updated_at", "timestamp", true), col("op", "string", false)},
	}
	res, err := silver.Run(ctx, lh, spec, "bronze.customers", silver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Quarantined != 0 {
		t.Fatalf("customers: %d rows quarantined", res.Quarantined)
	}
}

// TestServedRandomMarts: random marts (randomMart) over the demo orders, each measure
// over the amount taking a decimal, an integer or a double input at random, each mart
// computed by Gold and served through one of the three state paths: Gold and
// <t>_final, row for row, equal ClickHouse GROUPING SETS over the live Silver rows
// (joined with the live customers, filtered and counted by the SQL of the mart's filter
// and conditions; doubles summed in another order within 1e-9), with check clean. The 50 of CI draw
// 21 joins (8 LEFT), 42 filters besides not is_deleted, all 11 conditions.
func TestServedRandomMarts(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	oracleTable(t, lh, c, db)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	loadDemoCustomers(t, lh, c, db)
	r := rand.New(rand.NewPCG(15, 0))
	rin := rand.New(rand.NewPCG(16, 0)) // the inputs: the marts stay those drawn before inputs were
	rby := rand.New(rand.NewPCG(17, 0)) // byMeasures: likewise
	rbm := rand.New(rand.NewPCG(18, 0)) // exact distinct counts served as bitmaps: likewise
	for i := range randomMarts() {
		spec, o := randomMart(r, fmt.Sprintf("r%03d", i))
		o.in = inputs{}
		for _, ms := range []string{"revenue", "avg_amount", "max_amount", "p_amount", "big_paid_revenue"} {
			o.in[ms] = allInputs[rin.IntN(len(allInputs))]
		}
		if o.by = rby.IntN(2) == 0; o.by {
			spec.Measures = append(spec.Measures, byMeasures(spec.Measures[7].If)...)
			for _, ms := range []string{"big_paid_avg", "latest_amount"} {
				o.in[ms] = allInputs[rby.IntN(len(allInputs))]
			}
		}
		spec = withInputs(spec, o.in)
		path := r.IntN(3)
		distinct := []string{"uniqExact", "uniqExact", "uniq"}[path]
		if rbm.IntN(2) == 0 && path == 0 {
			distinct = serving.DistinctBitmap
		}
		t.Run(fmt.Sprintf("%s_%s_%v_%s_%d_%s_join=%s", spec.Name, spec.Grouping, spec.GroupingSets, spec.GrainUnit, path, distinct, o.join), func(t *testing.T) {
			t.Logf("filter %s; count_if %s; sum_if %s; inputs %v", spec.Filter, spec.Measures[6].If, spec.Measures[7].If, o.in)
			if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
				t.Fatalf("gold: %v", err)
			}
			tbl, err := lh.LoadTable(ctx, spec.Table)
			if err != nil {
				t.Fatal(err)
			}
			m := servedMart(db, spec, distinct)
			if spec.GrainUnit == "month" {
				m.PartitionBy = "month"
			}
			if err := m.CheckSchema(tbl.Schema()); err != nil {
				t.Fatal(err)
			}
			if _, err := gbsync.Sync(ctx, chtarget.WithServerStates(chtarget.NewClickHouse(c), path == 1), m, tbl, gbsync.Options{Now: clock}); err != nil {
				t.Fatal(err)
			}
			o.distinct = "uniqExact" // Gold's distinct counts are exact
			if got, want := goldMartRows(t, tbl, spec), oracleQueryRows(t, c, db, o); len(want) == 0 || !sameRows(got, want) {
				t.Fatalf("gold (%d rows) != GROUPING SETS over Silver (%d rows)\n%s", len(got), len(want), diffRows(got, want))
			}
			o.distinct = m.Distinct
			want := oracleQueryRows(t, c, db, o)
			if got := servedRows(t, c, m); len(want) == 0 || !sameRows(got, want) {
				t.Fatalf("_final (%d rows) != GROUPING SETS over Silver (%d rows)\n%s", len(got), len(want), diffRows(got, want))
			}
			if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
				t.Fatalf("check: %v %v", drifts, err)
			}
		})
	}
}
