package chlocal_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtest"
)

func TestMain(m *testing.M) {
	if os.Getenv("GB_TEST_SLOW_CLIENT") != "" {
		slowClient() // a client process that TestSupervised kills mid-query
		return
	}
	chtest.Main(m)
}

type dayCountry struct {
	day     string
	country string
	revenue string
	orders  uint64
}

func TestReplacePartition(t *testing.T) {
	conn := chtest.Conn(t)
	db := chtest.Database(t)
	ctx := context.Background()

	const cols = "(day Date, country LowCardinality(String), revenue Decimal(18,2), orders UInt64)"
	const engine = " ENGINE = SummingMergeTree ORDER BY (day, country) PARTITION BY day"
	gold, staging := db+".gold", db+".gold_staging"
	mustExec(t, conn, "CREATE TABLE "+gold+" "+cols+engine)
	mustExec(t, conn, "CREATE TABLE "+staging+" "+cols+engine)

	insert(t, conn, gold, []dayCountry{
		{"2026-01-01", "US", "100.10", 3},
		{"2026-01-01", "FR", "50.05", 2},
		{"2026-01-01", "US", "0.90", 1}, // same key: summed
		{"2026-01-01", "DE", "0.01", 1},
		{"2026-01-02", "US", "200.00", 4},
		{"2026-01-02", "FR", "12.34", 1},
	})
	before := []dayCountry{
		{"2026-01-01", "DE", "0.01", 1},
		{"2026-01-01", "FR", "50.05", 2},
		{"2026-01-01", "US", "101", 4},
		{"2026-01-02", "FR", "12.34", 1},
		{"2026-01-02", "US", "200", 4},
	}
	assertRows(t, conn, gold, before)

	// New version of day 1 in staging, swapped in atomically.
	insert(t, conn, staging, []dayCountry{
		{"2026-01-01", "US", "111.11", 5},
		{"2026-01-01", "GB", "7.77", 1},
		{"2026-01-01", "GB", "0.03", 2},
	})
	after := []dayCountry{
		{"2026-01-01", "GB", "7.8", 3},
		{"2026-01-01", "US", "111.11", 5},
		{"2026-01-02", "FR", "12.34", 1},
		{"2026-01-02", "US", "200", 4},
	}
	for i := range 2 { // the second swap with the same staging content changes nothing
		mustExec(t, conn, "ALTER TABLE "+gold+" REPLACE PARTITION '2026-01-01' FROM "+staging)
		assertRows(t, conn, gold, after)
		assertTotals(t, conn, gold, map[string]dayTotal{
			"2026-01-01": {"118.91", 8, 2},
			"2026-01-02": {"212.34", 5, 2},
		})
		t.Logf("swap %d ok", i+1)
	}
	// The staging partition is copied, not moved.
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+staging).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("staging is empty after REPLACE PARTITION FROM; want its rows kept")
	}
}

func TestHTTP(t *testing.T) {
	conn := chtest.HTTPConn(t)
	ctx := context.Background()
	var (
		sum     uint64
		version string
	)
	if err := conn.QueryRow(ctx, "SELECT toUInt64(40 + 2), version()").Scan(&sum, &version); err != nil {
		t.Fatal(err)
	}
	if sum != 42 {
		t.Fatalf("40 + 2 = %d over HTTP", sum)
	}
	if !strings.HasPrefix(version, "26.7.") {
		t.Fatalf("version() = %q, want 26.7.x", version)
	}
	var total uint64
	if err := conn.QueryRow(ctx, "SELECT sum(number) FROM numbers(1000)").Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 499500 {
		t.Fatalf("sum(number) over numbers(1000) = %d, want 499500", total)
	}
}

// TestRestartKeepsData also measures start, idle RSS, kill/restart and graceful stop.
func TestRestartKeepsData(t *testing.T) {
	chtest.Require(t)
	ctx := context.Background()
	ports, err := chlocal.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data") // Start creates it
	t0 := time.Now()
	const maxMem = 3 << 30
	srv, err := chlocal.Start(ctx, chlocal.Options{Path: dir, TCPPort: ports[0], HTTPPort: ports[1], MaxServerMemory: maxMem, Password: "pw-restart"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Kill() })
	t.Logf("start to ready: %v", time.Since(t0))
	time.Sleep(2 * time.Second) // let it settle before reading RSS
	t.Logf("idle RSS: %s", rss(t, srv.PID()))

	conn := openNative(t, srv)
	var mem string
	if err := conn.QueryRow(ctx, "SELECT value FROM system.server_settings WHERE name = 'max_server_memory_usage'").Scan(&mem); err != nil {
		t.Fatal(err)
	}
	if mem != strconv.Itoa(maxMem) {
		t.Fatalf("max_server_memory_usage = %s, want %d", mem, maxMem)
	}
	mustExec(t, conn, "CREATE DATABASE keep")
	mustExec(t, conn, "CREATE TABLE keep.t (id UInt64, v String) ENGINE = MergeTree ORDER BY id")
	mustExec(t, conn, "INSERT INTO keep.t SELECT number, toString(number) FROM numbers(10000)")
	_ = conn.Close()

	pid := srv.PID()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if srv.PID() != 0 {
		t.Fatalf("PID() = %d after Kill, want 0", srv.PID())
	}
	if err := syscallAlive(pid); err == nil {
		t.Fatalf("process %d still alive after Kill", pid)
	}

	t0 = time.Now()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart to ready (after SIGKILL): %v", time.Since(t0))
	if srv.PID() == 0 || srv.PID() == pid {
		t.Fatalf("PID() = %d after Restart (old %d)", srv.PID(), pid)
	}
	conn = openNative(t, srv)
	assertKept(t, conn)

	// A client connection left open delays the exit (ClickHouse waits up to
	// 5 s for it, then exits by itself); Stop still succeeds well before its
	// SIGKILL deadline.
	t0 = time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("stop with a client connection open: %v", time.Since(t0))
	_ = conn.Close()

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	conn = openNative(t, srv)
	assertKept(t, conn)
	_ = conn.Close()

	t0 = time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("graceful stop: %v", time.Since(t0))
	if out := srv.Output(); strings.Contains(out, "chlocal child:") {
		t.Fatalf("child reported an error on a graceful stop: %s", out)
	}
	if srv.PID() != 0 {
		t.Fatalf("PID() = %d after Stop, want 0", srv.PID())
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestStartFailures(t *testing.T) {
	chtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	t.Run("port in use", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		busy := l.Addr().(*net.TCPAddr).Port
		ports, err := chlocal.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		srv, err := chlocal.Start(ctx, chlocal.Options{Path: t.TempDir(), TCPPort: busy, HTTPPort: ports[0], Password: "pw"})
		if err == nil {
			_ = srv.Kill()
			t.Fatal("Start succeeded on a busy port")
		}
		if !strings.Contains(err.Error(), strconv.Itoa(busy)) || !strings.Contains(err.Error(), "not free") {
			t.Fatalf("error does not name the busy port %d: %v", busy, err)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("Start took %v to fail", d)
		}
	})

	t.Run("path in use", func(t *testing.T) {
		// A second server on the shared server's path: the child itself fails.
		shared := chtest.Server(t)
		ports, err := chlocal.FreePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		srv, err := chlocal.Start(ctx, chlocal.Options{Path: shared.Path(), TCPPort: ports[0], HTTPPort: ports[1], Password: shared.Password()})
		if err == nil {
			_ = srv.Kill()
			t.Fatal("Start succeeded on a path held by another server")
		}
		if !strings.Contains(err.Error(), "exited before it was ready") {
			t.Fatalf("unexpected error: %v", err)
		}
		t.Logf("took %v: %v", time.Since(t0), err)
		// The shared server is unharmed.
		var one uint8
		if err := chtest.Conn(t).QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("shared server after the failed start: %v %d", err, one)
		}
	})
}

func TestLibPathMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope", "libchdb.so")
	t.Setenv(chlocal.LibEnv, missing)
	_, err := chlocal.LibPath()
	if err == nil {
		t.Fatal("LibPath succeeded for a missing file")
	}
	for _, want := range []string{missing, "$GOLDBRIDGE_LIBCHDB", "make clickhouse", "needs npm"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	cache := t.TempDir()
	t.Setenv(chlocal.LibEnv, "")
	t.Setenv("GOLDBRIDGE_CACHE", cache)
	want := filepath.Join(cache, "chdb", chlocal.LibVersion, "libchdb.so")
	if _, err := chlocal.LibPath(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("LibPath error %v does not name %s", err, want)
	}
	if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := chlocal.LibPath(); err != nil || got != want {
		t.Fatalf("LibPath() = %q, %v; want %q", got, err, want)
	}
}

func TestOptionsValidation(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]chlocal.Options{
		"no path":     {TCPPort: 1, HTTPPort: 2, LibPath: "/x"},
		"no port":     {Path: t.TempDir(), HTTPPort: 2, LibPath: "/x"},
		"same ports":  {Path: t.TempDir(), TCPPort: 5, HTTPPort: 5, LibPath: "/x", Password: "p"},
		"no password": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x"},
		"reader is default": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			Readers: []chlocal.Reader{{Name: "default", Password: "r"}}},
		"reader is the admin": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			Readers: []chlocal.Reader{{Name: chlocal.DefaultUser, Password: "r"}}},
		"reader without password": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			Readers: []chlocal.Reader{{Name: "grafana"}}},
		"bad reader name": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			Readers: []chlocal.Reader{{Name: "a b", Password: "r"}}},
		"reader timeout under a second": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			ReaderTimeout: 999 * time.Millisecond},
		"reader timeout not whole seconds": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			ReaderTimeout: 1500 * time.Millisecond},
		"negative reader timeout": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			ReaderTimeout: -time.Second},
		"reader memory under the least": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			ReaderMemory: chlocal.MinReaderMemory - 1},
		"negative reader memory": {Path: t.TempDir(), TCPPort: 5, HTTPPort: 6, LibPath: "/x", Password: "p",
			ReaderMemory: -1},
	} {
		if _, err := chlocal.Start(ctx, opt); err == nil || !strings.HasPrefix(err.Error(), "chlocal start: options:") {
			t.Errorf("%s: Start error = %v", name, err)
		}
	}
}

type dayTotal struct {
	revenue string
	orders  uint64
	rows    uint64 // distinct countries
}

func insert(t *testing.T, conn driver.Conn, table string, rows []dayCountry) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+table)
	if err != nil {
		t.Fatal(err)
	}
	days := make([]time.Time, len(rows))
	countries := make([]string, len(rows))
	revenue := make([]decimal.Decimal, len(rows))
	orders := make([]uint64, len(rows))
	for i, r := range rows {
		d, err := time.Parse(time.DateOnly, r.day)
		if err != nil {
			t.Fatal(err)
		}
		days[i], countries[i], revenue[i], orders[i] = d, r.country, decimal.RequireFromString(r.revenue), r.orders
	}
	for i, col := range []any{days, countries, revenue, orders} {
		if err := batch.Column(i).Append(col); err != nil {
			t.Fatalf("append column %d: %v", i, err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

func assertRows(t *testing.T, conn driver.Conn, table string, want []dayCountry) {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT toString(day), toString(country), sum(revenue), sum(orders) FROM "+table+
			" GROUP BY day, country ORDER BY day, country")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []dayCountry
	for rows.Next() {
		var (
			r   dayCountry
			rev decimal.Decimal
		)
		if err := rows.Scan(&r.day, &r.country, &rev, &r.orders); err != nil {
			t.Fatal(err)
		}
		r.revenue = rev.String()
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s rows:\n got %v\nwant %v", table, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s row %d: got %v, want %v (all: %v)", table, i, got[i], want[i], got)
		}
	}
}

func assertTotals(t *testing.T, conn driver.Conn, table string, want map[string]dayTotal) {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT toString(day), sum(revenue), sum(orders), uniqExact(country) FROM "+table+" GROUP BY day")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]dayTotal{}
	for rows.Next() {
		var (
			day string
			rev decimal.Decimal
			dt  dayTotal
		)
		if err := rows.Scan(&day, &rev, &dt.orders, &dt.rows); err != nil {
			t.Fatal(err)
		}
		dt.revenue = rev.String()
		got[day] = dt
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s totals: got %v, want %v", table, got, want)
	}
	for day, w := range want {
		if got[day] != w {
			t.Fatalf("%s totals for %s: got %v, want %v", table, day, got[day], w)
		}
	}
}

func mustExec(t *testing.T, conn driver.Conn, q string) {
	t.Helper()
	if err := conn.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func openNative(t *testing.T, srv *chlocal.Server) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:     []string{srv.TCPAddr()},
		Auth:     clickhouse.Auth{Username: srv.User(), Password: srv.Password()},
		Settings: clickhouse.Settings{"async_insert": 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// rss returns VmRSS of pid from /proc.
func rss(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:"))
		}
	}
	return "unknown"
}

// syscallAlive returns nil if a process with pid exists.
func syscallAlive(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(syscall.Signal(0))
}

func assertKept(t *testing.T, conn driver.Conn) {
	t.Helper()
	var n, sum uint64
	if err := conn.QueryRow(context.Background(), "SELECT count(), sum(id) FROM keep.t").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 10000 || sum != 49995000 {
		t.Fatalf("after restart: count=%d sum=%d, want 10000 49995000", n, sum)
	}
}

// The install script and LibPath must agree on the version.
func TestScriptVersion(t *testing.T) {
	b, err := os.ReadFile("../../scripts/clickhouse.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := `version="` + chlocal.LibVersion + `"`; !strings.Contains(string(b), want) {
		t.Fatalf("scripts/clickhouse.sh does not set %s", want)
	}
}
