package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/serving/chlocal"
)

// hostPipeline is one pipeline of several on one host: a state directory of its own and
// a config file, run through the built binary.
type hostPipeline struct {
	t     *testing.T
	name  string
	bin   string
	cfg   string
	state string
}

func (p hostPipeline) args(args ...string) []string {
	return append([]string{"-c", p.cfg, "--state-dir", p.state}, args...)
}

// start starts one command of the pipeline as a process of the test.
func (p hostPipeline) start(args ...string) *process {
	p.t.Helper()
	return startProcess(p.t, p.name+" "+args[0], p.bin, p.args(args...)...)
}

// sql runs one statement through `goldbridge ARGS[0] SQL` (clickhouse query: the
// pipeline's ClickHouse; query: the lake, read by a ClickHouse of its own) and returns the
// last line of its output.
func (p hostPipeline) sql(cmd []string, q string) string {
	p.t.Helper()
	out := mustRun(p.t, p.bin, p.args(append(cmd, q)...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// served returns the number of served days and the orders they count in the pipeline's
// ClickHouse, and the first served day.
func (p hostPipeline) served() (days, orders int, first string) {
	p.t.Helper()
	f := strings.Split(p.sql([]string{"clickhouse", "query"}, "SELECT count(), sum(total_orders), toString(min(report_date)) FROM marts.daily_revenue_kpi_final WHERE grouping_level = 'total' FORMAT TSV"), "\t")
	if len(f) != 3 {
		p.t.Fatalf("%s: served: %q", p.name, f)
	}
	days, _ = strconv.Atoi(f[0])
	orders, _ = strconv.Atoi(f[1])
	return days, orders, f[2]
}

// checkServesItsOwn fails unless the pipeline's ClickHouse serves exactly its own Gold
// table: the days from the first served one and their orders, as the lake has them (read
// by goldbridge query's own ClickHouse, not by the pipeline's). It returns the orders.
func (p hostPipeline) checkServesItsOwn() int {
	p.t.Helper()
	days, orders, first := p.served()
	want := p.sql([]string{"query"}, "SELECT count(), sum(total_orders) FROM gold.daily_revenue_kpi WHERE grouping_level = 'total' AND report_date >= '"+first+"' FORMAT TSV")
	if got := fmt.Sprintf("%d\t%d", days, orders); got != want || days < 30 {
		p.t.Fatalf("%s: its ClickHouse serves %s (days, orders) from %s; its Gold table has %s", p.name, got, first, want)
	}
	return orders
}

// uptime returns the seconds the pipeline's ClickHouse has been up.
func (p hostPipeline) uptime() int {
	p.t.Helper()
	n, err := strconv.Atoi(p.sql([]string{"clickhouse", "query"}, "SELECT uptime() FORMAT TSV"))
	if err != nil {
		p.t.Fatalf("%s: uptime: %v", p.name, err)
	}
	return n
}

// serveClickHouse starts `clickhouse serve` for the pipeline and waits until it is up.
func (p hostPipeline) serveClickHouse() *process {
	p.t.Helper()
	srv := p.start("clickhouse", "serve")
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(srv.output(), `msg="clickhouse serve"`) {
		if srv.exited() || time.Now().After(deadline) {
			p.t.Fatalf("%s: clickhouse serve did not start:\n%s", p.name, tail(srv.output(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return srv
}

// waitExit waits up to bound for the process to exit and returns its exit code.
func waitExit(t *testing.T, p *process, bound time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(bound):
		t.Fatalf("%s still running after %s:\n%s", p.name, bound, tail(p.output(), 4000))
		return -1
	}
}

// checkNeverRestarted fails if the ClickHouse of `clickhouse serve` srv, up for up0
// seconds at t0, was restarted since.
func checkNeverRestarted(t *testing.T, p hostPipeline, srv *process, up0 int, t0 time.Time) {
	t.Helper()
	if srv.exited() {
		t.Fatalf("%s: clickhouse serve exited (%d):\n%s", p.name, srv.code, tail(srv.output(), 4000))
	}
	if out := srv.output(); strings.Contains(out, "clickhouse server exited") {
		t.Fatalf("%s: its ClickHouse was restarted:\n%s", p.name, tail(out, 4000))
	}
	if up, least := p.uptime(), up0+int(time.Since(t0).Seconds())-1; up < least {
		t.Fatalf("%s: its ClickHouse is up for %d s, want at least %d: it was restarted", p.name, up, least)
	}
}

// TestTwoPipelinesOneHost (issue 37): two pipelines on one host, each with its own state
// directory and the example's config as it is (no ports pinned). A's ClickHouse runs
// long-lived under `clickhouse serve` while A's and B's `run` go at the same time. Both
// runs succeed, each ClickHouse serves its own pipeline's Gold table exactly (checked
// against the lake, read by an engine of its own), and A's server is never restarted.
// Before, both pipelines took ports 19000/18123: B logged into A's server with B's
// password, the failed login aborted A's server (libchdb 26.7 ends the process on it,
// docs/operations.md) and B's run exited 1.
func TestTwoPipelinesOneHost(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: two pipelines on the embedded stack (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pipeline.yaml")
	writeOrdersConfig(t, cfg, func(map[string]any) {}) // unchanged: no clickhouse.local ports
	a := hostPipeline{t: t, name: "A", bin: bin, cfg: cfg, state: filepath.Join(dir, "a")}
	b := hostPipeline{t: t, name: "B", bin: bin, cfg: cfg, state: filepath.Join(dir, "b")}
	mustRun(t, bin, "--state-dir", a.state, "demo", "generate", "--events", "3000", "--seed", "1")
	mustRun(t, bin, "--state-dir", b.state, "demo", "generate", "--events", "5000", "--seed", "2")

	srvA := a.serveClickHouse()
	up0, t0 := a.uptime(), time.Now()
	runA, runB := a.start("run"), b.start("run")
	for _, r := range []*process{runA, runB} {
		if code := waitExit(t, r, 5*time.Minute); code != 0 {
			t.Fatalf("%s: exit %d\n%s", r.name, code, tail(r.output(), 4000))
		}
	}
	checkNeverRestarted(t, a, srvA, up0, t0)
	ordersA, ordersB := a.checkServesItsOwn(), b.checkServesItsOwn()
	if ordersA == ordersB {
		t.Fatalf("A and B serve the same number of orders (%d): the test cannot tell them apart", ordersA)
	}
	checkNeverRestarted(t, a, srvA, up0, t0)
	if code := srvA.stop(t, 20*time.Second); code != 0 {
		t.Fatalf("A: clickhouse serve exit %d", code)
	}
	t.Logf("A serves %d orders, B %d; A's server up for the whole test", ordersA, ordersB)
}

// loggedIn matches ClickHouse's refusal of a login (code 516, AUTHENTICATION_FAILED) and
// not a "516" inside a run ID or a row count.
var loggedIn = regexp.MustCompile(`Authentication failed|(?i)code:? 516\b|AUTHENTICATION_FAILED`)

// TestPinnedPortsTakenByAnotherStateDir (issue 37): two state directories whose config
// pins the same ports. B's commands refuse to use the server A runs there, naming the
// port and A's data directory, without logging in to it: A's server is not restarted
// and still serves A's numbers. Before, B logged in with B's password ("Authentication
// failed"), which aborted A's server.
func TestPinnedPortsTakenByAnotherStateDir(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: two pipelines on the embedded stack (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	ports := testPorts(t, 2)
	cfg := filepath.Join(dir, "pipeline.yaml")
	writeOrdersConfig(t, cfg, func(c map[string]any) {
		c["clickhouse"].(map[string]any)["local"] = map[string]any{"tcp_port": ports[0], "http_port": ports[1]}
	})
	a := hostPipeline{t: t, name: "A", bin: bin, cfg: cfg, state: filepath.Join(dir, "a")}
	b := hostPipeline{t: t, name: "B", bin: bin, cfg: cfg, state: filepath.Join(dir, "b")}
	mustRun(t, bin, "--state-dir", a.state, "demo", "generate", "--events", "3000", "--seed", "1")
	mustRun(t, bin, "--state-dir", b.state, "demo", "generate", "--events", "2000", "--seed", "2")

	srvA := a.serveClickHouse()
	mustRun(t, bin, a.args("run")...)
	ordersA := a.checkServesItsOwn()
	up0, t0 := a.uptime(), time.Now()

	holder := filepath.Join(a.state, "clickhouse")
	for _, args := range [][]string{{"run"}, {"clickhouse", "query", "SELECT 1"}, {"sync"}, {"clickhouse", "serve"}} {
		p := b.start(args...)
		code := waitExit(t, p, 2*time.Minute)
		out := p.output()
		if code != exitFailure || !strings.Contains(out, strconv.Itoa(ports[1])) || !strings.Contains(out, holder) {
			t.Fatalf("B %s: exit %d, want %d naming port %d and %s\n%s", strings.Join(args, " "), code, exitFailure, ports[1], holder, tail(out, 4000))
		}
		if loggedIn.MatchString(out) {
			t.Fatalf("B %s logged in to A's server:\n%s", strings.Join(args, " "), tail(out, 4000))
		}
		t.Logf("B %s: %s", strings.Join(args, " "), out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	}
	checkNeverRestarted(t, a, srvA, up0, t0)
	if _, orders, _ := a.served(); orders != ordersA {
		t.Fatalf("A serves %d orders after B's attempts, %d before", orders, ordersA)
	}
	if code := srvA.stop(t, 20*time.Second); code != 0 {
		t.Fatalf("A: clickhouse serve exit %d", code)
	}
}

// TestLocalPorts: ports left unset are the state dir's own, chosen once and kept
// (0600); two state dirs get different ones; pinned ports are used as they are and
// record nothing; a state dir with ClickHouse data from before keeps 19000/18123 while
// both are free; a pinned port equal to the other recorded one is a config error.
func TestLocalPorts(t *testing.T) {
	a := &app{log: slog.New(slog.DiscardHandler)}
	load := func(state, src string) *config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte("version: 1\n"+src), state, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.localPorts(cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	dir := t.TempDir()
	sa, sb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	la, lb := load(sa, "").ClickHouse.Local, load(sb, "").ClickHouse.Local
	if la.TCPPort == 0 || la.HTTPPort == 0 || la.PortsFile != filepath.Join(sa, "clickhouse.ports") {
		t.Fatalf("A: %+v", la)
	}
	if ports := []int{la.TCPPort, la.HTTPPort, lb.TCPPort, lb.HTTPPort}; len(slices.Compact(slices.Sorted(slices.Values(ports)))) != 4 {
		t.Fatalf("A and B share a port: %v", ports)
	}
	if again := load(sa, "").ClickHouse.Local; again.TCPPort != la.TCPPort || again.HTTPPort != la.HTTPPort {
		t.Fatalf("A's ports changed: %+v, then %+v", la, again)
	}
	if st, err := os.Stat(la.PortsFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ports file: %v %v, want mode 0600", st, err)
	}

	sp := filepath.Join(dir, "pinned")
	if l := load(sp, "clickhouse: {local: {tcp_port: 29001, http_port: 29002}}\n").ClickHouse.Local; l.TCPPort != 29001 || l.HTTPPort != 29002 || l.PortsFile != "" {
		t.Fatalf("pinned: %+v", l)
	}
	if _, err := os.Stat(filepath.Join(sp, "clickhouse.ports")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pinned ports recorded a file: %v", err)
	}

	so := filepath.Join(dir, "old")
	if err := os.MkdirAll(filepath.Join(so, "clickhouse", "metadata"), 0o700); err != nil {
		t.Fatal(err)
	}
	legacyFree := true
	for _, p := range []int{config.LegacyCHLocalTCPPort, config.LegacyCHLocalHTTPPort} {
		if l, err := net.Listen("tcp", net.JoinHostPort(chlocal.DefaultListenHost, strconv.Itoa(p))); err != nil {
			legacyFree = false
		} else {
			l.Close()
		}
	}
	lo := load(so, "").ClickHouse.Local
	if got := lo.TCPPort == config.LegacyCHLocalTCPPort && lo.HTTPPort == config.LegacyCHLocalHTTPPort; got != legacyFree {
		t.Fatalf("a state dir from before, 19000/18123 free %v: got %+v", legacyFree, lo)
	}

	cfg, err := config.Parse([]byte(fmt.Sprintf("version: 1\nclickhouse: {local: {tcp_port: %d}}\n", la.HTTPPort)), sa, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = a.localPorts(cfg)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), strconv.Itoa(la.HTTPPort)) {
		t.Fatalf("a pinned port equal to the recorded other one: %v, want a usage error naming %d", err, la.HTTPPort)
	}
}
