package push

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtest"
)

func TestMain(m *testing.M) { chtest.Main(m) }

// grainRows is one grain of a ROLLUP(country, category) mart with a distinct count
// and a quantiles measure: detail rows with their lists, then by_country and total.
func grainRows(t *testing.T) (arrow.RecordBatch, []string) {
	fields := []string{"grouping_level", "country", "category", "grouping_country", "grouping_category", "k__keys", "p__values"}
	sch := arrow.NewSchema([]arrow.Field{
		{Name: fields[0], Type: arrow.BinaryTypes.String},
		{Name: fields[1], Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: fields[2], Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: fields[3], Type: arrow.PrimitiveTypes.Int32},
		{Name: fields[4], Type: arrow.PrimitiveTypes.Int32},
		{Name: fields[5], Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: fields[6], Type: arrow.ListOf(arrow.PrimitiveTypes.Float64), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	str := func(i int, s string) {
		if s == "∅" {
			b.Field(i).AppendNull()
		} else {
			b.Field(i).(*array.StringBuilder).Append(s)
		}
	}
	add := func(level, country, category string, gc, gk int32, keys []string, vals []float64) {
		str(0, level)
		str(1, country)
		str(2, category)
		b.Field(3).(*array.Int32Builder).Append(gc)
		b.Field(4).(*array.Int32Builder).Append(gk)
		kb, vb := b.Field(5).(*array.ListBuilder), b.Field(6).(*array.ListBuilder)
		if level != "detail" {
			kb.AppendNull()
			vb.AppendNull()
			return
		}
		kb.Append(true)
		for _, k := range keys {
			kb.ValueBuilder().(*array.StringBuilder).Append(k)
		}
		vb.Append(true)
		vb.ValueBuilder().(*array.Float64Builder).AppendValues(vals, nil)
	}
	// Coarser rows first: the order of rows must not matter.
	add("total", "∅", "∅", 1, 1, nil, nil)
	add("by_country", "US", "∅", 0, 1, nil, nil)
	add("detail", "US", "books", 0, 0, []string{"a", "b", ""}, []float64{1.5, -2})
	add("detail", "US", "games", 0, 0, []string{"b", "c"}, []float64{3})
	add("by_country", "∅", "∅", 0, 1, nil, nil) // a NULL country kept at by_country
	add("detail", "∅", "books", 0, 0, []string{"a", strings.Repeat("x", 100)}, nil)
	add("detail", "∅", "∅", 0, 0, nil, []float64{7})
	return b.NewRecordBatch(), fields
}

// The states grainStates serializes load into ClickHouse's AggregateFunction columns
// and mean the same as ClickHouse's own states of the same keys and values.
func TestGrainStatesLoadIntoClickHouse(t *testing.T) {
	ctx := context.Background()
	rec, fields := grainRows(t)
	defer rec.Release()
	m := &serving.Mart{Grouping: "rollup", Dimensions: []serving.Dim{{Name: "country", Type: "String"}, {Name: "category", Type: "String"}}}
	specs := []stateSpec{
		{col: &stateCol{typ: "AggregateFunction(uniqExact, String)"}, field: 5, distinct: true},
		{col: &stateCol{typ: "AggregateFunction(groupArray, Float64)"}, field: 6},
	}
	g, err := newGrainStates(m, fields, specs)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.compute([]arrow.RecordBatch{rec}); err != nil {
		t.Fatal(err)
	}
	g.take(nil).appendTo(specs, 0, int(rec.NumRows()))

	// What each row must hold: the keys and values of the detail rows it covers.
	want := []struct {
		keys []string
		vals []float64
	}{
		{[]string{"", "a", "b", "c", strings.Repeat("x", 100)}, []float64{-2, 1.5, 3, 7}},
		{[]string{"", "a", "b", "c"}, []float64{-2, 1.5, 3}},
		{[]string{"", "a", "b"}, []float64{-2, 1.5}},
		{[]string{"b", "c"}, []float64{3}},
		{[]string{"a", strings.Repeat("x", 100)}, []float64{7}},
		{[]string{"a", strings.Repeat("x", 100)}, nil},
		{nil, []float64{7}},
	}

	db := chtest.Database(t)
	srv := chtest.Server(t)
	c, err := chconn.Open(ctx, chconn.Options{Addresses: []string{srv.TCPAddr()}, User: srv.User(), Password: srv.Password(), Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Conn().Exec(ctx, "CREATE TABLE s (i UInt32, k AggregateFunction(uniqExact, String), p AggregateFunction(groupArray, Float64)) ENGINE = MergeTree ORDER BY i"); err != nil {
		t.Fatal(err)
	}
	var ids proto.ColUInt32
	for i := range want {
		ids.Append(uint32(i))
	}
	sent := false
	err = c.Insert(ctx, "s", proto.Input{{Name: "i", Data: &ids}, {Name: "k", Data: specs[0].col}, {Name: "p", Data: specs[1].col}}, func() (bool, error) {
		ok := !sent
		sent = true
		return ok, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		keys := "['" + strings.Join(w.keys, "','") + "']"
		if w.keys == nil {
			keys = "CAST([], 'Array(String)')"
		}
		q := fmt.Sprintf(`SELECT finalizeAggregation(k), arraySort(finalizeAggregation(p)),
			(SELECT uniqExactMerge(x) FROM (SELECT k AS x FROM s WHERE i = %d UNION ALL SELECT uniqExactState(arrayJoin(%s))))
			FROM s WHERE i = %d`, i, keys, i)
		var n, union uint64
		var vals []float64
		if err := c.Conn().QueryRow(ctx, q).Scan(&n, &vals, &union); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		wv := slices.Clone(w.vals)
		slices.Sort(wv)
		if n != uint64(len(w.keys)) || union != n || !slices.Equal(vals, wv) && len(wv)+len(vals) > 0 {
			t.Errorf("row %d: %d keys (with ClickHouse's state of the same keys: %d), values %v; want %d keys, values %v", i, n, union, vals, len(w.keys), wv)
		}
	}
}
