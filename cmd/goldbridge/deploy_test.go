package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"goldbridge/cmd/goldbridge/internal/config"
)

const deployDir = "../../deploy"

// exprCheck says how the Prometheus integration test (TestServeWithPrometheus) checks one
// PromQL expression of deploy/: a dashboard expression must return data after a few
// scheduled runs; an alert expression is empty while all is well, so it must evaluate
// without error and its inner selector must return data.
type exprCheck struct {
	inner string // alerts: the selector that must return data while healthy
	sync  bool   // needs the metrics recorded by sync/check (asserted once they exist)
}

// promExprs is every PromQL expression in the dashboards and alert rules of deploy/.
// TestDashboards and TestAlertRules fail when deploy/ uses an expression not listed here,
// and when an entry here is used nowhere; TestServeWithPrometheus evaluates every entry.
var promExprs = map[string]exprCheck{
	// deploy/grafana/dashboards/goldbridge-ops.json
	`time() - goldbridge_data_newest_timestamp_seconds`:                                                  {},
	`time() - goldbridge_gold_calculated_timestamp_seconds`:                                              {},
	`goldbridge_circuit_open`:                                                                            {},
	`goldbridge_sync_lag_seconds`:                                                                        {sync: true},
	`goldbridge_reconciliation_drift_partitions`:                                                         {sync: true},
	`sum by (stage, outcome) (rate(goldbridge_rows_total[5m]))`:                                          {},
	`histogram_quantile(0.95, sum by (le, stage) (rate(goldbridge_stage_duration_seconds_bucket[15m])))`: {},
	`sum by (stage, outcome) (increase(goldbridge_runs_total[1h]))`:                                      {},
	`sum by (mart, check, severity) (increase(goldbridge_dq_check_failures_total[1h]))`:                  {},
	`time() - goldbridge_last_success_timestamp_seconds`:                                                 {},
	`goldbridge_hot_partitions`:                                                                          {sync: true},
	`increase(goldbridge_skipped_overlapping_runs_total[1h])`:                                            {},
	`up{job="goldbridge"}`:                                                                               {},
	`goldbridge_table_snapshots`:                                                                         {},
	`goldbridge_table_data_files`:                                                                        {},
	`goldbridge_table_delete_files`:                                                                      {},
	`goldbridge_table_manifests`:                                                                         {},
	`goldbridge_table_metadata_bytes`:                                                                    {},
	`time() - goldbridge_maintenance_last_success_timestamp_seconds`:                                     {},
	`goldbridge_clickhouse_data_bytes`:                                                                   {sync: true},
	`sum without (mart) (goldbridge_clickhouse_bytes)`:                                                   {sync: true},
	`goldbridge_clickhouse_inactive_bytes`:                                                               {sync: true},
	`goldbridge_clickhouse_parts`:                                                                        {sync: true},
	`goldbridge_clickhouse_inactive_parts`:                                                               {sync: true},
	`goldbridge_clickhouse_data_part_directories`:                                                        {sync: true},
	`goldbridge_clickhouse_dictionary_keys`:                                                              {sync: true},
	`goldbridge_clickhouse_dictionary_bytes`:                                                             {sync: true},
	`sum by (error) (increase(goldbridge_clickhouse_errors_total[15m]))`:                                 {},

	// deploy/prometheus/alerts.yml
	`up{job="goldbridge"} == 0`:                                                                       {inner: `up{job="goldbridge"}`},
	`time() - goldbridge_gold_calculated_timestamp_seconds > 26 * 3600`:                               {inner: `goldbridge_gold_calculated_timestamp_seconds`},
	`time() - goldbridge_data_newest_timestamp_seconds > 2 * 86400`:                                   {inner: `goldbridge_data_newest_timestamp_seconds`},
	`goldbridge_circuit_open > 0`:                                                                     {inner: `goldbridge_circuit_open`},
	`goldbridge_reconciliation_drift_partitions > 0`:                                                  {inner: `goldbridge_reconciliation_drift_partitions`, sync: true},
	`goldbridge_sync_lag_seconds > 3600`:                                                              {inner: `goldbridge_sync_lag_seconds`, sync: true},
	`sum by (stage) (increase(goldbridge_runs_total{outcome="failure"}[1h])) >= 3`:                    {inner: `goldbridge_runs_total{outcome="failure"}`},
	`time() - max by (stage, entity, mart) (goldbridge_last_success_timestamp_seconds) > 3 * 900`:     {inner: `goldbridge_last_success_timestamp_seconds`},
	`increase(goldbridge_skipped_overlapping_runs_total[1h]) > 2`:                                     {inner: `goldbridge_skipped_overlapping_runs_total`},
	`sum by (mart, check) (increase(goldbridge_dq_check_failures_total{severity="warning"}[6h])) > 0`: {inner: `goldbridge_dq_check_failures_total{severity="warning"}`},
	`time() - goldbridge_maintenance_last_success_timestamp_seconds > 3 * 3600`:                       {inner: `goldbridge_maintenance_last_success_timestamp_seconds`},
	`goldbridge_table_snapshots > 1000`:                                                               {inner: `goldbridge_table_snapshots`},
	`goldbridge_clickhouse_data_bytes > 3 * sum without (mart) (goldbridge_clickhouse_bytes) + 100 * 1024 * 1024`: {
		inner: `goldbridge_clickhouse_data_bytes`, sync: true},
	`sum by (entity, severity) (increase(goldbridge_silver_check_failures_total{check="undeclared"}[6h])) > 0`: {inner: `goldbridge_silver_check_failures_total{check="undeclared"}`},
	`sum by (error) (increase(goldbridge_clickhouse_errors_total{error=~"TIMEOUT_EXCEEDED|MEMORY_LIMIT_EXCEEDED|SERVER_OVERLOADED|SETTING_CONSTRAINT_VIOLATION"}[15m])) > 0`: {
		inner: `goldbridge_clickhouse_errors_total{error=~"TIMEOUT_EXCEEDED|MEMORY_LIMIT_EXCEEDED|SERVER_OVERLOADED|SETTING_CONSTRAINT_VIOLATION"}`},
}

// circuitOpenAlert is the expression that must return a series once a critical check fails.
const circuitOpenAlert = `goldbridge_circuit_open > 0`

type dashTarget struct {
	file, panel, dsType, dsUID, expr, sql string
}

// dashboardTargets reads every panel target of every dashboard in deploy/grafana/dashboards.
func dashboardTargets(t *testing.T) []dashTarget {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(deployDir, "grafana", "dashboards", "*.json"))
	if len(files) < 2 {
		t.Fatalf("dashboards: %v, want the operations and the KPI dashboard", files)
	}
	type ds struct{ Type, UID string }
	var out []dashTarget
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID    string
			Title  string
			Panels []struct {
				Title      string
				Type       string
				Datasource *ds
				Targets    []struct {
					Datasource *ds
					Expr       string
					RawSQL     string `json:"rawSql"`
				}
			}
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: invalid JSON: %v", f, err)
		}
		if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
			t.Fatalf("%s: uid, title and panels are required", f)
		}
		for _, p := range d.Panels {
			if p.Datasource == nil {
				t.Errorf("%s: panel %q has no datasource", f, p.Title)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no target", f, p.Title)
			}
			for _, tg := range p.Targets {
				dsx := *p.Datasource
				if tg.Datasource != nil {
					dsx = *tg.Datasource
				}
				out = append(out, dashTarget{filepath.Base(f), p.Title, dsx.Type, dsx.UID, tg.Expr, tg.RawSQL})
			}
		}
	}
	return out
}

// ruleExprs reads the alert rules: alert name → expression.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// deployExprs is every PromQL expression used in deploy/.
func deployExprs(t *testing.T) []string {
	var out []string
	for _, tg := range dashboardTargets(t) {
		if tg.expr != "" {
			out = append(out, tg.expr)
		}
	}
	for _, e := range ruleExprs(t) {
		out = append(out, e)
	}
	return out
}

func TestDashboards(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "provisioning", "datasources", "datasources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		Datasources []struct{ UID, Type string }
	}
	if err := yaml.Unmarshal(b, &prov); err != nil {
		t.Fatal(err)
	}
	provisioned := map[string]string{} // uid → type
	for _, d := range prov.Datasources {
		provisioned[d.UID] = d.Type
	}
	if provisioned["prometheus"] != "prometheus" || provisioned["clickhouse"] != "grafana-clickhouse-datasource" {
		t.Fatalf("provisioned datasources %v", provisioned)
	}
	sawSync := false
	for _, tg := range dashboardTargets(t) {
		where := tg.file + ": " + tg.panel
		if typ, ok := provisioned[tg.dsUID]; !ok || typ != tg.dsType {
			t.Errorf("%s: datasource %s/%s is not provisioned", where, tg.dsType, tg.dsUID)
		}
		switch tg.dsType {
		case "prometheus":
			if _, ok := promExprs[tg.expr]; !ok {
				t.Errorf("%s: expression %q is not checked by TestServeWithPrometheus (add it to promExprs)", where, tg.expr)
			}
		case "grafana-clickhouse-datasource":
			if tg.sql == "" {
				t.Errorf("%s: ClickHouse target without rawSql", where)
			}
			sawSync = sawSync || strings.Contains(tg.sql, "_goldbridge_sync")
		}
	}
	if !sawSync {
		t.Error("no ClickHouse panel reads _goldbridge_sync")
	}
	used := deployExprs(t)
	for e := range promExprs {
		if !slices.Contains(used, e) {
			t.Errorf("promExprs has %q, which no dashboard or rule uses", e)
		}
	}
}

func TestAlertRules(t *testing.T) {
	rules := ruleExprs(t)
	for _, name := range []string{"GoldbridgeFreshnessSLABreach", "GoldbridgeCircuitOpen", "GoldbridgeDrift", "GoldbridgeRepeatedFailures", "GoldbridgeNoSuccessfulRun"} {
		if rules[name] == "" {
			t.Errorf("alert %s missing", name)
		}
	}
	if rules["GoldbridgeCircuitOpen"] != circuitOpenAlert {
		t.Errorf("GoldbridgeCircuitOpen expr %q, the induced-failure test checks %q", rules["GoldbridgeCircuitOpen"], circuitOpenAlert)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, expr := range rules {
		if c, ok := promExprs[expr]; !ok || c.inner == "" {
			t.Errorf("alert %s: %q not in promExprs with an inner selector", name, expr)
		}
		if !bytes.Contains(doc, []byte("### "+name)) {
			t.Errorf("alert %s has no runbook section in docs/operations.md", name)
		}
	}
}

// TestDeployFiles parses every compose and Kubernetes YAML file and validates the pipeline
// configs they carry with goldbridge's own config validation.
func TestDeployFiles(t *testing.T) {
	env := func(name string) (string, bool) { return "x", true }

	b, err := os.ReadFile(filepath.Join(deployDir, "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image   string
			Build   any
			Volumes []string
		}
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	for _, s := range []string{"clickhouse", "minio", "iceberg-rest", "prometheus", "grafana", "goldbridge"} {
		svc, ok := compose.Services[s]
		if !ok || (svc.Image == "" && svc.Build == nil) {
			t.Errorf("compose service %s missing or without image", s)
		}
		for _, v := range svc.Volumes {
			if src, _, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(src, "./") && s != "goldbridge" {
				if _, err := os.Stat(filepath.Join(deployDir, src)); err != nil {
					t.Errorf("compose %s mounts %s: %v", s, src, err)
				}
			}
		}
	}
	pb, err := os.ReadFile(filepath.Join(deployDir, "compose", "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(pb, t.TempDir(), env); err != nil {
		t.Errorf("compose/pipeline.yaml: %v", err)
	}

	kinds := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(deployDir, "k8s", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string
				Metadata   struct{ Name string }
				Data       map[string]string
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if doc.APIVersion == "" || doc.Kind == "" || doc.Metadata.Name == "" {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			kinds[doc.Kind] = true
			if doc.Kind == "ConfigMap" {
				cfg, err := config.Parse([]byte(doc.Data["pipeline.yaml"]), t.TempDir(), env)
				if err != nil {
					t.Errorf("%s: pipeline.yaml: %v", f, err)
				} else if cfg.ClickHouse.PasswordFile == "" {
					t.Errorf("%s: the ClickHouse password must come from the Secret (password_file)", f)
				}
			}
		}
	}
	for _, k := range []string{"ConfigMap", "Secret", "Deployment", "CronJob", "Service"} {
		if !kinds[k] {
			t.Errorf("deploy/k8s has no %s", k)
		}
	}
}

// TestSystemdUnits runs systemd-analyze verify on the units (with ExecStart pointing at a
// real executable); without systemd-analyze it is skipped (docs/operations.md says so).
func TestSystemdUnits(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the systemd units are not verified here")
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	units, _ := filepath.Glob(filepath.Join(deployDir, "systemd", "*"))
	var args []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/goldbridge"), []byte(exe))
		dst := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, dst)
	}
	if len(args) != 3 {
		t.Fatalf("units %v", units)
	}
	out, err := exec.Command(sa, append([]string{"verify"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		t.Logf("systemd-analyze verify:\n%s", out)
	}
}

// TestSystemdUnitsPrivate: the services create the state directory 0700 (systemd's
// default is 0755) and run with umask 077.
func TestSystemdUnitsPrivate(t *testing.T) {
	units, _ := filepath.Glob(filepath.Join(deployDir, "systemd", "*.service"))
	if len(units) != 2 {
		t.Fatalf("units %v", units)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"\nStateDirectoryMode=0700\n", "\nUMask=0077\n"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s lacks %q", filepath.Base(u), strings.TrimSpace(want))
			}
		}
	}
}
