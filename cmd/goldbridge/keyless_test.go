package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"goldbridge/lakehouse/catalog"
)

// keylessConfig is a pipeline of flights without a natural key (issue 37), and silver is
// the entity's silver section.
func keylessConfig(silver string) string {
	return `version: 1
lakehouse:
  catalog: {type: sql}
  warehouse: file://${STATE_DIR}/warehouse
sources:
  bts: {type: file, system: bts, path: "${STATE_DIR}/landing/flights", format: jsonl, settle: 0s}
entities:
  flights:
    sources: [bts]
    silver:
` + silver + `
      columns:
        - {name: carrier,  type: string, required: true}
        - {name: flight,   type: int64}
        - {name: dep,      type: timestamp}
        - {name: distance, type: int64}
marts:
  flights_daily:
    source: flights
    grain: {column: dep, unit: day, as: dep_date}
    dimensions: [carrier]
    measures: [{name: flights, agg: count}]
    checks: [{type: unique_grain}]
`
}

// TestKeylessFactsThroughTheCLI runs the commands a user runs over a landing file of
// flights with 191 identical pairs, the entity declared with identity: delivery: validate
// accepts it, Silver holds every flight and Gold counts them, a second ingest and silver
// add nothing, and replay then gold give the same counts. validate refuses the entity
// with neither a key nor identity: delivery, and with both, naming the path.
func TestKeylessFactsThroughTheCLI(t *testing.T) {
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "flights.yaml")
	write := func(silver string) {
		if err := os.WriteFile(cfg, []byte(keylessConfig(silver)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gb := func(args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"-c", cfg, "--state-dir", state, "--log-level", "warn"}, args...)...)
		if code != exitOK {
			t.Fatalf("goldbridge %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, tail(errs, 3000))
		}
		return out
	}
	for _, bad := range []struct{ silver, want string }{
		{"      mode: append\n      event_time: dep", "entities.flights.silver.key: required: the columns that identify a fact, or, for facts without one (two identical rows are two facts), identity: delivery"},
		{"      mode: append\n      identity: delivery\n      key: [flight]", "entities.flights.silver.key: not with identity: delivery"},
	} {
		write(bad.silver)
		if code, _, errs := runCLI(t, "-c", cfg, "--state-dir", state, "validate"); code != exitUsage || !strings.Contains(errs, bad.want) {
			t.Errorf("validate %q: exit %d, want %d and %q in\n%s", bad.silver, code, exitUsage, bad.want, errs)
		}
	}

	write("      mode: append\n      identity: delivery\n      event_time: dep\n      lookback: 1h")
	gb("validate")
	landing := filepath.Join(state, "landing", "flights")
	if err := os.MkdirAll(landing, 0o755); err != nil {
		t.Fatal(err)
	}
	var lines []string
	want := map[string]int{} // flights per "day carrier": the oracle
	for i := range 400 {
		carrier, day := []string{"AA", "DL", "UA"}[i%3], 1+i%4
		lines = append(lines, fmt.Sprintf(`{"carrier":%q,"flight":%d,"dep":"2024-01-%02dT10:00:00Z","distance":%d}`, carrier, i%50, day, 100*(i%7)))
		want[fmt.Sprintf("2024-01-%02d %s", day, carrier)]++
		if i < 191 { // the same flight twice: two flights
			lines = append(lines, lines[len(lines)-1])
			want[fmt.Sprintf("2024-01-%02d %s", day, carrier)]++
		}
	}
	if err := os.WriteFile(filepath.Join(landing, "2024-01.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	gb("ingest")
	gb("silver")
	gb("gold")
	var silverRows []string
	check := func(what string) {
		t.Helper()
		lh, err := catalog.Open(context.Background(), catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"), Warehouse: "file://" + filepath.Join(state, "warehouse")})
		if err != nil {
			t.Fatal(err)
		}
		defer lh.Close()
		rows := tableRows(t, lh, "silver.flights")
		if len(rows) != 591 {
			t.Errorf("%s: silver holds %d flights, want 591", what, len(rows))
		}
		if silverRows != nil && !slices.Equal(rows, silverRows) {
			t.Errorf("%s: silver rows differ from the first run's", what)
		}
		silverRows = rows
		got := map[string]int{}
		for _, r := range tableRows(t, lh, "gold.flights_daily") {
			var day, carrier string
			var n int
			for _, f := range strings.Split(r, "|") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "dep_date":
					day = v
				case "carrier":
					carrier = v
				case "flights":
					fmt.Sscan(v, &n)
				}
			}
			got[day+" "+carrier] += n
		}
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if got[k] != want[k] {
				t.Errorf("%s: gold counts %d flights on %s, want %d", what, got[k], k, want[k])
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: gold has %d groups, want %d", what, len(got), len(want))
		}
	}
	check("first run")
	if out := gb("ingest") + gb("silver"); !strings.Contains(out, " 0 bronze rows") {
		t.Errorf("a second ingest and silver read something:\n%s", out)
	}
	gb("replay", "flights")
	gb("gold")
	check("replay")
}
