package gold

import (
	"context"
	"fmt"
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

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

// silverOrder is one live Silver order, read back for the oracles below.
type silverOrder struct {
	id, user, country, category string
	amount                      float64 // exact enough: two decimals, small values
	amountText                  string
	created                     time.Time
	hasAmount, deleted          bool
}

func readOrders(t *testing.T, lh *catalog.Lakehouse) []silverOrder {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []silverOrder
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		c := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
		str := func(n string, i int) string {
			if c(n).IsNull(i) {
				return "(null)"
			}
			return c(n).(*array.String).Value(i)
		}
		for i := range int(rec.NumRows()) {
			o := silverOrder{id: str("order_id", i), user: str("user_id", i), country: str("country", i), category: str("category", i),
				deleted: c(silver.ColIsDeleted).(*array.Boolean).Value(i)}
			if a := c("amount").(*array.Decimal128); !a.IsNull(i) {
				o.hasAmount = true
				o.amountText = a.Value(i).ToString(2)
				// The nearest double, as ClickHouse's toFloat64 gives it.
				o.amount, _ = strconv.ParseFloat(o.amountText, 64)
			}
			if ca := c("created_at"); !ca.IsNull(i) {
				o.created = time.UnixMicro(int64(ca.(*array.Timestamp).Value(i))).UTC()
			}
			out = append(out, o)
		}
		rec.Release()
	}
	return out
}

// quantileByCount is the q-quantile as defined, computed without ranks: the smallest
// value v such that at least q·n values are <= v.
func quantileByCount(vals []float64, q float64) float64 {
	best, found := 0.0, false
	for _, v := range vals {
		le := 0
		for _, w := range vals {
			if w <= v {
				le++
			}
		}
		if float64(le) >= q*float64(len(vals)) && (!found || v < best) {
			best, found = v, true
		}
	}
	return best
}

func floatList(a arrow.Array, i int) ([]float64, bool) {
	l := a.(*array.List)
	if l.IsNull(i) {
		return nil, false
	}
	lo, hi := l.ValueOffsets(i)
	fs := l.ListValues().(*array.Float64)
	out := []float64{}
	for k := lo; k < hi; k++ {
		out = append(out, fs.Value(int(k)))
	}
	return out, true
}

// randomOrders lands n orders over a few days with tied amounts, and some updates.
func randomOrders(t *testing.T, dir, name string, rng *rand.Rand, first, n int, base time.Time) {
	t.Helper()
	var lines []string
	for id := first; id < first+n; id++ {
		amount := fmt.Sprintf("%d.%02d", rng.IntN(30), []int{0, 50, 99}[rng.IntN(3)])
		lines = append(lines, fmt.Sprintf(`{"order_id":"o%d","user_id":"u%d","amount":%s,"country":"%s","category":"c%d","created_at":%q,"updated_at":%q,"op":"c"}`,
			id, rng.IntN(40), amount, []string{"US", "DE", "FR"}[rng.IntN(3)], rng.IntN(2),
			base.AddDate(0, 0, rng.IntN(4)).Add(time.Duration(rng.IntN(20))*time.Hour).Format(time.RFC3339), base.Add(time.Duration(id)*time.Second).Format(time.RFC3339)))
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestQuantiles checks the quantiles measure at every ROLLUP level against a separate
// counting implementation, and that the detail __values lists merge to every level.
func TestQuantiles(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	randomOrders(t, landing, "1.jsonl", rng, 0, 600, base)
	loadAndSilver(t, lh, landing)
	levels := []float64{0.1, 0.25, 0.5, 0.9, 0.99, 1}
	m := kpiMart("gold.q")
	m.Measures = append(m.Measures, MeasureSpec{Name: "amount_q", Agg: "quantiles", Column: "amount", InputType: typ("decimal(18,2)"), Quantiles: levels})
	if _, err := Run(ctx, lh, m, Options{}); err != nil {
		t.Fatal(err)
	}

	// Oracle: group the live Silver rows per level.
	type key struct{ day, country, category, level string }
	want := map[key][]float64{}
	for _, o := range readOrders(t, lh) {
		if o.deleted || o.created.IsZero() || !o.hasAmount {
			continue
		}
		d := o.created.Format(time.DateOnly)
		for _, k := range []key{{d, o.country, o.category, "detail"}, {d, o.country, "(null)", "by_country"}, {d, "(null)", "(null)", "total"}} {
			want[k] = append(want[k], o.amount)
		}
	}
	gt, _ := lh.LoadTable(ctx, m.Table)
	_, recs, err := gt.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	detailUnion := map[string][]float64{} // day -> concatenated detail __values
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		c := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
		for i := range int(rec.NumRows()) {
			k := key{c("report_date").ValueStr(i), c("country").ValueStr(i), c("category").ValueStr(i), c(mart.ColGroupingLevel).(*array.String).Value(i)}
			vals, ok := want[k]
			if !ok {
				t.Fatalf("gold group %v not in the oracle", k)
			}
			seen++
			got, ok := floatList(c("amount_q"), i)
			if !ok || len(got) != len(levels) {
				t.Fatalf("%v: quantiles %v", k, got)
			}
			for qi, q := range levels {
				if w := quantileByCount(vals, q); got[qi] != w {
					t.Errorf("%v q=%v: gold %v, oracle %v (n=%d)", k, q, got[qi], w, len(vals))
				}
			}
			detailVals, ok := floatList(c(mart.ValuesCol("amount_q")), i)
			if (k.level == "detail") != ok {
				t.Fatalf("%v: __values must be set on detail rows only", k)
			}
			if ok {
				sorted := slices.Clone(vals)
				slices.Sort(sorted)
				if !slices.Equal(detailVals, sorted) {
					t.Errorf("%v: __values %v, want the sorted inputs %v", k, detailVals, sorted)
				}
				detailUnion[k.day] = append(detailUnion[k.day], detailVals...)
			}
		}
		rec.Release()
	}
	if seen != len(want) {
		t.Fatalf("gold has %d groups, oracle %d", seen, len(want))
	}
	// What serving does: merge the detail lists, take element ceil(q·n) of the sorted
	// union; it must give the total level's quantiles.
	for day, union := range detailUnion {
		slices.Sort(union)
		total := want[key{day, "(null)", "(null)", "total"}]
		for _, q := range levels {
			if nearestRank(union, q) != quantileByCount(total, q) {
				t.Errorf("%s q=%v: merged detail lists disagree with the total", day, q)
			}
		}
	}
}

// TestSnapshotMode: each run writes the state of all live orders as today's partition;
// the same day again replaces it, a new day appends one, earlier days stay.
func TestSnapshotMode(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	randomOrders(t, landing, "1.jsonl", rng, 0, 200, base)
	loadAndSilver(t, lh, landing)

	m := kpiMart("gold.orders_eod")
	m.Mode, m.GrainColumn, m.GrainAs = ModeSnapshot, "", "snapshot_date"
	m.Dims = m.Dims[:1]
	m.Checks = []CheckSpec{{Name: "unique", Type: "unique_grain", Severity: "critical"}, {Name: "consistency", Type: "consistency", Severity: "critical"}}
	clock := time.Date(2026, 5, 10, 23, 50, 0, 0, time.UTC)
	opt := Options{now: func() time.Time { return clock }}

	// expected renders the state of the live orders as the snapshot of day.
	expected := func(day string) []string {
		type agg struct {
			n   int
			sum float64
		}
		by := map[string]*agg{}
		for _, o := range readOrders(t, lh) {
			if o.deleted {
				continue
			}
			for _, k := range []string{o.country, "total"} {
				if by[k] == nil {
					by[k] = &agg{}
				}
				by[k].n++
				by[k].sum += o.amount
			}
		}
		var out []string
		for k, a := range by {
			out = append(out, fmt.Sprintf("%s %s %d %.2f", day, k, a.n, a.sum))
		}
		slices.Sort(out)
		return out
	}
	got := func() []string {
		gt, _ := lh.LoadTable(ctx, m.Table)
		_, recs, err := gt.Scan().ToArrowRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			c := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
			for i := range int(rec.NumRows()) {
				k := c("country").ValueStr(i)
				if c(mart.ColGroupingLevel).(*array.String).Value(i) == "total" {
					k = "total"
				}
				out = append(out, fmt.Sprintf("%s %s %d %.2f", c("snapshot_date").ValueStr(i), k,
					c("total_orders").(*array.Int64).Value(i), c("total_revenue").(*array.Decimal128).Value(i).ToFloat64(2)))
			}
			rec.Release()
		}
		slices.Sort(out)
		return out
	}
	run := func() Result {
		t.Helper()
		res, err := Run(ctx, lh, m, opt)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := run()
	day1 := expected("2026-05-10")
	if !slices.Equal(res.Partitions, []string{"2026-05-10"}) || !slices.Equal(got(), day1) {
		t.Fatalf("first snapshot: partitions %v\n got  %v\n want %v", res.Partitions, got(), day1)
	}
	// Same day, nothing changed: nothing to do.
	if res := run(); res.SnapshotID != 0 {
		t.Fatalf("rerun without changes committed %+v", res)
	}
	// Same day, orders changed (a delete, a new order): the day's snapshot is replaced.
	os.WriteFile(filepath.Join(landing, "2.jsonl"), []byte(`{"order_id":"o1","user_id":"u1","amount":1.00,"country":"US","category":"c0","created_at":"2026-04-01T00:00:00Z","updated_at":"2026-05-10T00:00:00Z","op":"d"}
{"order_id":"n1","user_id":"u1","amount":1000.00,"country":"NL","category":"c0","created_at":"2026-05-10T00:00:00Z","updated_at":"2026-05-10T00:00:01Z","op":"c"}
`), 0o644)
	loadAndSilver(t, lh, landing)
	run()
	day1 = expected("2026-05-10")
	if !slices.Equal(got(), day1) {
		t.Fatalf("replaced snapshot:\n got  %v\n want %v", got(), day1)
	}
	// Next day, no change: the state is written again as the new day's snapshot.
	clock = clock.Add(24 * time.Hour)
	if res := run(); !slices.Equal(res.Partitions, []string{"2026-05-11"}) {
		t.Fatalf("day 2 partitions %v", res.Partitions)
	}
	// Day 2 changes again: only day 2 follows.
	os.WriteFile(filepath.Join(landing, "3.jsonl"), []byte(`{"order_id":"n2","user_id":"u2","amount":5.00,"country":"NL","category":"c0","created_at":"2026-05-11T00:00:00Z","updated_at":"2026-05-11T00:00:01Z","op":"c"}
`), 0o644)
	loadAndSilver(t, lh, landing)
	run()
	want := append(slices.Clone(day1), expected("2026-05-11")...)
	slices.Sort(want)
	if g := got(); !slices.Equal(g, want) {
		t.Fatalf("two snapshots:\n got  %v\n want %v", g, want)
	}
}

// customersEntity is an upsert entity joined into orders by user_id.
func customersEntity() silver.EntitySpec {
	col := func(name, t string, req bool) silver.ColumnSpec {
		return silver.ColumnSpec{Name: name, Path: "$." + name, Type: typ(t), Required: req}
	}
	return silver.EntitySpec{
		Name: "customers", Table: "silver.customers", QuarantineTable: "silver.customers_quarantine",
		Mode: "upsert", Key: []string{"customer_id"}, UpdatedAt: "updated_at", Op: "op", Buckets: 2,
		Columns: []silver.ColumnSpec{col("customer_id", "string", true), col("segment", "string", false), col("updated_at", "timestamp", true), col("op", "string", false)},
	}
}

func loadCustomers(t *testing.T, lh *catalog.Lakehouse, dir string) {
	t.Helper()
	ctx := context.Background()
	src := bronze.FileSource{Name: "customers", System: "crm_file", Dir: dir}
	if _, err := bronze.IngestFiles(ctx, lh, "bronze.customers", []bronze.FileSource{src}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := silver.Run(ctx, lh, customersEntity(), "bronze.customers", silver.Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestJoins: a one-big-table mart by customer segment (LEFT and INNER join), equal to an
// independent hash join after every change; a customer change forces a full rebuild,
// an order change stays incremental.
func TestJoins(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	orders, customers := t.TempDir(), t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	randomOrders(t, orders, "1.jsonl", rng, 0, 300, base)
	loadAndSilver(t, lh, orders)
	segment := map[string]string{}
	var lines []string
	for u := range 30 { // users u30..u39 have no customer row
		segment[fmt.Sprint("u", u)] = []string{"vip", "regular", "new"}[u%3]
		lines = append(lines, fmt.Sprintf(`{"customer_id":"u%d","segment":%q,"updated_at":"2026-04-01T00:00:00Z","op":"c"}`, u, segment[fmt.Sprint("u", u)]))
	}
	os.WriteFile(filepath.Join(customers, "1.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	loadCustomers(t, lh, customers)

	joinMart := func(table, joinType string) MartSpec {
		m := kpiMart(table)
		m.Joins = []JoinSpec{{Entity: "customers", Table: "silver.customers", Type: joinType,
			On: []JoinOn{{Local: "user_id", Joined: "customer_id"}}, Columns: []string{"segment"},
			ColumnTypes: map[string]silver.Type{"customer_id": typ("string"), "segment": typ("string"), "updated_at": typ("timestamp"), "op": typ("string")},
			HasDeleted:  true}}
		m.Dims = []Dim{{Name: "segment", Type: typ("string")}, {Name: "country", Type: typ("string")}}
		return m
	}
	left, inner := joinMart("gold.by_segment", "left"), joinMart("gold.by_segment_inner", "inner")
	leftFull := joinMart("gold.by_segment_full", "left")
	// A filter on a joined column: an unmatched row's NULL segment makes it unknown (out).
	noNew := joinMart("gold.by_segment_no_new", "left")
	noNew.Filter = `not is_deleted and segment != "new"`

	// oracle: hash join in the test, then count and sum per (day, segment, country).
	oracle := func(joinType string, noNew bool) []string {
		type agg struct {
			n   int
			sum float64
		}
		by := map[string]*agg{}
		for _, o := range readOrders(t, lh) {
			seg, ok := segment[o.user]
			if !ok && joinType == "inner" {
				continue
			}
			if o.deleted || o.created.IsZero() || noNew && (!ok || seg == "new") {
				continue
			}
			if !ok {
				seg = "(null)"
			}
			d := o.created.Format(time.DateOnly)
			for _, k := range []string{d + " " + seg + " " + o.country + " detail", d + " " + seg + " (null) by_segment", d + " (null) (null) total"} {
				if by[k] == nil {
					by[k] = &agg{}
				}
				by[k].n++
				by[k].sum += o.amount
			}
		}
		var out []string
		for k, a := range by {
			out = append(out, fmt.Sprintf("%s %d %.2f", k, a.n, a.sum))
		}
		slices.Sort(out)
		return out
	}
	gold := func(m MartSpec) []string {
		gt, _ := lh.LoadTable(ctx, m.Table)
		_, recs, err := gt.Scan().ToArrowRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			c := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
			for i := range int(rec.NumRows()) {
				out = append(out, fmt.Sprintf("%s %s %s %s %d %.2f", c("report_date").ValueStr(i), c("segment").ValueStr(i), c("country").ValueStr(i),
					c(mart.ColGroupingLevel).(*array.String).Value(i), c("total_orders").(*array.Int64).Value(i), c("total_revenue").(*array.Decimal128).Value(i).ToFloat64(2)))
			}
			rec.Release()
		}
		slices.Sort(out)
		return out
	}
	step := func(name string, wantFull bool) {
		t.Helper()
		for _, m := range []MartSpec{left, inner, leftFull, noNew} {
			res, err := Run(ctx, lh, m, Options{Full: m.Table == leftFull.Table})
			if err != nil {
				t.Fatalf("%s: %s: %v", name, m.Table, err)
			}
			if m.Table == left.Table && res.Full != wantFull {
				t.Errorf("%s: full = %v, want %v (partitions %v)", name, res.Full, wantFull, res.Partitions)
			}
		}
		for _, c := range []struct {
			m        MartSpec
			joinType string
			noNew    bool
		}{{left, "left", false}, {inner, "inner", false}, {leftFull, "left", false}, {noNew, "left", true}} {
			if g, w := gold(c.m), oracle(c.joinType, c.noNew); !slices.Equal(g, w) {
				t.Fatalf("%s: %s (%d rows) != oracle (%d rows)\n%v\n%v", name, c.m.Table, len(g), len(w), first(g, 5), first(w, 5))
			}
		}
	}
	step("first run", true)
	if res, err := Run(ctx, lh, left, Options{}); err != nil || res.SnapshotID != 0 {
		t.Fatalf("rerun without changes: %+v %v", res, err)
	}
	sum := func() string {
		gt, _ := lh.LoadTable(ctx, left.Table)
		return lastSummary(gt)[PropJoinSnapshots]
	}
	if !strings.Contains(sum(), "silver.customers") {
		t.Fatalf("join snapshots not recorded: %q", sum())
	}

	// A customer changes segment, another is deleted: every partition may change.
	os.WriteFile(filepath.Join(customers, "2.jsonl"), []byte(`{"customer_id":"u1","segment":"new","updated_at":"2026-04-02T00:00:00Z","op":"u"}
{"customer_id":"u2","segment":"vip","updated_at":"2026-04-02T00:00:00Z","op":"d"}
`), 0o644)
	loadCustomers(t, lh, customers)
	segment["u1"] = "new"
	delete(segment, "u2")
	step("customer change", true)

	// Only orders change: incremental on the changed days.
	randomOrders(t, orders, "2.jsonl", rng, 1000, 5, base)
	loadAndSilver(t, lh, orders)
	step("order change", false)
}

// TestGoldAfterCompact: compacting Silver changes no row, so Gold recomputes nothing and
// stays equal to a full rebuild, before and after further changes.
func TestGoldAfterCompact(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 8))
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	randomOrders(t, landing, "1.jsonl", rng, 0, 300, base)
	loadAndSilver(t, lh, landing)
	// Updates (new amounts, some moved days), so Silver has equality deletes.
	randomOrders(t, landing, "2.jsonl", rng, 0, 150, base.AddDate(0, 0, 1))
	loadAndSilver(t, lh, landing)
	incr, full := kpiMart("gold.kpi"), kpiMart("gold.kpi_full")
	if _, err := Run(ctx, lh, incr, Options{}); err != nil {
		t.Fatal(err)
	}
	cres, err := silver.Compact(ctx, lh, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	if cres.SnapshotID == 0 || cres.DeleteFilesRemoved == 0 {
		t.Fatalf("compaction did nothing: %+v", cres)
	}
	res, err := Run(ctx, lh, incr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Full || len(res.Partitions) != 0 || res.SilverRows != 0 || res.SilverTo != cres.SnapshotID {
		t.Fatalf("gold after compaction recomputed: %+v", res)
	}
	if _, err := Run(ctx, lh, full, Options{Full: true}); err != nil {
		t.Fatal(err)
	}
	if a, b := goldRows(t, lh, incr.Table), goldRows(t, lh, full.Table); !slices.Equal(a, b) {
		t.Fatalf("after compaction: incremental (%d rows) != full (%d rows)", len(a), len(b))
	}
	// Later changes still recompute exactly their days.
	os.WriteFile(filepath.Join(landing, "3.jsonl"), []byte(`{"order_id":"o7","user_id":"u1","amount":3.00,"country":"US","category":"c0","created_at":"2026-04-20T10:00:00Z","updated_at":"2026-05-01T00:00:00Z","op":"u"}
`), 0o644)
	loadAndSilver(t, lh, landing)
	res, err = Run(ctx, lh, incr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Full || !slices.Contains(res.Partitions, "2026-04-20") || len(res.Partitions) != 2 {
		t.Fatalf("after compaction, a moved order recomputed %v (full %v), want its old and new day", res.Partitions, res.Full)
	}
	if _, err := Run(ctx, lh, full, Options{Full: true}); err != nil {
		t.Fatal(err)
	}
	if a, b := goldRows(t, lh, incr.Table), goldRows(t, lh, full.Table); !slices.Equal(a, b) {
		t.Fatalf("after compaction and a change: incremental != full")
	}
}

// TestMaxByMinBy checks max_by and min_by at every ROLLUP level against a separate
// implementation over the live Silver rows: max_by(user_id, amount) (amounts tie often:
// the largest user id of the largest amount) and min_by(amount, created_at) (hours tie:
// the smallest amount of the earliest hour), with each value's by in its hidden column.
func TestMaxByMinBy(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	randomOrders(t, landing, "1.jsonl", rand.New(rand.NewPCG(3, 4)), 0, 600, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	loadAndSilver(t, lh, landing)
	m := kpiMart("gold.by")
	m.Measures = append(m.Measures,
		MeasureSpec{Name: "top_user", Agg: mart.MaxBy, Column: "user_id", InputType: typ("string"), By: "amount", ByType: typ("decimal(18,2)")},
		MeasureSpec{Name: "first_amount", Agg: mart.MinBy, Column: "amount", InputType: typ("decimal(18,2)"), By: "created_at", ByType: typ("timestamp")})
	if _, err := Run(ctx, lh, m, Options{}); err != nil {
		t.Fatal(err)
	}

	// Oracle: the winning order per group, by a plain comparison of the pairs.
	type key struct{ day, country, category, level string }
	top, first := map[key]silverOrder{}, map[key]silverOrder{}
	for _, o := range readOrders(t, lh) {
		if o.deleted || o.created.IsZero() || !o.hasAmount {
			continue
		}
		d := o.created.Format(time.DateOnly)
		for _, k := range []key{{d, o.country, o.category, "detail"}, {d, o.country, "(null)", "by_country"}, {d, "(null)", "(null)", "total"}} {
			if w, ok := top[k]; !ok || o.amount > w.amount || o.amount == w.amount && o.user > w.user {
				top[k] = o
			}
			if w, ok := first[k]; !ok || o.created.Before(w.created) || o.created.Equal(w.created) && o.amount < w.amount {
				first[k] = o
			}
		}
	}
	gt, _ := lh.LoadTable(ctx, m.Table)
	_, recs, err := gt.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		c := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
		for i := range int(rec.NumRows()) {
			k := key{c("report_date").ValueStr(i), c("country").ValueStr(i), c("category").ValueStr(i), c(mart.ColGroupingLevel).(*array.String).Value(i)}
			wt, ok := top[k]
			if !ok {
				t.Fatalf("gold group %v not in the oracle", k)
			}
			seen++
			wf := first[k]
			got := []string{c("top_user").ValueStr(i), c(mart.ByCol("top_user")).(*array.Decimal128).Value(i).ToString(2),
				c("first_amount").(*array.Decimal128).Value(i).ToString(2),
				time.UnixMicro(int64(c(mart.ByCol("first_amount")).(*array.Timestamp).Value(i))).UTC().Format(time.RFC3339)}
			want := []string{wt.user, wt.amountText, wf.amountText, wf.created.Format(time.RFC3339)}
			if !slices.Equal(got, want) {
				t.Errorf("%v: gold %v, oracle %v", k, got, want)
			}
		}
		rec.Release()
	}
	if seen != len(top) {
		t.Fatalf("gold has %d groups, oracle %d", seen, len(top))
	}
}
