package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// checkConfig is a pipeline of one upsert entity whose normalisation N1 runs after its
// filter F1 (a misconfiguration): an amount of 5 passes F1 and is written as -5, which
// Silver's row-level check finds. rows is the check's severity ("" = the default).
func checkConfig(t *testing.T, dir, rows string) string {
	t.Helper()
	sev := ""
	if rows != "" {
		sev = "\n      quality: {severity: {rows: " + rows + "}}"
	}
	cfg := filepath.Join(dir, "pipeline.yaml")
	writeFile(t, cfg, `version: 1
lakehouse:
  catalog: {type: sql}
  warehouse: file://${STATE_DIR}/warehouse
metrics: {textfile: `+filepath.Join(dir, "metrics.prom")+`}
sources:
  a_landing: {type: file, system: a, path: `+filepath.Join(dir, "a")+`, format: jsonl}
entities:
  a:
    sources: [a_landing]
    silver:
      mode: upsert
      key: [id]
      updated_at: ts
      columns: [{name: id, type: string, required: true}, {name: ts, type: timestamp}, {name: amount, type: "decimal(18,2)"}]
      rules:
        - {id: F1, kind: filter, expr: amount >= 0, reason: negative_amount}
        - {id: N1, kind: normalize, column: amount, expr: amount - 10}`+sev+`
`)
	return cfg
}

// TestSilverCriticalCheck is issue 37's second observation: Silver's failed quality
// checks were logged at error level and silver exited 0. A failed critical check (the
// default) exits 6 with the check named and commits nothing (the Silver and quarantine
// tables keep their snapshot and rows, read back by iceberg-go); at severity warning the
// same run publishes, prints the failure and counts it in
// goldbridge_silver_check_failures_total.
func TestSilverCriticalCheck(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	land := func(name, lines string) { landLines(t, filepath.Join(dir, "a", name), lines) }
	run := func(rows string) (int, string, string) {
		return runCLI(t, "-c", checkConfig(t, dir, rows), "--state-dir", state, "--log-level", "warn", "run")
	}
	land("1.jsonl", `{"id":"x","ts":"2026-11-20T10:00:00Z","amount":50}`+"\n")
	if code, out, errs := run(""); code != exitOK {
		t.Fatalf("first run: exit %d\n%s\n%s", code, out, errs)
	}
	before := silverTables(t, state)

	land("2.jsonl", `{"id":"y","ts":"2026-11-20T11:00:00Z","amount":5}`+"\n"+`{"id":"w","ts":"2026-11-20T11:00:00Z","amount":30}`+"\n"+
		`{"id":"z","ts":"2026-11-20T11:00:00Z","amount":-1}`+"\n")
	code, out, errs := run("")
	if code != exitSilverGate || !strings.Contains(errs, "silver a: critical quality check failed: rows: 1 rows fail F1; nothing committed") ||
		!strings.Contains(out, "quality rows: 2 written rows checked, FAIL (critical): 1 rows fail F1") {
		t.Fatalf("critical: exit %d, want %d naming the check\n%s\n%s", code, exitSilverGate, out, errs)
	}
	if after := silverTables(t, state); !slices.Equal(after, before) {
		t.Fatalf("the refused run changed the lake:\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if m := metricLine(t, dir, "goldbridge_silver_check_failures_total"); m != `goldbridge_silver_check_failures_total{check="rows",entity="a",severity="critical"} 1` {
		t.Errorf("metric: %q", m)
	}

	code, out, errs = run("warning")
	if code != exitOK || !strings.Contains(out, "FAIL (warning): 1 rows fail F1") || !strings.Contains(errs, "quality check failed; published (severity warning)") {
		t.Fatalf("warning: exit %d\n%s\n%s", code, out, errs)
	}
	want := []string{"silver.a w 20.00", "silver.a x 40.00", "silver.a y -5.00", "silver.a_quarantine F1:negative_amount"}
	if got := silverTables(t, state); !slices.Equal(got[2:], want) {
		t.Fatalf("after the warning run:\n%s\nwant rows\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if m := metricLine(t, dir, "goldbridge_silver_check_failures_total"); m != `goldbridge_silver_check_failures_total{check="rows",entity="a",severity="warning"} 1` {
		t.Errorf("metric: %q", m)
	}
}

// silverTables renders the Silver and quarantine tables' current snapshots, then their rows
// (Silver: id and amount; quarantine: the reason), read by iceberg-go.
func silverTables(t *testing.T, state string) []string {
	t.Helper()
	ctx := context.Background()
	lh, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"), Warehouse: "file://" + filepath.Join(state, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	var snaps, rows []string
	for _, ident := range []string{"silver.a", "silver.a_quarantine"} {
		tbl, err := lh.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, ident+" @"+tbl.CurrentSnapshot().Summary.Properties["goldbridge.bronze-snapshot-id"]+" "+
			strings.TrimSpace(strings.SplitN(tbl.MetadataLocation(), "/metadata/", 2)[1]))
		cols := []string{"id", "amount"}
		if strings.HasSuffix(ident, "_quarantine") {
			cols = []string{"error_reason"}
		}
		_, recs, err := tbl.Scan(table.WithSelectedFields(cols...)).ToArrowRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			for i := range int(rec.NumRows()) {
				r := ident
				for _, c := range cols {
					r += " " + cellText(rec.Column(rec.Schema().FieldIndices(c)[0]), i)
				}
				got = append(got, r)
			}
			rec.Release()
		}
		slices.Sort(got)
		rows = append(rows, got...)
	}
	return append(snaps, rows...)
}

// cellText renders a cell, a decimal with its scale.
func cellText(a arrow.Array, i int) string {
	if d, ok := a.(*array.Decimal128); ok {
		return d.Value(i).ToString(d.DataType().(*arrow.Decimal128Type).Scale)
	}
	return a.ValueStr(i)
}

// metricLine is the one sample of a metric in the run's textfile, or "".
func metricLine(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "metrics.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+"{") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestSilverUndeclaredFields is issue 42's schema drift through the CLI: a source that
// starts sending delivery_address. With quality.severity.undeclared: critical the run
// exits 6 naming the field and commits nothing; at the default (warning) it publishes,
// prints the field with its rows and first value, sets
// goldbridge_silver_undeclared_fields{entity,field} and counts the check, and
// `goldbridge tables` shows the field count of the Silver table.
func TestSilverUndeclaredFields(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := func(sev string) string {
		c := checkConfig(t, dir, "")
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), "        - {id: N1, kind: normalize, column: amount, expr: amount - 10}\n", "", 1)
		if sev != "" {
			s += "      quality: {severity: {undeclared: " + sev + "}}\n"
		}
		writeFile(t, c, s)
		return c
	}
	land := func(name, lines string) { landLines(t, filepath.Join(dir, "a", name), lines) }
	run := func(sev string, args ...string) (int, string, string) {
		return runCLI(t, append([]string{"-c", cfg(sev), "--state-dir", state, "--log-level", "warn"}, args...)...)
	}
	land("1.jsonl", `{"id":"x","ts":"2026-11-20T10:00:00Z","amount":50}`+"\n")
	if code, out, errs := run("critical", "run"); code != exitOK || strings.Contains(out, "undeclared") {
		t.Fatalf("first run: exit %d\n%s\n%s", code, out, errs)
	}
	before := silverTables(t, state)

	land("2.jsonl", `{"id":"y","ts":"2026-11-20T11:00:00Z","amount":5,"delivery_address":"1 Elm St"}`+"\n"+
		`{"id":"w","ts":"2026-11-20T11:00:00Z","amount":30,"delivery_address":{"street":"Oak"}}`+"\n")
	detail := `1 top-level fields the spec does not read: delivery_address (2 rows, first "1 Elm St")`
	code, out, errs := run("critical", "run")
	if code != exitSilverGate || !strings.Contains(errs, "silver a: critical quality check failed: undeclared: "+detail+"; nothing committed") ||
		!strings.Contains(out, "quality undeclared: FAIL (critical): "+detail) {
		t.Fatalf("critical: exit %d, want %d naming the field\n%s\n%s", code, exitSilverGate, out, errs)
	}
	if after := silverTables(t, state); !slices.Equal(after, before) {
		t.Fatalf("the refused run changed the lake:\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if m := metricLine(t, dir, "goldbridge_silver_undeclared_fields"); m != `goldbridge_silver_undeclared_fields{entity="a",field="delivery_address"} 2` {
		t.Errorf("metric: %q", m)
	}
	if m := metricLine(t, dir, "goldbridge_silver_check_failures_total"); m != `goldbridge_silver_check_failures_total{check="undeclared",entity="a",severity="critical"} 1` {
		t.Errorf("metric: %q", m)
	}

	code, out, errs = run("", "run")
	if code != exitOK || !strings.Contains(out, "quality undeclared: FAIL (warning): "+detail) || !strings.Contains(errs, "quality check failed; published (severity warning)") {
		t.Fatalf("warning: exit %d\n%s\n%s", code, out, errs)
	}
	want := []string{"silver.a w 30.00", "silver.a x 50.00", "silver.a y 5.00"}
	if got := silverTables(t, state); !slices.Equal(got[2:], want) {
		t.Fatalf("after the warning run:\n%s\nwant rows\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if m := metricLine(t, dir, "goldbridge_silver_undeclared_fields"); m != `goldbridge_silver_undeclared_fields{entity="a",field="delivery_address"} 2` {
		t.Errorf("metric: %q", m)
	}
	code, out, errs = run("", "tables")
	if f := strings.Fields(lineOf(out, "silver.a ")); code != exitOK || len(f) != 8 || f[7] != "1" {
		t.Errorf("tables: exit %d\n%s\n%s", code, out, errs)
	}
}

// landLines writes a landing file dated 10 s back: older than the source's settle time,
// younger than its tail wait.
func landLines(t *testing.T, path, lines string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, lines)
	at := time.Now().Add(-10 * time.Second)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}
