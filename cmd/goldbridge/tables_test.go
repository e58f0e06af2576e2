package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"go.yaml.in/yaml/v3"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/serving/chlocal"
)

// TestTablesAndQuery is issue 19's "Why" 5: what goldbridge wrote (the quarantine
// reasons, the Silver rows) is read by table name, with no paths and no
// clickhouse.local.path workaround. The oracle is iceberg-go's own reader.
func TestTablesAndQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts a local ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	ports := testPorts(t, 2)
	cfgPath := filepath.Join(dir, "pipeline.yaml")
	writeOrdersConfig(t, cfgPath, func(cfg map[string]any) {
		cfg["clickhouse"].(map[string]any)["local"] = map[string]any{"tcp_port": ports[0], "http_port": ports[1]}
	})
	gb := func(args ...string) string {
		return mustRun(t, bin, append([]string{"-c", cfgPath, "--state-dir", state, "--log-level", "warn"}, args...)...)
	}
	gb("demo", "generate", "--events", "3000", "--seed", "5")
	gb("ingest")
	gb("silver")

	// The oracle: the quarantine table's reasons and the bronze row count, read by iceberg-go.
	ctx := context.Background()
	lh, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"), Warehouse: "file://" + filepath.Join(state, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	reasons := map[string]int{}
	scanStrings(t, lh, "silver.orders_quarantine", "error_reason", func(s string) { reasons[s]++ })
	bronzeRows := 0
	scanStrings(t, lh, "bronze.orders", bronze.ColFile, func(string) { bronzeRows++ })
	if len(reasons) < 2 || bronzeRows != 3000 {
		t.Fatalf("oracle: reasons %v, bronze rows %d", reasons, bronzeRows)
	}
	var want []string
	for r, n := range reasons {
		want = append(want, fmt.Sprintf("%s\t%d", r, n))
	}
	slices.Sort(want)

	// tables: every table, with its records and the Bronze snapshot Silver is processed up to.
	out := gb("tables")
	bronzeSnap := ""
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 8 && f[0] == "bronze.orders" {
			bronzeSnap = f[1]
			if f[3] != "3000" {
				t.Errorf("bronze.orders records %s, want 3000", f[3])
			}
		}
	}
	for _, name := range []string{"silver.orders", "silver.orders_quarantine"} {
		if !strings.Contains(out, name+" ") || !strings.Contains(lineOf(out, name+" "), "bronze@"+bronzeSnap) {
			t.Errorf("tables: %s without watermark bronze@%s:\n%s", name, bronzeSnap, out)
		}
	}

	// query: SQL over the tables by name, run from another directory than the state's.
	got := gb("query", "SELECT error_reason, count() FROM silver.orders_quarantine GROUP BY 1 ORDER BY 1 FORMAT TSVRaw")
	if g := strings.Split(strings.TrimSpace(got), "\n"); !slices.Equal(g, want) {
		t.Errorf("quarantine reasons by query:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if got := strings.TrimSpace(gb("query", "SELECT count() FROM `bronze`.`orders` FORMAT TSV")); got != "3000" {
		t.Errorf("bronze count by query %q, want 3000", got)
	}
}

// TestQueryNeedsTheEmbeddedServer: with an external ClickHouse the command says why not.
func TestQueryNeedsTheEmbeddedServer(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "pipeline.yaml")
	writeOrdersConfig(t, cfgPath, func(cfg map[string]any) {
		cfg["clickhouse"] = map[string]any{"embedded": false, "addresses": []string{"ch.example:9000"}, "database": "marts", "user": "gb", "password": "x"}
	})
	code, _, errs := runCLI(t, "-c", cfgPath, "--state-dir", t.TempDir(), "query", "SELECT 1")
	if code != exitUsage || !strings.Contains(errs, "external server, which cannot read the warehouse") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// ordersConfig is examples/orders.yaml, parsed, for a test to edit.
func ordersConfig(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// writeOrdersConfig writes examples/orders.yaml changed by edit.
func writeOrdersConfig(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	cfg := ordersConfig(t)
	edit(cfg)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(out))
}

// scanStrings calls fn with every value of a string column of a table, read by iceberg-go.
func scanStrings(t *testing.T, lh *catalog.Lakehouse, ident, col string, fn func(string)) {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields(col)).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		a := rec.Column(rec.Schema().FieldIndices(col)[0]).(*array.String)
		for i := range a.Len() {
			fn(a.Value(i))
		}
		rec.Release()
	}
}

func lineOf(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestMessagesSayThingsOnce is issue 19's "Also": an error names its entity once
// ("silver orders: rule E9: …", not "silver orders: silver orders: …"), and a log line
// carries its mart once.
func TestMessagesSayThingsOnce(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "pipeline.yaml")
	missing := filepath.Join(dir, "no-such-zones.csv")
	writeOrdersConfig(t, cfgPath, func(cfg map[string]any) {
		sv := cfg["entities"].(map[string]any)["orders"].(map[string]any)["silver"].(map[string]any)
		sv["rules"] = append(sv["rules"].([]any), map[string]any{"id": "E9", "kind": "lookup",
			"lookup": map[string]any{"file": missing, "on": map[string]any{"country": "code"}, "columns": []any{"name"}}})
	})
	state := filepath.Join(dir, "state")
	gb := func(args ...string) (int, string) {
		code, out, errs := runCLI(t, append([]string{"-c", cfgPath, "--state-dir", state, "--log-level", "debug"}, args...)...)
		return code, out + errs
	}
	if code, out := gb("demo", "generate", "--events", "300", "--seed", "2"); code != exitOK {
		t.Fatal(out)
	}
	if code, out := gb("ingest"); code != exitOK {
		t.Fatal(out)
	}
	code, out := gb("silver")
	if msg := lineOf(out, "goldbridge: "); code == exitOK || strings.Count(msg, "silver orders:") != 1 || !strings.Contains(msg, "rule E9") {
		t.Fatalf("exit %d, want one \"silver orders:\" prefix and the rule:\n%s", code, out)
	}
	writeOrdersConfig(t, cfgPath, func(map[string]any) {})
	for _, stage := range []string{"silver", "gold"} {
		code, out := gb(stage)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", stage, code, out)
		}
		for _, l := range strings.Split(out, "\n") {
			for _, attr := range []string{"mart=", "entity=", "stage="} {
				if strings.Count(l, " "+attr) > 1 {
					t.Errorf("%s: %s twice: %s", stage, attr, l)
				}
			}
		}
	}
}
