package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"goldbridge/serving/chlocal"
)

// retypeConfig is a pipeline of items whose qty column has type qty, and a mart that
// sums and averages it per day, served by the embedded ClickHouse.
const retypeConfig = `version: 1
lakehouse:
  catalog: {type: sql}
  warehouse: file://${STATE_DIR}/warehouse
clickhouse:
  embedded: true
  database: marts
  local: {tcp_port: %d, http_port: %d}
sources:
  land: {type: file, system: shop, path: "${STATE_DIR}/landing", format: jsonl, settle: 0s}
entities:
  items:
    sources: [land]
    silver:
      mode: upsert
      key: [item_id]
      updated_at: updated_at
      columns:
        - {name: item_id,    type: string, required: true}
        - {name: qty,        type: "%s"}
        - {name: updated_at, type: timestamp, required: true}
marts:
  items_daily:
    source: items
    grain: {column: updated_at, unit: day, as: day}
    measures:
      - {name: items,   agg: count}
      - {name: qty_sum, agg: sum, column: qty}
      - {name: qty_max, agg: max, column: qty}
    serving: {hot_window: 30d, hot_window_anchor: data}
`

// TestRetypeThroughTheCLI is issue 42 item 2's acceptance: qty goes from int64 to
// decimal(12,2), a change Iceberg cannot promote. With the new config `run` refuses it,
// naming `goldbridge replay items`, and changes nothing; `replay items` then `run` bring
// Silver, Gold and the served mart to exactly what a fresh state dir builds from the same
// landing files with the new config; and at every step Gold and the served rows are
// those of a fresh build with the config in force.
func TestRetypeThroughTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: the embedded stack with a local ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	bin := buildGoldbridge(t)
	env := func(typ string) *forgetEnv {
		ports := testPorts(t, 2)
		dir := t.TempDir()
		e := &forgetEnv{t: t, bin: bin, state: filepath.Join(dir, "state"), cfg: filepath.Join(dir, "pipeline.yaml")}
		writeFile(t, e.cfg, fmt.Sprintf(retypeConfig, ports[0], ports[1], typ))
		if err := os.MkdirAll(filepath.Join(e.state, "landing"), 0o700); err != nil {
			t.Fatal(err)
		}
		return e
	}
	files := [][]string{{
		`{"item_id":"a","qty":7,"updated_at":"2026-01-01T10:00:00Z"}`,
		`{"item_id":"b","qty":8,"updated_at":"2026-01-01T11:00:00Z"}`,
		`{"item_id":"c","qty":9,"updated_at":"2026-01-02T10:00:00Z"}`,
	}, {
		`{"item_id":"d","qty":"2.50","updated_at":"2026-01-02T12:00:00Z"}`,
		`{"item_id":"a","qty":1.25,"updated_at":"2026-01-03T10:00:00Z"}`,
	}}
	land := func(e *forgetEnv, n int) {
		writeFile(t, filepath.Join(e.state, "landing", fmt.Sprintf("%d.jsonl", n)), strings.Join(files[n], "\n")+"\n")
	}
	state := func(e *forgetEnv) (gold, served []string) {
		gold = tableRows(t, e.lakehouse(), "gold.items_daily")
		served = nonEmptyLines(e.stdout("clickhouse", "query",
			"SELECT day, items, toString(qty_sum), toString(qty_max) FROM marts.items_daily_final ORDER BY day FORMAT TSV"))
		return gold, served
	}
	same := func(step string, e, fresh *forgetEnv) {
		t.Helper()
		g, s := state(e)
		fg, fs := state(fresh)
		if !slices.Equal(g, fg) || !slices.Equal(s, fs) {
			t.Fatalf("%s: gold\n%s\nserved\n%s\nfresh build: gold\n%s\nserved\n%s", step,
				strings.Join(g, "\n"), strings.Join(s, "\n"), strings.Join(fg, "\n"), strings.Join(fs, "\n"))
		}
	}

	e := env("int64")
	land(e, 0)
	e.run("run")
	oldFresh := env("int64")
	land(oldFresh, 0)
	oldFresh.run("run")
	same("int64", e, oldFresh)

	// The new type, and a file whose quantities need it: run refuses and changes nothing.
	writeFile(t, e.cfg, strings.Replace(readFile(t, e.cfg), `type: "int64"`, `type: "decimal(12,2)"`, 1))
	land(e, 1)
	out, err := e.exec("run")
	if err == nil || !strings.Contains(out, "column qty: cannot change type long to decimal(12,2) in place") ||
		!strings.Contains(out, "run `goldbridge replay items`") {
		t.Fatalf("run with the new type: %v\n%s", err, tail(out, 3000))
	}
	same("refused", e, oldFresh)

	e.run("replay", "items")
	e.run("run")
	fresh := env("decimal(12,2)")
	land(fresh, 0)
	land(fresh, 1)
	fresh.run("run")
	same("after replay", e, fresh)
	if got, want := tableRows(t, e.lakehouse(), "silver.items"), tableRows(t, fresh.lakehouse(), "silver.items"); len(got) != 4 || len(got) != len(want) {
		t.Fatalf("silver after replay %d rows, fresh %d", len(got), len(want))
	}
	if _, s := state(e); !slices.Contains(s, "2026-01-02\t2\t11.5\t9") {
		t.Fatalf("served after replay:\n%s", strings.Join(s, "\n"))
	}
	e.run("check")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
