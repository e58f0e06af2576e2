package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"goldbridge/serving/chlocal"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestValidateExample(t *testing.T) {
	code, out, errs := runCLI(t, "-c", "../../examples/orders.yaml", "--state-dir", t.TempDir(), "validate")
	if code != exitOK || !strings.Contains(out, "ok") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}

func TestValidateReportsEveryMistake(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.yaml")
	src := `
sources:
  land: {type: file, system: shop, path: /x}
entities:
  orders:
    sources: [land, nope]
    silver:
      mode: upsert
      updated_at: updated_at
      columns: [{name: order_id, type: string}, {name: updated_at, type: timestamp}]
marts:
  kpi: {source: orders, grain: {column: updated_at}, measures: [{name: n, agg: counter}]}
`
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "-c", cfg, "validate")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, errs)
	}
	for _, want := range []string{
		"3 problem(s)",
		`entities.orders.sources[1]: unknown source "nope"`,
		"entities.orders.silver.key: required",
		`marts.kpi.measures[0].agg: must be one of`,
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("missing %q in:\n%s", want, errs)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"--nope"}, {"validate", "extra"}, {"--log-level", "loud", "version"}} {
		if code, _, _ := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, _ := runCLI(t, "-c", "/does/not/exist.yaml", "validate"); code != exitFailure {
		t.Errorf("missing config: exit %d, want %d", code, exitFailure)
	}
}

func TestDemoGenerate(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "--state-dir", dir, "demo", "generate", "--events", "5000", "--seed", "3", "--end", "2026-06-30", "--files", "2")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "landing", "orders", "orders-*.jsonl"))
	if len(files) != 2 || !strings.Contains(out, "wrote 5000 events") {
		t.Fatalf("files %v, output %s", files, out)
	}
	lines := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines += bytes.Count(b, []byte{'\n'})
	}
	if lines != 5000 {
		t.Fatalf("%d lines", lines)
	}
}

// TestDemoGenerateEvents: --dataset events writes one landing where examples/events.yaml
// reads it, --events is its stream size, and a bad size or landing is a usage error.
func TestDemoGenerateEvents(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "--state-dir", dir, "demo", "generate", "--dataset", "events", "--landing", "2", "--events", "100")
	if code != exitOK || !strings.Contains(out, "stream events 50..149") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "landing", "events", "events_2.jsonl")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--events", "1"}, {"--landing", "0"}} {
		if code, _, _ := runCLI(t, append([]string{"--state-dir", dir, "demo", "generate", "--dataset", "events"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != exitOK || !strings.Contains(out, "goldbridge dev") || !strings.Contains(out, "libchdb 26.7") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// TestValidateCompilesRules: Silver rules are compiled against the typed columns by
// validate, as the Silver stage compiles them: an unknown function, an unknown name and
// a call on an argument of the wrong type are each a problem with the rule's path (a name
// in another case with the column it may mean), all reported at once (issue 15; before, validate checked the syntax only and `silver` failed).
func TestValidateCompilesRules(t *testing.T) {
	b, err := os.ReadFile("../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules := `        - {id: E1, kind: derive, column: blob, type: string, expr: 'readFile(amount)'}
        - {id: F2, kind: filter, expr: 'channel == "web"', reason: not_web}
        - {id: E2, kind: derive, column: n, type: int64, expr: 'len(created_at)'}
        - {id: F3, kind: filter, expr: 'blob != ""', reason: no_blob}
        - {id: F4, kind: filter, expr: 'Country != ""', reason: no_country}

marts:`
	src := strings.Replace(string(b), "\nmarts:", "\n"+rules, 1)
	cfg := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "-c", cfg, "--state-dir", t.TempDir(), "validate")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, errs)
	}
	for _, want := range []string{"4 problem(s)", "entities.orders.silver.rules[1].expr: rule E1:", "readFile",
		"entities.orders.silver.rules[2].expr: rule F2:", "channel", "entities.orders.silver.rules[3].expr: rule E2:",
		// A name in another case says which column it may mean (issue 19).
		"entities.orders.silver.rules[5].expr: rule F4: unknown name Country (1:1) (names are case-sensitive: did you mean country?)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("missing %q in:\n%s", want, errs)
		}
	}
}

// TestValidateReportsEachProblemOnce is issue 37, item 4: a lookup that sets neither
// entity nor file and an expression that does not parse were each reported twice, once by
// the config's own check and again by the rule compiler. The compiler's
// problem is a consequence, so only the first is kept.
func TestValidateReportsEachProblemOnce(t *testing.T) {
	b, err := os.ReadFile("../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules := `        - {id: E1, kind: lookup, lookup: {on: {country: code}, columns: [name]}}
        - {id: F9, kind: filter, expr: 'amount >= ', reason: broken}
        - {id: F8, kind: filter, expr: 'nope > 1', reason: unknown_name}

marts:`
	cfg := filepath.Join(t.TempDir(), "lookup.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "\nmarts:", "\n"+rules, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "-c", cfg, "--state-dir", t.TempDir(), "validate")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, errs)
	}
	for path, n := range map[string]int{
		"entities.orders.silver.rules[1].lookup:": 1, "entities.orders.silver.rules[2].expr:": 1,
		"entities.orders.silver.rules[3].expr: rule F8: unknown name nope": 1, // only the compiler sees it
		"3 problem(s)": 1,
	} {
		if got := strings.Count(errs, path); got != n {
			t.Errorf("%q reported %d times, want %d:\n%s", path, got, n, errs)
		}
	}
}

// testPorts returns n distinct ports for a test's servers (an embedded ClickHouse takes
// two), chosen as a state dir's own are (chlocal.ChoosePorts, from the test's name):
// below the ephemeral range, so that a server that stops and starts again (serve
// restarted, the embedded server of each command) finds them free, which no outbound
// connection can hold in between. chlocal.FreePorts' ports are ephemeral ones.
func testPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for i := 0; len(ports) < n; i++ {
		p, err := chlocal.ChoosePorts(chlocal.DefaultListenHost, fmt.Sprintf("%s/%d", t.Name(), i), nil, ports...)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p.TCP, p.HTTP)
	}
	return ports[:n]
}
