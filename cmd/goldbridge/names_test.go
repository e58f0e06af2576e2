package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"goldbridge/serving/chlocal"
)

// namesConfig is a pipeline whose every name is mixed case: payload keys and Silver
// columns (default paths), an upsert entity's key and updated_at, a derive column, the
// mart's join, filter, grain, dimensions and measures (an avg and a count_distinct, whose
// hidden columns carry the name too, and a max over the joined column), and the served
// table; Gold's checks name measures and the grain as written.
const namesConfig = `version: 1
lakehouse:
  catalog: {type: sql}
  warehouse: file://${STATE_DIR}/warehouse
clickhouse:
  embedded: true
  database: marts
  local: {tcp_port: %d, http_port: %d}
sources:
  land: {type: file, system: fleet, path: "${STATE_DIR}/landing", pattern: "rides*.jsonl", settle: 0s}
  vend: {type: file, system: fleet, path: "${STATE_DIR}/landing", pattern: "vendors*.jsonl", settle: 0s}
entities:
  vendors:
    sources: [vend]
    silver:
      mode: upsert
      key: [VendorID]
      updated_at: UpdatedAt
      columns:
        - {name: VendorID,  type: int64}
        - {name: FleetSize, type: int64}
        - {name: UpdatedAt, type: timestamp}
  rides:
    sources: [land]
    silver:
      mode: append
      key: [RideID]
      event_time: PickupTS
      columns:
        - {name: RideID,   type: string}
        - {name: VendorID, type: int64}
        - {name: Zone,     type: string}
        - {name: RiderID,  type: string}
        - {name: Amount,   type: float64}
        - {name: PickupTS, type: timestamp}
      rules:
        - {id: F1, kind: filter, expr: 'Amount >= 0', reason: negative_amount}
        - {id: E1, kind: derive, column: AmountX2, type: float64, expr: 'Amount * 2'}
marts:
  by_vendor:
    source: rides
    joins: [{entity: vendors, on: {VendorID: VendorID}, columns: [FleetSize]}]
    filter: 'Zone != "skip"'
    grain: {column: PickupTS, unit: day, as: PickupDate}
    dimensions: [VendorID, Zone]
    grouping: rollup
    measures:
      - {name: Trips,       agg: count}
      - {name: TotalAmount, agg: sum,            column: Amount}
      - {name: AvgX2,       agg: avg,            column: AmountX2}
      - {name: Riders,      agg: count_distinct, column: RiderID}
      - {name: MaxFleet,    agg: max,            column: FleetSize}
    checks:
      - {type: expr, expr: 'Trips >= 1 && TotalAmount >= 0', severity: critical}
      - {type: not_null, columns: [PickupDate, Riders], severity: critical}
      - {type: unique_grain, severity: critical}
    serving: {table: VendorDaily, hot_window: 30d, hot_window_anchor: data}
`

// TestMixedCaseNamesServed is issue 19's "Why" 2 end to end: mixed-case names are
// read from the payload case-sensitively (a decoy key "vendorid" is not VendorID), kept
// in Silver and Gold, and served in ClickHouse under exactly those names (the hidden
// columns too) with the values an oracle computes from the landing rows; check finds
// no drift.
func TestMixedCaseNamesServed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: the embedded stack with a local ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	ports := testPorts(t, 2)
	dir := t.TempDir()
	e := &forgetEnv{t: t, bin: buildGoldbridge(t), state: filepath.Join(dir, "state"), cfg: filepath.Join(dir, "pipeline.yaml")}
	writeFile(t, e.cfg, fmt.Sprintf(namesConfig, ports[0], ports[1]))

	type ride struct {
		id, zone, rider string
		vendor          int64
		amount          float64 // multiples of 0.25: sums are exact in any order
		pickup          time.Time
	}
	var rides []ride
	var landing strings.Builder
	zones := []string{"Queens", "Bronx", "skip"}
	for i := range 90 {
		r := ride{id: fmt.Sprintf("r%03d", i), zone: zones[i%3], rider: fmt.Sprintf("u%d", i%7), vendor: int64(1 + i%2),
			amount: float64(i%11-1) * 1.25, pickup: time.Date(2024, 3, 1+i%4, i%24, 0, 0, 0, time.UTC)}
		rides = append(rides, r)
		fmt.Fprintf(&landing, `{"RideID":%q,"vendorid":99,"VendorID":%d,"Zone":%q,"RiderID":%q,"Amount":%s,"PickupTS":%q}`+"\n",
			r.id, r.vendor, r.zone, r.rider, strconv.FormatFloat(r.amount, 'f', -1, 64), r.pickup.Format(time.RFC3339))
	}
	if err := os.MkdirAll(filepath.Join(e.state, "landing"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.state, "landing", "rides.jsonl"), landing.String())
	// Two versions of each vendor, the older of vendor 2 arriving last: UpdatedAt decides.
	fleet := map[int64]int64{1: 12, 2: 7}
	writeFile(t, filepath.Join(e.state, "landing", "vendors.jsonl"), `{"VendorID":1,"FleetSize":10,"UpdatedAt":"2024-01-01T00:00:00Z"}
{"VendorID":2,"FleetSize":7,"UpdatedAt":"2024-02-01T00:00:00Z"}
{"VendorID":1,"FleetSize":12,"UpdatedAt":"2024-02-01T00:00:00Z"}
{"VendorID":2,"FleetSize":5,"UpdatedAt":"2024-01-01T00:00:00Z"}
`)
	e.run("run")

	// The oracle: F1, then the mart filter, then a rollup over (VendorID, Zone).
	g := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	type acc struct {
		n, fleet int64
		sum      float64
		riders   map[string]bool
	}
	levels := map[string]*acc{}
	var silverRows []string
	quarantined := 0
	for _, r := range rides {
		if r.amount < 0 {
			quarantined++
			continue
		}
		silverRows = append(silverRows, fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s", r.id, r.vendor, r.zone, g(r.amount), g(r.amount*2), r.pickup.Format(time.DateTime)))
		if r.zone == "skip" {
			continue
		}
		day, v := r.pickup.Format(time.DateOnly), strconv.FormatInt(r.vendor, 10)
		for _, k := range []string{day + "\t" + v + "\t" + r.zone + "\t0\t0", day + "\t" + v + "\t\\N\t0\t1", day + "\t\\N\t\\N\t1\t1"} {
			if levels[k] == nil {
				levels[k] = &acc{riders: map[string]bool{}}
			}
			levels[k].n++
			levels[k].sum += r.amount
			levels[k].riders[r.rider] = true
			levels[k].fleet = max(levels[k].fleet, fleet[r.vendor])
		}
	}
	var want []string
	for k, a := range levels {
		want = append(want, fmt.Sprintf("%s\t%d\t%s\t%s\t%d\t%d", k, a.n, g(a.sum), g(2*a.sum/float64(a.n)), len(a.riders), a.fleet))
	}
	slices.Sort(want)
	slices.Sort(silverRows)
	if quarantined == 0 || len(silverRows) < 60 || len(want) < 12 {
		t.Fatalf("oracle: %d quarantined, %d silver rows, %d gold rows", quarantined, len(silverRows), len(want))
	}
	// Unquoted, these names are case-sensitive in ClickHouse: a lower-cased column fails.
	compareRows(t, "silver.vendors", nonEmptyLines(e.stdout("query", "SELECT VendorID, FleetSize FROM silver.vendors WHERE NOT is_deleted ORDER BY VendorID FORMAT TSV")),
		[]string{"1\t12", "2\t7"})
	compareRows(t, "silver.rides", nonEmptyLines(e.stdout("query", `SELECT RideID, VendorID, Zone, Amount, AmountX2, toString(toDateTime(PickupTS, 'UTC'))
		FROM silver.rides ORDER BY RideID FORMAT TSV`)), silverRows)
	const cols = "toString(PickupDate), VendorID, Zone, grouping_VendorID, grouping_Zone, Trips, TotalAmount, AvgX2, Riders, MaxFleet"
	compareRows(t, "gold.by_vendor", nonEmptyLines(e.stdout("query", "SELECT "+cols+" FROM gold.by_vendor ORDER BY ALL FORMAT TSV")), want)
	compareRows(t, "VendorDaily_final", nonEmptyLines(e.stdout("clickhouse", "query", "SELECT "+cols+" FROM marts.VendorDaily_final ORDER BY ALL FORMAT TSV")), want)

	// The served table's columns carry the names as written, hidden ones included.
	got := nonEmptyLines(e.stdout("clickhouse", "query", "SELECT name FROM system.columns WHERE database = 'marts' AND table = 'VendorDaily' ORDER BY name FORMAT TSV"))
	for _, c := range []string{"PickupDate", "VendorID", "Zone", "grouping_VendorID", "grouping_Zone", "Trips", "TotalAmount", "AvgX2__sum", "AvgX2__count", "Riders__state", "MaxFleet"} {
		if !slices.Contains(got, c) {
			t.Errorf("VendorDaily has no column %s: %v", c, got)
		}
	}
	if out := e.run("check"); !strings.Contains(out, "check by_vendor: no drift") {
		t.Errorf("check:\n%s", tail(out, 3000))
	}
}
