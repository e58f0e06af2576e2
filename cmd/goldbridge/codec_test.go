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
	"goldbridge/lakehouse/lakehousetest"
)

// tableCodecs lists the codecs of a table's live data files (from their footers).
func tableCodecs(t *testing.T, lh *catalog.Lakehouse, ident string) []string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for c := range lakehousetest.FileCodecs(t, tbl) {
		out = append(out, strings.ToLower(c.String()))
	}
	slices.Sort(out)
	return out
}

// TestLayerCodecsThroughTheCLI: lakehouse.compression gives each layer's files their
// codec; changed, the next run's files take the new one while the older files keep
// theirs until maintain compacts them, and every flight is still counted once (the
// oracle: the landing lines).
func TestLayerCodecsThroughTheCLI(t *testing.T) {
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "flights.yaml")
	write := func(compression string) {
		t.Helper()
		yaml := strings.Replace(keylessConfig("      mode: append\n      identity: delivery\n      event_time: dep"),
			"  warehouse: file://${STATE_DIR}/warehouse\n", "  warehouse: file://${STATE_DIR}/warehouse\n  compression: "+compression+"\n", 1) +
			"maintenance: {max_files: 2}\n" // two runs' files make a partition to compact
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gb := func(args ...string) {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"-c", cfg, "--state-dir", state, "--log-level", "warn"}, args...)...)
		if code != exitOK {
			t.Fatalf("goldbridge %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, tail(errs, 3000))
		}
	}
	landing := filepath.Join(state, "landing", "flights")
	if err := os.MkdirAll(landing, 0o755); err != nil {
		t.Fatal(err)
	}
	flights := 0
	land := func(name string, day int) {
		t.Helper()
		var lines []string
		for i := range 120 {
			lines = append(lines, fmt.Sprintf(`{"carrier":%q,"flight":%d,"dep":"2024-01-%02dT10:00:00Z","distance":%d}`,
				[]string{"AA", "DL"}[i%2], i, day, 100+i))
		}
		flights += len(lines)
		if err := os.WriteFile(filepath.Join(landing, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want map[string][]string) {
		t.Helper()
		lh, err := catalog.Open(context.Background(), catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"), Warehouse: "file://" + filepath.Join(state, "warehouse")})
		if err != nil {
			t.Fatal(err)
		}
		defer lh.Close()
		for _, ident := range slices.Sorted(maps.Keys(want)) {
			if got := tableCodecs(t, lh, ident); !slices.Equal(got, want[ident]) {
				t.Errorf("%s: %s's files are %v, want %v", what, ident, got, want[ident])
			}
		}
		counted := 0
		for _, r := range tableRows(t, lh, "gold.flights_daily") {
			for _, f := range strings.Split(r, "|") {
				if v, ok := strings.CutPrefix(f, "flights="); ok {
					var n int
					fmt.Sscan(v, &n)
					counted += n
				}
			}
		}
		if counted != flights {
			t.Errorf("%s: gold counts %d flights, want %d", what, counted, flights)
		}
	}

	write("{bronze: lz4raw, silver: snappy, gold: uncompressed}")
	land("2024-01-01.jsonl", 1)
	gb("ingest")
	gb("silver")
	gb("gold")
	check("first run", map[string][]string{
		"bronze.flights": {"lz4_raw"}, "silver.flights": {"snappy"}, "gold.flights_daily": {"uncompressed"},
	})

	// Another codec for each layer: the next files take it. Gold recomputes only the
	// day the new file lands on, so the first day's file stays uncompressed.
	write(`{bronze: "zstd:3", silver: zstd, gold: snappy}`)
	land("2024-01-02.jsonl", 2)
	gb("ingest")
	gb("silver")
	gb("gold")
	check("after the change", map[string][]string{
		"bronze.flights": {"lz4_raw", "zstd"}, "silver.flights": {"snappy", "zstd"}, "gold.flights_daily": {"snappy", "uncompressed"},
	})

	// Compaction rewrites the small files in the codec the tables now have (Gold's two days
	// are one file each: nothing to compact).
	gb("maintain")
	check("after maintain", map[string][]string{
		"bronze.flights": {"zstd"}, "silver.flights": {"snappy", "zstd"}, "gold.flights_daily": {"snappy", "uncompressed"},
	})
}
