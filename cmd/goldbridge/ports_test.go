package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	ports, err := chlocal.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
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
		if strings.Contains(out, "Authentication failed") || strings.Contains(out, "516") {
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
