package chlocal_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtest"
)

// secretEnv is set in goldbridge's environment by TestLockdown; none of it may reach the child.
var secretEnv = map[string]string{
	"AWS_SECRET_ACCESS_KEY": "aws-secret-0123456789",
	"KAFKA_SECRET":          "kafka-secret-0123456789",
	"GOLDBRIDGE_TEST_TOKEN": "token-0123456789",
}

// startLocked starts a private server with a reader, serving database marts, with umask 022.
func startLocked(t *testing.T) *chlocal.Server {
	t.Helper()
	chtest.Require(t)
	for k, v := range secretEnv {
		t.Setenv(k, v)
	}
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	return startWithReader(t, chlocal.Options{})
}

// startWithReader starts a private server with the reader grafana, serving database
// marts; the readers' queue and bounds are readers' (zero: the defaults).
func startWithReader(t *testing.T, readers chlocal.Options) *chlocal.Server {
	t.Helper()
	chtest.Require(t)
	ports, err := chlocal.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := chlocal.Start(ctx, chlocal.Options{
		Path: filepath.Join(t.TempDir(), "ch"), TCPPort: ports[0], HTTPPort: ports[1],
		Password: "admin-pw", Database: "marts",
		Readers:       []chlocal.Reader{{Name: "grafana", Password: "reader-pw"}},
		ReaderQueries: readers.ReaderQueries, ReaderTimeout: readers.ReaderTimeout, ReaderMemory: readers.ReaderMemory,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return srv
}

// post sends q over HTTP (user "" = no credentials) and returns the status and body.
func post(t *testing.T, srv *chlocal.Server, user, password, q string, header map[string]string) (int, string) {
	t.Helper()
	code, body, err := tryPost(srv, user, password, q, header)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return code, body
}

// postOK sends q as post does and fails the test unless the server answers 200; it
// returns the body.
func postOK(t *testing.T, srv *chlocal.Server, user, password, q string) string {
	t.Helper()
	code, body := post(t, srv, user, password, q, nil)
	if code != http.StatusOK {
		t.Fatalf("%s as %s: HTTP %d %s", q, user, code, body)
	}
	return body
}

func tryPost(srv *chlocal.Server, user, password, q string, header map[string]string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, srv.HTTPURL()+"/", strings.NewReader(q))
	if err != nil {
		return 0, "", err
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

func TestLockdown(t *testing.T) {
	srv := startLocked(t)
	const admin, adminPW, reader, readerPW = chlocal.DefaultUser, "admin-pw", "grafana", "reader-pw"
	mustOK := func(user, pw, q string) string { t.Helper(); return postOK(t, srv, user, pw, q) }
	mustOK(admin, adminPW, "CREATE DATABASE IF NOT EXISTS marts")
	mustOK(admin, adminPW, "CREATE TABLE marts.kpi (d Date, v UInt64) ENGINE = SummingMergeTree ORDER BY d")
	mustOK(admin, adminPW, "INSERT INTO marts.kpi VALUES ('2026-01-01', 7)")
	if got := mustOK(reader, readerPW, "SELECT sum(v) FROM marts.kpi"); got != "7" {
		t.Fatalf("reader reads %q, want 7", got)
	}
	// A Merge table (what <t>_final is) reads only the tables its reader may see, and
	// answers no rows otherwise: the reader's grants must cover the table under it.
	mustOK(admin, adminPW, "CREATE TABLE marts.kpi_final (d Date, v UInt64) ENGINE = Merge('marts', '^kpi$')")
	if got := mustOK(reader, readerPW, "SELECT sum(v) FROM marts.kpi_final"); got != "7" {
		t.Fatalf("reader reads %q through the Merge table, want 7", got)
	}

	refused := []struct{ user, pw, q string }{
		{"", "", "SELECT 1"},         // no credentials at all
		{"default", "", "SELECT 1"},  // clickhouse-local's own user
		{admin, "wrong", "SELECT 1"}, // wrong password
		{"nobody", "x", "SELECT 1"},  // unknown user
		{reader, readerPW, "INSERT INTO marts.kpi VALUES ('2026-01-02', 1)"},
		{reader, readerPW, "CREATE TABLE marts.x (a UInt8) ENGINE = Memory"},
		{reader, readerPW, "SELECT count() FROM system.processes"},
	}
	// Readers read no file at all (no READ ON FILE grant).
	for _, q := range []string{
		"SELECT * FROM file('/etc/passwd', 'LineAsString')",
		"SELECT * FROM file('/proc/self/environ', 'LineAsString')",
		"SELECT * FROM default.`/etc/passwd`",
		"SELECT * FROM icebergLocal('/tmp')",
	} {
		refused = append(refused, struct{ user, pw, q string }{reader, readerPW, q})
	}
	// Nobody reads a file outside the data directory (Landlock; the scalar file()
	// needs no grant and checks no path in clickhouse-local), nor another process's
	// environment.
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("top-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/etc/passwd", "/proc/self/environ", "/proc/" + strconv.Itoa(os.Getpid()) + "/environ", secret} {
		for _, user := range []struct{ name, pw string }{{admin, adminPW}, {reader, readerPW}} {
			refused = append(refused,
				struct{ user, pw, q string }{user.name, user.pw, "SELECT file('" + f + "')"},
				struct{ user, pw, q string }{user.name, user.pw, "SELECT throwIf(file('" + f + "', 'fallback') = 'fallback')"},
				struct{ user, pw, q string }{user.name, user.pw, "SELECT * FROM file('" + f + "', 'LineAsString')"})
		}
	}
	for _, user := range []struct{ name, pw string }{{admin, adminPW}, {reader, readerPW}} {
		for _, q := range []string{
			"INSERT INTO FUNCTION file('" + filepath.Join(t.TempDir(), "out.txt") + "', 'LineAsString') SELECT 'x'",
			"SELECT * FROM url('" + srv.HTTPURL() + "/ping', 'LineAsString')",
			"SELECT * FROM s3('http://127.0.0.1:1/b/k', 'LineAsString')",
			"SELECT * FROM remote('" + srv.TCPAddr() + "', system.one)",
			"SELECT * FROM executable('/bin/ls', 'LineAsString', 's String')",
			"CREATE TABLE marts.f (s String) ENGINE = File(LineAsString, '/etc/passwd')",
			"CREATE DICTIONARY marts.d (s String) PRIMARY KEY s SOURCE(FILE(path '/etc/passwd' format 'LineAsString')) LAYOUT(FLAT()) LIFETIME(0)",
		} {
			refused = append(refused, struct{ user, pw, q string }{user.name, user.pw, q})
		}
	}
	for _, r := range refused {
		if code, body := post(t, srv, r.user, r.pw, r.q, nil); code == http.StatusOK {
			t.Errorf("%q as %q was served: %.200s", r.q, r.user, body)
		}
	}

	// A browser's cross-origin "simple" request (no preflight), even with credentials.
	code, body := post(t, srv, admin, adminPW, "SELECT 42", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"})
	if code != http.StatusForbidden || body == "42" {
		t.Errorf("cross-origin POST: HTTP %d %q, want 403", code, body)
	}
	if srv.PID() == 0 {
		t.Fatal("the server died during the refusals")
	}

	// The child's environment holds none of goldbridge's.
	env, err := os.ReadFile("/proc/" + strconv.Itoa(srv.PID()) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range secretEnv {
		if strings.Contains(string(env), k) || strings.Contains(string(env), v) {
			t.Errorf("child environment holds %s", k)
		}
	}
	for _, kv := range strings.Split(strings.TrimRight(string(env), "\x00"), "\x00") {
		if name, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(name, "GOLDBRIDGE_CHLOCAL_") && name != "TZ" {
			t.Errorf("child environment holds %s", name)
		}
	}
}

// TestPrivateFiles: with umask 022 the data directory and everything in it (access
// config, ClickHouse's metadata and parts) is private to the user.
func TestPrivateFiles(t *testing.T) {
	srv := startLocked(t)
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS marts",
		"CREATE TABLE marts.kpi (d Date, v UInt64) ENGINE = SummingMergeTree ORDER BY d",
		"INSERT INTO marts.kpi VALUES ('2026-01-01', 7)",
	} {
		if code, body := post(t, srv, chlocal.DefaultUser, "admin-pw", q, nil); code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, code, body)
		}
	}
	assertPrivate(t, srv.Path())
}

func assertPrivate(t *testing.T, root string) {
	t.Helper()
	n := 0
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		n++
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %v, want no group/other access", path, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d entries under %s", n, root)
	}
}

// TestClusterNodePrivate: a cluster node (Options.Cluster) keeps its private files
// private, its config (remote_servers, with the password the nodes log in to each other
// with) 0600 in its data directory, and the password out of its child's environment; a
// Distributed table over the cluster reads the other node.
func TestClusterNodePrivate(t *testing.T) {
	cl := chtest.StartCluster(t, 2, 1)
	a, b := cl.Nodes[0][0], cl.Nodes[1][0]
	exec := func(srv *chlocal.Server, q string) string {
		t.Helper()
		code, body := post(t, srv, cl.User, cl.Password, q, nil)
		if code != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", q, code, body)
		}
		return body
	}
	for _, srv := range []*chlocal.Server{a, b} {
		exec(srv, "CREATE DATABASE IF NOT EXISTS marts")
		exec(srv, "CREATE TABLE marts.kpi (d Date, v UInt64) ENGINE = MergeTree ORDER BY d")
		exec(srv, "CREATE TABLE marts.kpi_dist AS marts.kpi ENGINE = Distributed('gb', 'marts', 'kpi', rand())")
	}
	exec(a, "INSERT INTO marts.kpi VALUES ('2026-01-01', 7)")
	exec(b, "INSERT INTO marts.kpi VALUES ('2026-01-02', 5)")
	if got := exec(a, "SELECT sum(v) FROM marts.kpi_dist"); got != "12" {
		t.Fatalf("Distributed read through node 1: %q, want 12", got)
	}
	for _, srv := range []*chlocal.Server{a, b} {
		assertPrivate(t, srv.Path())
		cfg, err := os.ReadFile(filepath.Join(srv.Path(), "goldbridge-config.xml"))
		if err != nil || !strings.Contains(string(cfg), "<remote_servers><gb>") {
			t.Fatalf("config of %s: %v\n%s", srv.Path(), err, cfg)
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", srv.PID()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(env), cl.Password) {
			t.Fatal("the admin password is in a cluster node's environment")
		}
	}
}
