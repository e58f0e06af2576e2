package lakehousetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"goldbridge/lakehouse/catalog"
)

// The flights mart of the keyless-facts tests (gold's and the stage runner's): lines
// {"carrier", "dep", "distance"}, counted and summed per departure day and carrier into
// gold.flights_daily (dep_date, carrier, flights, distance).

// FlightCounts is the oracle: the flights and their distance per "day carrier" of the
// lines of the files, every line a flight.
func FlightCounts(t testing.TB, files ...[]string) map[string]string {
	t.Helper()
	type agg struct{ n, dist int64 }
	by := map[string]*agg{}
	for _, lines := range files {
		for _, l := range lines {
			var f struct {
				Carrier  string
				Dep      time.Time
				Distance int64
			}
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatal(err)
			}
			k := f.Dep.UTC().Format(time.DateOnly) + " " + f.Carrier
			if by[k] == nil {
				by[k] = &agg{}
			}
			by[k].n++
			by[k].dist += f.Distance
		}
	}
	out := map[string]string{}
	for k, a := range by {
		out[k] = fmt.Sprintf("%d flights, %d miles", a.n, a.dist)
	}
	return out
}

// GoldFlights reads gold.flights_daily into FlightCounts' form.
func GoldFlights(t testing.TB, lh *catalog.Lakehouse) map[string]string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), "gold.flights_daily")
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(n string) int { return rec.Schema().FieldIndices(n)[0] }
		for i := range int(rec.NumRows()) {
			k := rec.Column(col("dep_date")).ValueStr(i) + " " + rec.Column(col("carrier")).(*array.String).Value(i)
			out[k] = fmt.Sprintf("%s flights, %s miles", rec.Column(col("flights")).ValueStr(i), rec.Column(col("distance")).ValueStr(i))
		}
		rec.Release()
	}
	return out
}
