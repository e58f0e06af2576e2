package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"go.yaml.in/yaml/v3"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/serving/chlocal"
)

// TestServeWithPrometheus is the acceptance test of `goldbridge serve` with a real
// Prometheus (Debian's prometheus package: scripts/prometheus.sh):
//
//  1. serve on the embedded stack with a schedule @every 2s, Prometheus scraping it every
//     second on loopback with deploy/prometheus/alerts.yml loaded;
//  2. promtool check config and check rules;
//  3. after a few runs, every expression of promExprs (all dashboard and alert expressions
//     of deploy/) is evaluated through /api/v1/query and returns data (alerts: no error, and
//     their inner selector returns data); expressions of the sync/check metrics are asserted
//     once those metrics exist, and logged as not checked before;
//  4. SIGTERM while a run is going: the process exits 0 within server.shutdown_timeout;
//  5. restart on the same state with new landing data and a critical check that fails:
//     the circuit-open alert expression returns a series.
func TestServeWithPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts goldbridge serve, a local ClickHouse and Prometheus (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	promBin, err1 := exec.LookPath("prometheus")
	promtool, err2 := exec.LookPath("promtool")
	if err1 != nil || err2 != nil {
		t.Fatal("prometheus and promtool are not installed: run scripts/prometheus.sh (Debian's prometheus package)")
	}
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	mustRun(t, bin, "--state-dir", state, "demo", "generate", "--events", "2000", "--seed", "1")

	ports := testPorts(t, 6)
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	promAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	const shutdownTimeout = 10 * time.Second
	cfgPath := filepath.Join(dir, "pipeline.yaml")
	writeServeConfig(t, cfgPath, listen, ports[2], ports[3], shutdownTimeout, false)

	// promtool: the deploy config (syntax), the rules, and the test's own config.
	alerts, _ := filepath.Abs(filepath.Join(deployDir, "prometheus", "alerts.yml"))
	promCfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promCfg, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: goldbridge
    static_configs:
      - targets: [%q]
`, alerts, listen))
	mustRun(t, promtool, "check", "config", "--syntax-only", filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	mustRun(t, promtool, "check", "rules", alerts)
	mustRun(t, promtool, "check", "config", promCfg)

	serve := startServe(t, bin, cfgPath, state, listen)
	prom := startProcess(t, "prometheus", promBin, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	defer prom.stop(t, 10*time.Second)
	api := "http://" + promAddr

	// A few successful runs, seen through Prometheus.
	waitQuery(t, api, `goldbridge_runs_total{stage="gold",outcome="success"} >= 3`, 120*time.Second, serve)
	time.Sleep(3 * time.Second) // a few more scrapes for the rate windows

	syncBuilt := len(query(t, api, `goldbridge_sync_lag_seconds`)) > 0
	if !syncBuilt {
		t.Log("sync/check metrics not recorded by this build: their expressions are only checked to evaluate")
	}
	for expr, c := range promExprs {
		res := query(t, api, expr) // fails t on a PromQL error
		if c.sync && !syncBuilt {
			continue
		}
		if c.inner == "" {
			if len(res) == 0 {
				t.Errorf("dashboard expression returned no data: %s", expr)
			}
			continue
		}
		if got := query(t, api, c.inner); len(got) == 0 {
			t.Errorf("alert %s: inner selector %s returned no data", expr, c.inner)
		}
	}
	if res := query(t, api, circuitOpenAlert); len(res) != 0 {
		t.Errorf("circuit-open alert fires on a healthy pipeline: %v", res)
	}
	// A refused login on the embedded server reaches Prometheus as its error count.
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/", ports[3]), strings.NewReader("SELECT 1"))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("goldbridge", "not-the-password")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatalf("a login with a wrong password: %v", err)
	} else if resp.Body.Close(); resp.StatusCode == http.StatusOK {
		t.Fatal("a login with a wrong password was served")
	}
	waitQuery(t, api, `goldbridge_clickhouse_errors_total{error="AUTHENTICATION_FAILED"} >= 1`, 30*time.Second, serve)
	st := getStatus(t, listen)
	if len(st.Marts) != 1 || st.Marts[0].Circuit != "closed" || st.Marts[0].LastRun == nil || st.Marts[0].LastCalculated == nil {
		t.Errorf("status %+v", st)
	}
	if code, body := httpGet(t, "http://"+listen+"/readyz"); code != http.StatusOK {
		t.Errorf("readyz %d: %s", code, body)
	}

	// SIGTERM while a job runs: exit 0 within the bound.
	// One observation decides: a job lasts ~0.3 s, so asking a second time could find it
	// finished (CI failed so once).
	deadline := time.Now().Add(30 * time.Second)
	running := getStatus(t, listen).Running
	for !running && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		running = getStatus(t, listen).Running
	}
	if !running {
		t.Fatal("never saw a running job")
	}
	start := time.Now()
	code := serve.stop(t, shutdownTimeout+time.Second)
	took := time.Since(start)
	t.Logf("SIGTERM during a run: exit %d after %s (bound %s)", code, took.Round(time.Millisecond), shutdownTimeout)
	if code != 0 || took > shutdownTimeout+time.Second {
		t.Fatalf("SIGTERM: exit %d after %s, want 0 within %s\n%s", code, took, shutdownTimeout, serve.output())
	}

	// The next run converges after the interrupted one: every landing line is in Bronze
	// exactly once, and ClickHouse equals Gold (check exits 0).
	mustRun(t, bin, "-c", cfgPath, "--state-dir", state, "run")
	mustRun(t, bin, "-c", cfgPath, "--state-dir", state, "check")
	assertBronzeHoldsLanding(t, state)

	// Induced failure: new landing data and a critical check that fails on every row.
	gen := filepath.Join(dir, "more")
	mustRun(t, bin, "--state-dir", state, "demo", "generate", "--events", "300", "--seed", "2", "--out", gen)
	files, _ := filepath.Glob(filepath.Join(gen, "*.jsonl"))
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(state, "landing", "orders", "extra-"+filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	writeServeConfig(t, cfgPath, listen, ports[4], ports[5], shutdownTimeout, true)
	serve = startServe(t, bin, cfgPath, state, listen)
	res := waitQuery(t, api, circuitOpenAlert, 120*time.Second, serve)
	t.Logf("circuit-open alert expression after the induced failure: %v", res)
	st = getStatus(t, listen)
	if st.Marts[0].Circuit != "open" {
		t.Errorf("status after the induced failure: %+v", st.Marts[0])
	}
	// The runs after the SIGTERM converged: silver and ingest kept succeeding on that state.
	if r := query(t, api, `goldbridge_runs_total{stage=~"ingest|silver",outcome="failure"} > 0`); len(r) != 0 {
		t.Errorf("ingest/silver failures after the restart: %v", r)
	}
	if code := serve.stop(t, shutdownTimeout+time.Second); code != 0 {
		t.Errorf("second serve: exit %d\n%s", code, serve.output())
	}
}

// assertBronzeHoldsLanding checks that bronze.orders holds every non-blank landing line
// exactly once (no line lost, none duplicated).
func assertBronzeHoldsLanding(t *testing.T, state string) {
	t.Helper()
	want := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(state, "landing", "orders", "*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(l) != "" {
				want[filepath.Base(f)+"\x00"+l]++
			}
		}
	}
	ctx := context.Background()
	lh, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"), Warehouse: "file://" + filepath.Join(state, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	tbl, err := lh.LoadTable(ctx, "bronze.orders")
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields(bronze.ColPayload, bronze.ColFile)).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		p := rec.Column(rec.Schema().FieldIndices(bronze.ColPayload)[0]).(*array.String)
		f := rec.Column(rec.Schema().FieldIndices(bronze.ColFile)[0]).(*array.String)
		for i := range p.Len() {
			b, err := bronze.DecodePayload(p.Value(i))
			if err != nil {
				t.Fatal(err)
			}
			got[filepath.Base(f.Value(i))+"\x00"+string(b)]++
		}
		rec.Release()
	}
	if len(got) != len(want) {
		t.Fatalf("bronze has %d distinct lines, landing %d", len(got), len(want))
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("line %q: %d times in bronze, %d in landing", k, got[k], n)
		}
	}
}

// buildGoldbridge builds the binary once per test binary.
var buildOnce struct {
	sync.Once
	path string
	err  error
	out  []byte
}

func buildGoldbridge(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "goldbridge-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "goldbridge")
		cmd := exec.Command("go", "build", "-o", buildOnce.path, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOnce.out, buildOnce.err = cmd.CombinedOutput()
	})
	if buildOnce.err != nil {
		t.Fatalf("go build: %v\n%s", buildOnce.err, buildOnce.out)
	}
	t.Cleanup(func() {}) // the binary is left in the temp dir for the other tests of the run
	return buildOnce.path
}

// writeServeConfig writes examples/orders.yaml with private ClickHouse ports, a schedule
// every 2 s and the server section; failing adds a critical check that fails.
func writeServeConfig(t *testing.T, path, listen string, tcpPort, httpPort int, shutdown time.Duration, failing bool) {
	t.Helper()
	cfg := ordersConfig(t)
	ch := cfg["clickhouse"].(map[string]any)
	ch["local"] = map[string]any{"tcp_port": tcpPort, "http_port": httpPort}
	cfg["schedules"] = map[string]any{
		"fast": map[string]any{"cron": "@every 2s", "stages": []string{"ingest", "silver", "gold", "sync", "check"}},
	}
	cfg["server"] = map[string]any{"listen": listen, "shutdown_timeout": shutdown.String()}
	// Bitmaps: the dashboard's dictionary panel needs its metrics.
	cfg["marts"].(map[string]any)["daily_revenue_kpi"].(map[string]any)["serving"].(map[string]any)["distinct"] = "bitmap"
	if failing {
		m := cfg["marts"].(map[string]any)["daily_revenue_kpi"].(map[string]any)
		m["checks"] = append(m["checks"].([]any), map[string]any{
			"name": "induced_failure", "type": "expr", "expr": "total_revenue < 0", "severity": "critical",
		})
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(out))
}

func startServe(t *testing.T, bin, cfg, state, listen string) *process {
	t.Helper()
	p := startProcess(t, "serve", bin, "-c", cfg, "--state-dir", state, "serve")
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if code, _ := httpGetNoFail("http://" + listen + "/healthz"); code == http.StatusOK {
			return p
		}
		if p.exited() {
			t.Fatalf("serve exited at start:\n%s", p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("serve not up after 90s:\n%s", p.output())
	return nil
}

// process is a child process whose output is kept for failure messages.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	code int
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startProcess(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output (tail):\n%s", name, tail(p.output(), 4000))
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) output() string { return p.out.String() }

// stop sends SIGTERM and waits up to bound; after it, it kills and fails t.
func (p *process) stop(t *testing.T, bound time.Duration) int {
	t.Helper()
	if p.exited() {
		return p.code
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.code
	case <-time.After(bound):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not exit within %s of SIGTERM", p.name, bound)
		return -1
	}
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// query evaluates expr through Prometheus's HTTP API; a PromQL error fails t.
func query(t *testing.T, api, expr string) []promSample {
	t.Helper()
	code, body := httpGet(t, api+"/api/v1/query?query="+url.QueryEscape(expr))
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != http.StatusOK || r.Status != "success" {
		t.Fatalf("query %s: HTTP %d, %s: %s %s", expr, code, r.Status, r.ErrorType, r.Error)
	}
	var out []promSample
	if r.Data.ResultType == "vector" {
		if err := json.Unmarshal(r.Data.Result, &out); err != nil {
			t.Fatalf("query %s: %v", expr, err)
		}
	} else if r.Data.ResultType == "scalar" {
		out = []promSample{{}}
	}
	return out
}

// waitQuery polls expr until it returns a series; it fails t after timeout or if the
// watched process exits.
func waitQuery(t *testing.T, api, expr string, timeout time.Duration, watch *process) []promSample {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		// Prometheus may still be starting: tolerate connection errors.
		if code, _ := httpGetNoFail(api + "/-/ready"); code == http.StatusOK {
			if res := query(t, api, expr); len(res) > 0 {
				return res
			}
		}
		if watch.exited() {
			t.Fatalf("serve exited (code %d) while waiting for %s:\n%s", watch.code, expr, tail(watch.output(), 4000))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("no data for %s after %s\nserve output:\n%s", expr, timeout, tail(watch.output(), 4000))
	return nil
}

type testStatus struct {
	Running bool `json:"running"`
	Marts   []struct {
		Name           string     `json:"name"`
		Circuit        string     `json:"circuit"`
		LastRun        *martRun   `json:"last_run"`
		LastCalculated *time.Time `json:"last_calculated"`
	} `json:"marts"`
}

func getStatus(t *testing.T, listen string) testStatus {
	t.Helper()
	code, body := httpGet(t, "http://"+listen+"/status")
	var st testStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("status %d: %s", code, body)
	}
	return st
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	code, body := httpGetNoFail(u)
	if code == 0 {
		t.Fatalf("GET %s: %s", u, body)
	}
	return code, body
}

func httpGetNoFail(u string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func mustRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestClickHouseServeStops: `goldbridge clickhouse serve` (the bench's server, and a
// user's standalone one) stops on SIGTERM at once with exit 0. It used to run the server
// confined in the foreground, where it may not connect to its own port to stop it: each
// stop took 30 s and exited 1 ("server did not stop within 30s ... permission denied").
func TestClickHouseServeStops(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the local ClickHouse (skipped with -short)")
	}
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	ports := testPorts(t, 2)
	cmd := exec.Command(bin, "--state-dir", dir, "clickhouse", "serve", "--path", filepath.Join(dir, "ch"),
		"--tcp-port", strconv.Itoa(ports[0]), "--http-port", strconv.Itoa(ports[1]))
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	url := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	// Ready once it says so (after its start returned), not at the first /ping: a
	// SIGTERM during the start is a stop too, but not the one under test.
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), `msg="clickhouse serve"`) || chlocal.Ping(context.Background(), url) != nil {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("clickhouse serve did not start:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("clickhouse serve exited with %v after SIGTERM:\n%s", err, tail(out.String(), 3000))
		}
		t.Logf("stopped in %v", time.Since(t0).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("clickhouse serve still running 10 s after SIGTERM:\n%s", tail(out.String(), 3000))
	}
	if chlocal.Ping(context.Background(), url) == nil {
		t.Fatal("the server still answers after clickhouse serve exited")
	}
}
