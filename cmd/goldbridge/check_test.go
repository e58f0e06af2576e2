package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"goldbridge/serving/chlocal"
)

// TestCheckTamperCLI: tampers of the served table by hand, each on a fresh state (the
// previous one repaired), make `goldbridge check` exit 4 naming the tampered partition;
// `check --repair` then exits 0 and the next `check` finds no drift (issue 16). The
// library test TestCheckRowExact covers every kind of tamper; this one the command.
func TestCheckTamperCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the chain on the embedded stack (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	ports := testPorts(t, 2)
	cfg := filepath.Join(dir, "pipeline.yaml")
	writeEmbeddedConfig(t, cfg, ports[0], ports[1], nil)
	gb := func(args ...string) (int, string) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append([]string{"-c", cfg, "--state-dir", state}, args...)...).CombinedOutput()
		t.Logf("%s: %v", args[0], time.Since(start).Round(time.Millisecond))
		return exitCode(err), string(out)
	}
	sql := func(q string) string {
		t.Helper()
		code, out := gb("clickhouse", "query", q)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", q, code, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1]
	}
	mustRun(t, bin, "--state-dir", state, "demo", "generate", "--events", "2000", "--seed", "3")
	mustRun(t, bin, "-c", cfg, "--state-dir", state, "run")
	if code, out := gb("check"); code != 0 {
		t.Fatalf("check after run: exit %d\n%s", code, out)
	}
	const tbl = "marts.daily_revenue_kpi"
	p := sql("SELECT _partition_id FROM " + tbl + " GROUP BY 1 ORDER BY count() DESC, 1 LIMIT 1 FORMAT TSV")
	countries := strings.Split(sql(fmt.Sprintf("SELECT arrayStringConcat(groupArray(country), ',') FROM (SELECT country FROM %s WHERE _partition_id = '%s' AND grouping_level = 'by_country' AND country IS NOT NULL ORDER BY country LIMIT 2) FORMAT TSV", tbl, p)), ",")
	if len(countries) != 2 {
		t.Fatalf("partition %s has countries %v", p, countries)
	}
	in := fmt.Sprintf("_partition_id = '%s' AND grouping_level = 'by_country' AND country = ", p)
	for _, tc := range []struct{ name, sql string }{
		{"compensating", fmt.Sprintf("ALTER TABLE %s UPDATE total_revenue = total_revenue + if(country = '%s', 1000, -1000) WHERE %s'%s' OR %s'%s' SETTINGS mutations_sync = 2",
			tbl, countries[0], in, countries[0], in, countries[1])},
		{"distinct_state", fmt.Sprintf("ALTER TABLE %s UPDATE unique_customers__state = arrayReduce('uniqExactState', arrayMap(i -> toString(i), range(1000))) WHERE %s'%s' SETTINGS mutations_sync = 2", tbl, in, countries[0])},
		{"missing_row", fmt.Sprintf("ALTER TABLE %s DELETE WHERE %s'%s' SETTINGS mutations_sync = 2", tbl, in, countries[1])},
		{"extra_row", fmt.Sprintf("INSERT INTO %s (report_date, grouping_level, country, category) SELECT report_date, 'detail', 'ZZ', 'zz' FROM %s WHERE _partition_id = '%s' LIMIT 1", tbl, tbl, p)},
		{"dropped_column", "ALTER TABLE " + tbl + " DROP COLUMN avg_order_value__count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql(tc.sql)
			code, out := gb("check")
			if code != exitDrift || !strings.Contains(out, " "+p+" ") {
				t.Fatalf("check after the tamper: exit %d, want %d naming partition %s\n%s", code, exitDrift, p, out)
			}
			if code, out := gb("check", "--repair"); code != 0 {
				t.Fatalf("check --repair: exit %d\n%s", code, out)
			}
			if code, out := gb("check"); code != 0 || !strings.Contains(out, "no drift") {
				t.Fatalf("check after the repair: exit %d\n%s", code, out)
			}
		})
	}
}
