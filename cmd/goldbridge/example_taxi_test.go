package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.yaml.in/yaml/v3"

	"goldbridge/serving/chlocal"
)

// newExampleEnv is a state directory running examples/<name> on its own ClickHouse ports,
// after edit (if any) has changed the parsed YAML.
func newExampleEnv(t *testing.T, name string, edit ...func(cfg map[string]any)) *forgetEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: the embedded stack with a local ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ports := testPorts(t, 2)
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["clickhouse"].(map[string]any)["local"] = map[string]any{"tcp_port": ports[0], "http_port": ports[1]}
	for _, f := range edit {
		f(cfg)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &forgetEnv{t: t, bin: buildGoldbridge(t), state: filepath.Join(dir, "state"), cfg: filepath.Join(dir, "pipeline.yaml")}
	writeFile(t, e.cfg, string(out))
	return e
}

// stdout runs one goldbridge command and returns its standard output alone (the logs
// go to a file of their own); it fails the test unless the command exits 0.
func (e *forgetEnv) stdout(args ...string) string {
	e.t.Helper()
	dir := e.t.TempDir()
	outF, errF := filepath.Join(dir, "out"), filepath.Join(dir, "err")
	o, err := os.Create(outF)
	if err != nil {
		e.t.Fatal(err)
	}
	defer o.Close()
	l, err := os.Create(errF)
	if err != nil {
		e.t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(e.bin, append([]string{"-c", e.cfg, "--state-dir", e.state}, args...)...)
	cmd.Stdout, cmd.Stderr = o, l
	if e.env != nil {
		cmd.Env = append(os.Environ(), e.env...)
	}
	if err := cmd.Run(); err != nil {
		logs, _ := os.ReadFile(errF)
		e.t.Fatalf("goldbridge %s: %v\n%s", strings.Join(args, " "), err, tail(string(logs), 4000))
	}
	out, err := os.ReadFile(outF)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(out)
}

// tlcTrip is a landing row as the oracle reads it from the generated file; nil is NULL.
type tlcTrip struct {
	vendor, pu, do                  int64
	pickup                          time.Time
	dropoff                         *time.Time
	pc, rate, fare, congestion, fee *float64
	total                           float64
}

// TestTaxiExample runs examples/taxi.yaml as a new user would (demo generate, run) over
// two overlapping landings, from Parquet and from CSV, a third whose Gold is recomputed
// (gold --no-delta) rather than merged, then a run with nothing new and a replay, and compares Silver, the quarantine counts by reason, Gold and taxi_daily_final
// with an oracle that reads the generated files itself and applies the course's registry
// (seed 003) by hand.
func TestTaxiExample(t *testing.T) {
	for _, format := range []string{"parquet", "csv"} {
		t.Run(format, func(t *testing.T) {
			e := newExampleEnv(t, "taxi.yaml")
			var raw []tlcTrip
			for landing := 1; landing <= 3; landing++ {
				e.run("demo", "generate", "--dataset", "taxi", "--format", format, "--landing", strconv.Itoa(landing), "--trips", "1200", "--seed", "7")
				path := filepath.Join(e.state, "landing", "taxi", fmt.Sprintf("yellow_tripdata_%d.%s", landing, format))
				raw = append(raw, readTLC(t, path, format)...)
				if landing < 3 {
					// The second landing only adds trips: Gold merges them (delta.go).
					if out := e.run("run"); landing == 2 && !strings.Contains(out, "merged with the added rows") {
						t.Errorf("the second landing's Gold was not merged:\n%s", out)
					}
				} else {
					// The third, with --no-delta: its partitions recomputed whole, the same answer.
					e.run("ingest")
					e.run("silver")
					if out := e.run("gold", "--no-delta"); strings.Contains(out, "merged with the added rows") || !strings.Contains(out, "partitions") {
						t.Errorf("gold --no-delta:\n%s", out)
					}
					e.run("sync")
				}
				checkTaxi(t, e, raw)
			}
			tables := func() string { return e.stdout("tables") }
			before := tables()
			if out := e.run("run"); !strings.Contains(out, "pushed 0 partitions") {
				t.Errorf("a run with nothing new pushed something:\n%s", out)
			}
			if after := tables(); after != before {
				t.Errorf("a run with nothing new changed tables:\n%s\nthen\n%s", before, after)
			}
			e.run("replay", "yellow_trips")
			e.run("gold")
			e.run("sync")
			checkTaxi(t, e, raw)
		})
	}
}

// checkTaxi compares what goldbridge wrote with the oracle over the raw landing rows.
func checkTaxi(t *testing.T, e *forgetEnv, raw []tlcTrip) {
	t.Helper()
	zones := map[int64][2]string{}
	for i, z := range [][2]string{{"EWR", "Newark Airport"}, {"Queens", "Jamaica Bay"}, {"Bronx", "Allerton/Pelham Gardens"},
		{"Manhattan", "Alphabet City"}, {"Staten Island", "Arden Heights"}, {"Brooklyn", "Bay Ridge"}, {"Queens", "Astoria"}, {"Manhattan", "Battery Park"}} {
		zones[int64(i+1)] = z
	}
	const null = `\N`
	num := func(p *float64, def float64) float64 {
		if p == nil {
			return def
		}
		return *p
	}
	g := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	reasons := map[string]int{}
	type gkey struct {
		day, borough string
		vendor       int64
	}
	type gval struct {
		trips, pax int64
		max, fees  float64
	}
	gold := map[gkey]*gval{}
	seen := map[string]bool{}
	var silverRows []string
	for _, r := range raw {
		reason := ""
		switch {
		case r.fare == nil || *r.fare < 0:
			reason = "F1:negative_fare"
		case r.total > 1000:
			reason = "F2:extreme_total"
		case r.pickup.Year() != 2024:
			reason = "F3:out_of_range"
		case r.pc != nil && *r.pc != float64(int64(*r.pc)):
			reason = "N1:normalize_failed"
		}
		if reason != "" {
			reasons[reason]++
			continue
		}
		drop, dur := null, null
		if r.dropoff != nil {
			drop = r.dropoff.Format("2006-01-02 15:04:05.000000")
			dur = strconv.FormatInt(int64(r.dropoff.Sub(r.pickup)/time.Second), 10)
		}
		key := fmt.Sprint(r.vendor, r.pickup, drop, r.pu, r.do, *r.fare, r.total)
		if seen[key] {
			continue // the overlap: a trip delivered again is a duplicate
		}
		seen[key] = true
		zone := func(id int64) (string, string) {
			if z, ok := zones[id]; ok {
				return z[0], z[1]
			}
			return null, null
		}
		pb, pz := zone(r.pu)
		db, dz := zone(r.do)
		pc := int64(num(r.pc, 0))
		silverRows = append(silverRows, strings.Join([]string{strconv.FormatInt(r.vendor, 10), r.pickup.Format("2006-01-02 15:04:05.000000"), drop,
			strconv.FormatInt(pc, 10), strconv.FormatInt(int64(num(r.rate, 99)), 10), strconv.FormatInt(r.pu, 10), strconv.FormatInt(r.do, 10),
			g(*r.fare), g(r.total), g(num(r.congestion, 0)), g(num(r.fee, 0)), dur, pb, pz, db, dz}, "\t"))
		k := gkey{r.pickup.Format(time.DateOnly), pb, r.vendor}
		if gold[k] == nil {
			gold[k] = &gval{max: r.total}
		}
		gold[k].trips++
		gold[k].pax += pc
		gold[k].max = max(gold[k].max, r.total)
		gold[k].fees += num(r.fee, 0) // 0 or 1.75: exact in any order
	}
	slices.Sort(silverRows)
	var wantReasons, wantGold, wantFinal []string
	for r, n := range reasons {
		wantReasons = append(wantReasons, fmt.Sprintf("%s\t%d", r, n))
	}
	slices.Sort(wantReasons)
	newest := ""
	for k := range gold {
		newest = max(newest, k.day)
	}
	nd, _ := time.Parse(time.DateOnly, newest)
	hotFrom := nd.AddDate(0, 0, -90).Format(time.DateOnly) // hot_window 90d, anchor data
	for k, v := range gold {
		row := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%s\t%s", k.day, k.borough, k.vendor, v.trips, v.pax, g(v.max), g(v.fees))
		wantGold = append(wantGold, row)
		if k.day >= hotFrom {
			wantFinal = append(wantFinal, row)
		}
	}
	slices.Sort(wantGold)
	slices.Sort(wantFinal)
	if len(silverRows) < 1000 || len(wantReasons) != 4 || len(wantGold) < 100 {
		t.Fatalf("oracle: %d silver rows, reasons %v, %d gold rows", len(silverRows), wantReasons, len(wantGold))
	}

	// The TLC's names, as the source has them, in Silver, Gold and ClickHouse (issue 19).
	compareRows(t, "silver.yellow_trips", nonEmptyLines(e.stdout("query", `SELECT VendorID, toString(tpep_pickup_datetime), toString(tpep_dropoff_datetime),
		passenger_count, RatecodeID, PULocationID, DOLocationID, fare_amount, total_amount, congestion_surcharge, Airport_fee,
		toInt64(round(trip_duration_minutes * 60)), pickup_borough, pickup_zone, dropoff_borough, dropoff_zone
		FROM silver.yellow_trips ORDER BY ALL FORMAT TSV`)), silverRows)
	compareRows(t, "quarantine by reason", nonEmptyLines(e.stdout("query", "SELECT error_reason, count() FROM silver.yellow_trips_quarantine GROUP BY 1 ORDER BY 1 FORMAT TSV")), wantReasons)
	const cols = "toString(pickup_date), pickup_borough, VendorID, trips, passengers, max_total, Airport_fee"
	compareRows(t, "gold.taxi_daily", nonEmptyLines(e.stdout("query", "SELECT "+cols+" FROM gold.taxi_daily ORDER BY ALL FORMAT TSV")), wantGold)
	compareRows(t, "taxi_daily_final", nonEmptyLines(e.stdout("clickhouse", "query", "SELECT "+cols+" FROM marts.taxi_daily_final ORDER BY ALL FORMAT TSV")), wantFinal)
	if out := e.run("check"); !strings.Contains(out, "check taxi_daily: no drift") {
		t.Errorf("check after sync:\n%s", out)
	}
}

// readTLC reads a generated landing file with arrow's Parquet reader or encoding/csv.
func readTLC(t *testing.T, path, format string) []tlcTrip {
	t.Helper()
	if format == "csv" {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		col := map[string]int{}
		for i, h := range recs[0] {
			col[h] = i
		}
		var out []tlcTrip
		for _, r := range recs[1:] {
			fl := func(name string) *float64 {
				if r[col[name]] == "" {
					return nil
				}
				v, err := strconv.ParseFloat(r[col[name]], 64)
				if err != nil {
					t.Fatal(err)
				}
				return &v
			}
			in := func(name string) int64 { v, _ := strconv.ParseInt(r[col[name]], 10, 64); return v }
			tm := func(name string) *time.Time {
				if r[col[name]] == "" {
					return nil
				}
				v, err := time.Parse("2006-01-02 15:04:05", r[col[name]])
				if err != nil {
					t.Fatal(err)
				}
				return &v
			}
			out = append(out, tlcTrip{vendor: in("VendorID"), pu: in("PULocationID"), do: in("DOLocationID"), pickup: *tm("tpep_pickup_datetime"),
				dropoff: tm("tpep_dropoff_datetime"), pc: fl("passenger_count"), rate: fl("RatecodeID"), fare: fl("fare_amount"),
				total: *fl("total_amount"), congestion: fl("congestion_surcharge"), fee: fl("Airport_fee")})
		}
		return out
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, -1)
	defer tr.Release()
	var out []tlcTrip
	for tr.Next() {
		rec := tr.RecordBatch()
		c := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		for i := range int(rec.NumRows()) {
			fl := func(name string) *float64 {
				a := c(name).(*array.Float64)
				if a.IsNull(i) {
					return nil
				}
				v := a.Value(i)
				return &v
			}
			in := func(name string) int64 { return c(name).(*array.Int64).Value(i) }
			tm := func(name string) *time.Time {
				a := c(name).(*array.Timestamp)
				if a.IsNull(i) {
					return nil
				}
				v := time.UnixMicro(int64(a.Value(i))).UTC()
				return &v
			}
			out = append(out, tlcTrip{vendor: in("VendorID"), pu: in("PULocationID"), do: in("DOLocationID"), pickup: *tm("tpep_pickup_datetime"),
				dropoff: tm("tpep_dropoff_datetime"), pc: fl("passenger_count"), rate: fl("RatecodeID"), fare: fl("fare_amount"),
				total: *fl("total_amount"), congestion: fl("congestion_surcharge"), fee: fl("Airport_fee")})
		}
	}
	return out
}

// TestTaxiExampleValidates: examples/taxi.yaml is a valid config (also under -short).
func TestTaxiExampleValidates(t *testing.T) {
	code, out, errs := runCLI(t, "-c", "../../examples/taxi.yaml", "--state-dir", t.TempDir(), "validate")
	if code != exitOK || !strings.Contains(out, "ok") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}
