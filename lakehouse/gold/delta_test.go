package gold

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

// tripsEntity is an append entity of taxi-like trips keyed by trip_id.
func tripsEntity() silver.EntitySpec {
	col := func(name, t string, req bool) silver.ColumnSpec {
		return silver.ColumnSpec{Name: name, Path: "$." + name, Type: typ(t), Required: req}
	}
	return silver.EntitySpec{
		Name: "trips", Table: "silver.trips", QuarantineTable: "silver.trips_quarantine",
		Mode: silver.ModeAppend, Key: []string{"trip_id"}, EventTime: "dep", Buckets: 2,
		Columns: []silver.ColumnSpec{col("trip_id", "string", true), col("carrier", "string", false), col("origin", "string", false),
			col("dep", "timestamp", false), col("distance", "int64", false), col("fare", "decimal(10,2)", false)},
		WarnQuarantinePct: 50, WarnDuplicatePct: 100,
	}
}

// deltaMart is a mart over the trips with every aggregate a delta merges, in grouping g.
func deltaMart(table, grouping string, sets [][]string) MartSpec {
	cols := map[string]silver.Type{}
	for _, c := range tripsEntity().Columns {
		cols[c.Name] = c.Type
	}
	dec, i64, ts, str := typ("decimal(10,2)"), typ("int64"), typ("timestamp"), typ("string")
	return MartSpec{
		Name: strings.TrimPrefix(table, "gold."), Table: table, SourceTable: "silver.trips", SourceKey: []string{"trip_id"},
		SourceColumns: cols, Filter: `carrier != "XX"`,
		GrainColumn: "dep", GrainUnit: "day", GrainAs: "day", Grouping: grouping, GroupingSets: sets,
		Dims: []Dim{{Name: "carrier", Type: str}, {Name: "origin", Type: str}},
		Measures: []MeasureSpec{
			{Name: "trips", Agg: mart.Count},
			{Name: "distance", Agg: mart.Sum, Column: "distance", InputType: i64},
			{Name: "fares", Agg: mart.Sum, Column: "fare", InputType: dec},
			{Name: "first_dep", Agg: mart.Min, Column: "dep", InputType: ts},
			{Name: "longest", Agg: mart.Max, Column: "distance", InputType: i64},
			{Name: "avg_fare", Agg: mart.Avg, Column: "fare", InputType: dec},
			{Name: "avg_distance", Agg: mart.Avg, Column: "distance", InputType: i64},
			{Name: "long_trips", Agg: mart.CountIf, If: "distance >= 50"},
			{Name: "long_fares", Agg: mart.SumIf, Column: "fare", InputType: dec, If: "distance >= 50"},
			{Name: "long_avg", Agg: mart.AvgIf, Column: "fare", InputType: dec, If: "distance >= 50"},
			{Name: "priciest_origin", Agg: mart.MaxBy, Column: "origin", InputType: str, By: "fare", ByType: dec},
			{Name: "first_fare", Agg: mart.MinBy, Column: "fare", InputType: dec, By: "dep", ByType: ts},
		},
		Checks: []CheckSpec{{Name: "unique", Type: "unique_grain", Severity: "critical"}, {Name: "consistency", Type: "consistency", Severity: "critical"}},
	}
}

// carriersEntity is an upsert entity of carriers and their alliance, joined to trips.
func carriersEntity() silver.EntitySpec {
	col := func(name, t string, req bool) silver.ColumnSpec {
		return silver.ColumnSpec{Name: name, Path: "$." + name, Type: typ(t), Required: req}
	}
	return silver.EntitySpec{
		Name: "carriers", Table: "silver.carriers", QuarantineTable: "silver.carriers_quarantine",
		Mode: "upsert", Key: []string{"code"}, UpdatedAt: "updated_at", Buckets: 2,
		Columns: []silver.ColumnSpec{col("code", "string", true), col("alliance", "string", false), col("updated_at", "timestamp", true)},
	}
}

// joinedDeltaMart is deltaMart by alliance (a LEFT join of the carriers) and origin.
func joinedDeltaMart(table string) MartSpec {
	m := deltaMart(table, "rollup", nil)
	m.Joins = []JoinSpec{{Entity: "carriers", Table: "silver.carriers", Type: "left",
		On: []JoinOn{{Local: "carrier", Joined: "code"}}, Columns: []string{"alliance"},
		ColumnTypes: map[string]silver.Type{"code": typ("string"), "alliance": typ("string"), "updated_at": typ("timestamp")}}}
	m.Dims = []Dim{{Name: "alliance", Type: typ("string")}, {Name: "origin", Type: typ("string")}}
	return m
}

// TestDeltaEqualsRecompute is issue 41's property: random increments of trips (new trips
// on old and new days, trips re-sent, NULL fares, rows the filter drops) and of orders
// (creates, updates, deletes) go through the incremental Gold run, which merges an
// increment that only added rows into the Gold partitions it touches (Result.Delta) and
// recomputes the others; after every increment each mart equals, row for row, the same
// mart computed by the recompute path (the hook that turns merging off) and by a full
// rebuild. The trips' increments only add rows: each is merged. An orders increment
// that updates or deletes is recomputed. A mart joining the carriers merges the trips'
// increments while the carriers stand still, and is rebuilt when one changes alliance.
func TestDeltaEqualsRecompute(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	r := rand.New(rand.NewPCG(41, 2))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tripsDir, ordersDir := t.TempDir(), t.TempDir()
	var sent []string // trip lines landed, to re-send some
	carriers, origins := []string{"AA", "DL", "UA", "XX"}, []string{"JFK", "LGA", "EWR", "BOS", "ORD"}
	nextTrip, nextOrder := 0, 0
	var orders []int // order ids created
	marts := []struct {
		name, grouping string
		sets           [][]string
	}{{"rollup", "rollup", nil}, {"cube", "cube", nil}, {"sets", "sets", [][]string{{"origin"}, {}}}}
	run := func(step int, m MartSpec, opt Options) Result {
		t.Helper()
		res, err := Run(ctx, lh, m, opt)
		if err != nil {
			t.Fatalf("step %d %s: %v", step, m.Table, err)
		}
		return res
	}
	same := func(step int, a, b string) {
		t.Helper()
		got, want := goldRows(t, lh, a), goldRows(t, lh, b)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("step %d: %s (%d rows) != %s (%d rows)\nfirst difference: %s", step, a, len(got), b, len(want), firstDiff(got, want))
		}
	}
	carriersDir := t.TempDir()
	alliance := func(step int, lines ...string) {
		land(t, lh, carriersDir, "carriers", step, lines, carriersEntity())
	}
	alliance(0, `{"code":"AA","alliance":"oneworld","updated_at":"2026-01-01T00:00:00Z"}`,
		`{"code":"DL","alliance":"skyteam","updated_at":"2026-01-01T00:00:00Z"}`) // UA: no match
	merged := 0
	for step := range 10 {
		carriersMoved := step == 6
		if carriersMoved {
			alliance(step, `{"code":"UA","alliance":"star","updated_at":"2026-01-02T00:00:00Z"}`,
				`{"code":"DL","alliance":"none","updated_at":"2026-01-02T00:00:00Z"}`)
		}
		// Trips: new ones over days 0-5 (the later steps reach new days), some re-sent.
		var lines []string
		for range 20 + r.IntN(120) {
			fare := "null"
			if r.IntN(8) > 0 {
				fare = fmt.Sprintf("%d.%02d", 5+r.IntN(60), []int{0, 25, 50}[r.IntN(3)])
			}
			dep := base.AddDate(0, 0, r.IntN(2+step/2)).Add(time.Duration(r.IntN(24*60)) * time.Minute)
			lines = append(lines, fmt.Sprintf(`{"trip_id":"t%d","carrier":%q,"origin":%q,"dep":%q,"distance":%d,"fare":%s}`,
				nextTrip, carriers[r.IntN(len(carriers))], origins[r.IntN(len(origins))], dep.Format(time.RFC3339), 1+r.IntN(99), fare))
			nextTrip++
		}
		for range r.IntN(5) {
			if len(sent) > 0 {
				lines = append(lines, sent[r.IntN(len(sent))])
			}
		}
		sent = append(sent, lines...)
		land(t, lh, tripsDir, "trips", step, lines, tripsEntity())
		// Orders: creates, and from the third step updates and deletes of earlier ones
		// on even steps.
		lines = lines[:0]
		for range 10 + r.IntN(40) {
			lines = append(lines, orderLine(nextOrder, "c", 10+r.IntN(90), base.AddDate(0, 0, r.IntN(4)), step))
			orders = append(orders, nextOrder)
			nextOrder++
		}
		updates := step >= 2 && step%2 == 0
		if updates {
			for range 5 + r.IntN(10) {
				lines = append(lines, orderLine(orders[r.IntN(len(orders))], []string{"u", "d"}[r.IntN(2)], 10+r.IntN(90), base.AddDate(0, 0, r.IntN(4)), step))
			}
		}
		land(t, lh, ordersDir, "orders", step, lines, ordersEntity())

		for _, mc := range marts {
			inc, rec, full := deltaMart("gold.d_"+mc.name, mc.grouping, mc.sets), deltaMart("gold.r_"+mc.name, mc.grouping, mc.sets), deltaMart("gold.f_"+mc.name, mc.grouping, mc.sets)
			res := run(step, inc, Options{})
			run(step, rec, Options{NoDelta: true})
			run(step, full, Options{Full: true})
			if step > 0 && !res.Delta {
				t.Fatalf("step %d %s: an increment of added trips was not merged: %+v", step, inc.Table, res)
			}
			merged++
			same(step, inc.Table, rec.Table)
			same(step, inc.Table, full.Table)
		}
		jInc, jRec, jFull := joinedDeltaMart("gold.jd"), joinedDeltaMart("gold.jr"), joinedDeltaMart("gold.jf")
		res := run(step, jInc, Options{})
		run(step, jRec, Options{NoDelta: true})
		run(step, jFull, Options{Full: true})
		same(step, jInc.Table, jRec.Table)
		same(step, jInc.Table, jFull.Table)
		if step > 0 && res.Delta == carriersMoved {
			t.Fatalf("step %d: the joined mart merged %v with the carriers moved %v: %+v", step, res.Delta, carriersMoved, res)
		}

		kInc, kFull := kpiMart("gold.kd"), kpiMart("gold.kf")
		kInc.Measures = kInc.Measures[:2] // count and sum: a mart a delta can merge
		kFull.Measures = kInc.Measures
		res = run(step, kInc, Options{})
		run(step, kFull, Options{Full: true})
		t.Logf("step %d: orders increment merged %v (updates %v)", step, res.Delta, updates)
		same(step, kInc.Table, kFull.Table)
		if res.Delta && updates {
			t.Fatalf("step %d: an increment with updates and deletes was merged", step)
		}
	}
	if merged == 0 {
		t.Fatal("no increment was merged")
	}
}

// land writes lines as landing file step of an entity and runs Bronze and Silver on it.
func land(t *testing.T, lh *catalog.Lakehouse, dir, entity string, step int, lines []string, spec silver.EntitySpec) {
	t.Helper()
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.jsonl", step)), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := bronze.FileSource{Name: "landing", System: "test_file", Dir: dir}
	if _, err := bronze.IngestFiles(ctx, lh, "bronze."+entity, []bronze.FileSource{src}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := silver.Run(ctx, lh, spec, "bronze."+entity, silver.Options{}); err != nil {
		t.Fatal(err)
	}
}

// orderLine is an orders CDC event of ordersEntity.
func orderLine(id int, op string, amount int, created time.Time, step int) string {
	return fmt.Sprintf(`{"order_id":"o%d","user_id":"u%d","amount":%d.50,"country":"DE","category":"c%d","status":"paid","created_at":%q,"updated_at":"2026-04-01T00:%02d:00Z","op":%q}`,
		id, id%7, amount, id%3, created.Format(time.RFC3339), step, op)
}

// firstDiff is the first row of got not in want (or of want not in got).
func firstDiff(got, want []string) string {
	for _, g := range got {
		if !slices.Contains(want, g) {
			return "only in the first: " + g
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			return "only in the second: " + w
		}
	}
	return "(order)"
}
