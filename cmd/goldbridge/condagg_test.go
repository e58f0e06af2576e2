package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"goldbridge/serving/chlocal"
)

// TestConditionalMeasuresCLI: examples/orders.yaml with a sum_if and a count_if measure
// (paid DE/FR orders) goes through validate, run and check (exit 0); the measures in
// gold.daily_revenue_kpi and in daily_revenue_kpi_final equal ClickHouse's sumIf and
// countIf over silver.orders with GROUPING SETS, 0 where no row matches.
func TestConditionalMeasuresCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the chain on the embedded stack (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	base := ordersConfig(t)
	marts := base["marts"].(map[string]any)
	kpi := marts["daily_revenue_kpi"].(map[string]any)
	const cond = `status == "paid" && country in ["DE", "FR"]`
	kpi["measures"] = append(kpi["measures"].([]any),
		map[string]any{"name": "paid_revenue", "agg": "sum_if", "column": "amount", "if": cond},
		map[string]any{"name": "paid_orders", "agg": "count_if", "if": cond})
	kpi["serving"].(map[string]any)["hot_window"] = "365d" // every demo day (120) is served
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	ports := testPorts(t, 2)
	cfg := filepath.Join(dir, "pipeline.yaml")
	writeEmbeddedConfig(t, cfg, ports[0], ports[1], map[string]any{"marts": marts})
	gb := func(args ...string) string {
		t.Helper()
		return mustRun(t, bin, append([]string{"-c", cfg, "--state-dir", state}, args...)...)
	}
	gb("validate")
	mustRun(t, bin, "--state-dir", state, "demo", "generate", "--events", "2000", "--seed", "5")
	gb("run")
	gb("check")

	// rows reads TSV lines date, country, category, level, revenue, orders; the revenue
	// as a decimal with 2 places.
	rows := func(out string) []string {
		var res []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Split(l, "\t")
			if len(f) != 6 {
				continue // a log line
			}
			d, err := decimal.NewFromString(f[4])
			if err != nil {
				t.Fatalf("revenue %q in %q", f[4], l)
			}
			f[4] = d.StringFixed(2)
			res = append(res, strings.Join(f, "|"))
		}
		slices.Sort(res)
		return res
	}
	const cols = `toString(report_date), ifNull(country, '∅'), ifNull(category, '∅'), toString(grouping_level), toString(paid_revenue), paid_orders`
	want := rows(gb("query", `SELECT toString(toDate(created_at) AS d), ifNull(country, '∅'), ifNull(category, '∅'),
		multiIf(grouping(country) = 1, 'total', grouping(category) = 1, 'by_country', 'detail'),
		toString(ifNull(sumIf(amount, status = 'paid' AND country IN ('DE', 'FR')), 0)), countIf(status = 'paid' AND country IN ('DE', 'FR'))
		FROM silver.orders WHERE NOT is_deleted AND created_at IS NOT NULL
		GROUP BY GROUPING SETS ((d, country, category), (d, country), (d)) SETTINGS group_by_use_nulls = 1 FORMAT TSV`))
	zero := 0
	for _, w := range want {
		if strings.HasSuffix(w, "|0.00|0") {
			zero++
		}
	}
	if len(want) == 0 || zero == 0 {
		t.Fatalf("oracle: %d rows, %d without a match", len(want), zero)
	}
	for _, side := range []struct{ name, out string }{
		{"gold.daily_revenue_kpi", gb("query", "SELECT "+cols+" FROM gold.daily_revenue_kpi FORMAT TSV")},
		{"daily_revenue_kpi_final", gb("clickhouse", "query", "SELECT "+cols+" FROM marts.daily_revenue_kpi_final FORMAT TSV")},
	} {
		if got := rows(side.out); !slices.Equal(got, want) {
			t.Errorf("%s: %d rows, oracle %d; first differences:\n%s", side.name, len(got), len(want), firstDiff(got, want))
		}
	}
	t.Logf("%d rows, %d without a paid DE/FR order", len(want), zero)
}
