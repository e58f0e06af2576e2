package sync_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/serving"
)

// order is one Silver fact of the test generator.
type order struct {
	day      time.Time
	country  *string
	category string
	cents    int64
	customer string
}

// goldRow is one row of gold.daily_revenue_kpi (docs/gold.md).
type goldRow struct {
	day                 time.Time
	country, category   *string
	gCountry, gCategory int32
	level               string
	revenue             int64 // cents (decimal(38,2))
	revenueNull         bool  // revenue is NULL (every amount of the group was NULL)
	orders              int64
	customers           int64
	keys                []string // detail only
	avgOrder            int64    // decimal(38,8) units
	avgSum              int64    // cents
	avgCount            int64
}

func strp(s string) *string { return &s }

// genOrders makes n orders per day for the given days, deterministic in seed.
func genOrders(seed uint64, days []time.Time, n int) []order {
	r := rand.New(rand.NewPCG(seed, 1))
	countries := []*string{strp("US"), strp("DE"), strp("FR"), nil}
	cats := []string{"books", "games", "tools"}
	var out []order
	for _, d := range days {
		for range n {
			out = append(out, order{d, countries[r.IntN(4)], cats[r.IntN(3)], int64(r.IntN(100000)) + 1, fmt.Sprintf("c%d", r.IntN(n*2))})
		}
	}
	return out
}

// goldRows computes ROLLUP(country, category) per day, as the Gold stage does.
func goldRows(orders []order) []goldRow {
	type key struct {
		day          time.Time
		country, cat string
		cNull        bool
		level        int // 0 detail, 1 by_country, 2 total
	}
	type acc struct {
		cents, n int64
		cust     map[string]bool
	}
	accs := map[key]*acc{}
	for _, o := range orders {
		c, cn := "", o.country == nil
		if !cn {
			c = *o.country
		}
		for lv, k := range []key{{o.day, c, o.category, cn, 0}, {o.day, c, "", cn, 1}, {o.day, "", "", false, 2}} {
			k.level = lv
			a := accs[k]
			if a == nil {
				a = &acc{cust: map[string]bool{}}
				accs[k] = a
			}
			a.cents += o.cents
			a.n++
			a.cust[o.customer] = true
		}
	}
	var out []goldRow
	for k, a := range accs {
		r := goldRow{day: k.day, revenue: a.cents, orders: a.n, customers: int64(len(a.cust)), avgSum: a.cents, avgCount: a.n}
		// avg at scale 8 = cents * 10^6 / n, rounded half away from zero
		num := new(big.Int).Mul(big.NewInt(a.cents), big.NewInt(2_000_000))
		num.Add(num, big.NewInt(a.n))
		r.avgOrder = num.Quo(num, big.NewInt(2*a.n)).Int64()
		if k.level <= 1 && !k.cNull {
			r.country = strp(k.country)
		}
		switch k.level {
		case 0:
			r.level, r.category = "detail", strp(k.cat)
			for c := range a.cust {
				r.keys = append(r.keys, c)
			}
			sort.Strings(r.keys)
		case 1:
			r.level, r.gCategory = "by_country", 1
		case 2:
			r.level, r.gCountry, r.gCategory = "total", 1, 1
		}
		out = append(out, r)
	}
	return out
}

func goldSchema() *iceberg.Schema {
	dec := func(s int) iceberg.Type { return iceberg.DecimalTypeOf(38, s) }
	f := func(id int, name string, t iceberg.Type, req bool) iceberg.NestedField {
		return iceberg.NestedField{ID: id, Name: name, Type: t, Required: req}
	}
	return iceberg.NewSchema(0,
		f(1, "report_date", iceberg.PrimitiveTypes.Date, true),
		f(2, "country", iceberg.PrimitiveTypes.String, false),
		f(3, "category", iceberg.PrimitiveTypes.String, false),
		f(4, "grouping_country", iceberg.PrimitiveTypes.Int32, true),
		f(5, "grouping_category", iceberg.PrimitiveTypes.Int32, true),
		f(6, "grouping_level", iceberg.PrimitiveTypes.String, true),
		f(7, "revenue", dec(2), false),
		f(8, "orders", iceberg.PrimitiveTypes.Int64, false),
		f(9, "customers", iceberg.PrimitiveTypes.Int64, false),
		f(10, "customers__keys", &iceberg.ListType{ElementID: 16, Element: iceberg.PrimitiveTypes.String, ElementRequired: false}, false),
		f(11, "avg_order", dec(8), false),
		f(12, "avg_order__sum", dec(2), false),
		f(13, "avg_order__count", iceberg.PrimitiveTypes.Int64, false),
		f(14, "_calculated_at", iceberg.PrimitiveTypes.TimestampTz, false),
		f(15, "_run_id", iceberg.PrimitiveTypes.String, false),
	)
}

// testMart is the serving definition of the generated Gold table.
func testMart(db string, aggregating bool) *serving.Mart {
	m := &serving.Mart{
		Name: "daily_revenue_kpi", Database: db, Table: "daily_revenue_kpi",
		Grain:      serving.Grain{As: "report_date", Unit: "day"},
		Dimensions: []serving.Dim{{Name: "country", Type: "String"}, {Name: "category", Type: "String"}},
		Grouping:   "rollup",
		Measures: []serving.Measure{
			{Name: "revenue", Agg: "sum", Type: "Decimal(38, 2)"},
			{Name: "orders", Agg: "count", Type: "Int64"},
		},
		// No TTL: the test data is dated May 2026 and ClickHouse applies TTLs by its real clock.
		PartitionBy: "day", HotWindow: 10 * 24 * time.Hour, Distinct: "uniqExact",
	}
	if aggregating {
		m.Measures = append(m.Measures,
			serving.Measure{Name: "customers", Agg: "count_distinct"},
			serving.Measure{Name: "avg_order", Agg: "avg", Type: "Decimal(38, 2)"})
	}
	return m
}

func record(t testing.TB, sch *arrow.Schema, rows []goldRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	ts := arrow.Timestamp(time.Date(2026, 5, 20, 0, 0, 0, 0, time.UTC).UnixMicro())
	str := func(i int, p *string) {
		if p == nil {
			b.Field(i).AppendNull()
		} else {
			b.Field(i).(*array.StringBuilder).Append(*p)
		}
	}
	for _, r := range rows {
		b.Field(0).(*array.Date32Builder).Append(arrow.Date32FromTime(r.day))
		str(1, r.country)
		str(2, r.category)
		b.Field(3).(*array.Int32Builder).Append(r.gCountry)
		b.Field(4).(*array.Int32Builder).Append(r.gCategory)
		b.Field(5).(*array.StringBuilder).Append(r.level)
		if r.revenueNull {
			b.Field(6).AppendNull()
		} else {
			b.Field(6).(*array.Decimal128Builder).Append(decimal128.FromI64(r.revenue))
		}
		b.Field(7).(*array.Int64Builder).Append(r.orders)
		b.Field(8).(*array.Int64Builder).Append(r.customers)
		lb := b.Field(9).(*array.ListBuilder)
		if r.level == "detail" {
			lb.Append(true)
			for _, k := range r.keys {
				lb.ValueBuilder().(*array.StringBuilder).Append(k)
			}
		} else {
			lb.AppendNull()
		}
		b.Field(10).(*array.Decimal128Builder).Append(decimal128.FromI64(r.avgOrder))
		b.Field(11).(*array.Decimal128Builder).Append(decimal128.FromI64(r.avgSum))
		b.Field(12).(*array.Int64Builder).Append(r.avgCount)
		b.Field(13).(*array.TimestampBuilder).Append(ts)
		b.Field(14).(*array.StringBuilder).Append("run-1")
	}
	return b.NewRecordBatch()
}

// rowsOfDay returns the rows of rows whose grain is day.
func rowsOfDay(rows []goldRow, day time.Time) []goldRow {
	var out []goldRow
	for _, r := range rows {
		if r.day.Equal(day) {
			out = append(out, r)
		}
	}
	return out
}

// writeGold replaces the given days of gold.daily_revenue_kpi with rows (creating the
// table) in one commit and returns the new table.
func writeGold(t testing.TB, lh *catalog.Lakehouse, rows []goldRow, days []time.Time) *table.Table {
	t.Helper()
	ctx := context.Background()
	sch := goldSchema()
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "report_date", Transform: iceberg.IdentityTransform{}})
	tbl, _, err := lh.LoadOrCreateTable(ctx, "gold.daily_revenue_kpi", sch, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	asch, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, asch, rows)
	defer rec.Release()
	rdr, err := array.NewRecordReader(asch, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var filter iceberg.BooleanExpression = iceberg.AlwaysFalse{}
	for _, d := range days {
		filter = iceberg.NewOr(filter, iceberg.EqualTo(iceberg.Reference("report_date"), iceberg.Date(d.Unix()/86400)))
	}
	tbl, err = tbl.Overwrite(ctx, rdr, iceberg.Properties{"goldbridge.run-id": "test"}, table.WithOverwriteFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func daysFrom(start time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = start.AddDate(0, 0, i)
	}
	return out
}
