package gold

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/silver"
)

// flightsEntity is an append entity of flights without a natural key (identity: delivery).
func flightsEntity() silver.EntitySpec {
	col := func(name, t string) silver.ColumnSpec {
		return silver.ColumnSpec{Name: name, Path: "$." + name, Type: typ(t), Required: true}
	}
	return silver.EntitySpec{
		Name: "flights", Table: "silver.flights", QuarantineTable: "silver.flights_quarantine",
		Mode: silver.ModeAppend, Identity: silver.IdentityDelivery, EventTime: "dep", Lookback: time.Hour, Buckets: 4,
		Columns:           []silver.ColumnSpec{col("carrier", "string"), col("dep", "timestamp"), col("distance", "int64")},
		WarnQuarantinePct: 50, WarnDuplicatePct: 100,
	}
}

// flightsMart counts the flights and sums their distance per day and carrier.
func flightsMart() MartSpec {
	cols := map[string]silver.Type{silver.ColDeliveryID: typ("string")}
	for _, c := range flightsEntity().Columns {
		cols[c.Name] = c.Type
	}
	return MartSpec{
		Name: "flights_daily", Table: "gold.flights_daily", SourceTable: "silver.flights",
		SourceKey: flightsEntity().KeyColumns(), SourceColumns: cols,
		GrainColumn: "dep", GrainUnit: "day", GrainAs: "dep_date", Grouping: "none",
		Dims: []Dim{{Name: "carrier", Type: typ("string")}},
		Measures: []MeasureSpec{
			{Name: "flights", Agg: "count"},
			{Name: "distance", Agg: "sum", Column: "distance", InputType: typ("int64")},
		},
		Checks: []CheckSpec{{Name: "unique", Type: "unique_grain", Severity: "critical"}},
	}
}

// TestGoldCountsKeylessFacts builds a Gold mart over flights without a natural key, with
// identical flights in each landing file (a flight twice in one file, the same flight in
// two files): its counts are every line's flight. A changed file read again with
// --reingest adds only its new line to the counts; a replay of Silver, and the full
// rebuild of Gold it causes, give the same counts.
func TestGoldCountsKeylessFacts(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	flight := func(carrier string, day, hour, dist int) string {
		return fmt.Sprintf(`{"carrier":%q,"dep":"2024-01-%02dT%02d:00:00Z","distance":%d}`, carrier, day, hour, dist)
	}
	a := []string{flight("AA", 1, 8, 700), flight("AA", 1, 8, 700), flight("DL", 1, 9, 300), flight("AA", 2, 8, 700), flight("DL", 2, 9, 300)}
	b := []string{flight("AA", 1, 8, 700), flight("DL", 2, 9, 300), flight("DL", 2, 9, 300), flight("UA", 3, 7, 1200)}
	write := func(name string, lines []string) {
		if err := os.WriteFile(filepath.Join(landing, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	step := func(what string, reingest, replay bool, want map[string]string) {
		t.Helper()
		src := bronze.FileSource{Name: "landing", System: "bts_file", Dir: landing}
		if _, err := bronze.IngestFiles(ctx, lh, "bronze.flights", []bronze.FileSource{src}, bronze.Options{Reingest: reingest}); err != nil {
			t.Fatal(err)
		}
		run := silver.Run
		if replay {
			run = silver.Replay
		}
		if _, err := run(ctx, lh, flightsEntity(), "bronze.flights", silver.Options{}); err != nil {
			t.Fatal(err)
		}
		res, err := Run(ctx, lh, flightsMart(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if replay && !res.Full {
			t.Errorf("%s: Gold was not rebuilt after the replay: %+v", what, res)
		}
		if got := lakehousetest.GoldFlights(t, lh); !maps.Equal(got, want) {
			t.Fatalf("%s: gold\n%v\nwant\n%v", what, got, want)
		}
	}

	write("a.jsonl", a)
	write("b.jsonl", b)
	step("first", false, false, lakehousetest.FlightCounts(t, a, b))
	b2 := append(b, flight("UA", 3, 7, 1200)) // the UA flight a second time
	write("b.jsonl", b2)
	step("reingest", true, false, lakehousetest.FlightCounts(t, a, b2))
	step("replay", false, true, lakehousetest.FlightCounts(t, a, b2))
	if got := lakehousetest.FlightCounts(t, a, b2)["2024-01-01 AA"]; got != "3 flights, 2100 miles" {
		t.Fatalf("oracle: %s", got)
	}
}
