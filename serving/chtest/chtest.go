// Package chtest gives integration tests a private ClickHouse server (see
// chlocal), shared by the tests of one package. Import it only from _test files:
//
//	func TestMain(m *testing.M) { chtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		conn := chtest.Conn(t)   // skips under -short, fails if libchdb is missing;
//		                         // chtest.Server(t).User() and .Password() log in
//		db := chtest.Database(t) // fresh database, dropped at cleanup
//		...
//	}
package chtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"goldbridge/serving/chconn"
	"goldbridge/serving/chlocal"
)

// The package's server, started on first use and stopped by Main.
var (
	once    sync.Once
	srv     *chlocal.Server
	srvErr  error
	tempDir string
	dbSeq   atomic.Int64
)

// Main runs the tests of a package: it first lets the binary act as a server
// child (chlocal.MaybeRunChild), then runs m, stops the package's server if a
// test started it, removes its temporary data and exits with m's code.
func Main(m *testing.M) {
	chlocal.MaybeRunChild()
	code := m.Run()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := srv.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "chtest: %v\n", err)
		}
		cancel()
	}
	if tempDir != "" {
		_ = os.RemoveAll(tempDir)
	}
	os.Exit(code)
}

// Require skips t under -short and fails it if libchdb is not installed
// (never a silent skip). Integration tests call it, or a helper that does.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a local ClickHouse server (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
}

// Server returns the package's server, starting it on first use on free
// loopback ports with a temporary data path. It fails t if that is impossible.
func Server(t testing.TB) *chlocal.Server {
	t.Helper()
	Require(t)
	once.Do(func() { srv, srvErr = startServer() })
	if srvErr != nil {
		t.Fatalf("chtest: %v (TestMain must be chtest.Main)", srvErr)
	}
	return srv
}

func startServer() (*chlocal.Server, error) {
	dir, err := os.MkdirTemp("", "goldbridge-chtest-")
	if err != nil {
		return nil, err
	}
	tempDir = dir
	pw, err := chlocal.EnsurePassword(filepath.Join(dir, "admin.password"))
	if err != nil {
		return nil, err
	}
	return startOnFreePorts(chlocal.Options{Path: filepath.Join(dir, "data"), Password: pw})
}

// startOnFreePorts starts a server with opt on two free loopback ports, and again on
// fresh ones (up to three times in all) while a port was taken between FreePorts and
// the start: FreePorts hands out ephemeral ports, which any outbound connection may claim.
func startOnFreePorts(opt chlocal.Options) (*chlocal.Server, error) {
	for try := 1; ; try++ {
		ports, err := chlocal.FreePorts(2)
		if err != nil {
			return nil, err
		}
		opt.TCPPort, opt.HTTPPort = ports[0], ports[1]
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		srv, err := chlocal.Start(ctx, opt)
		cancel()
		var taken *chlocal.PortError
		if err == nil || try == 3 || !errors.As(err, &taken) {
			return srv, err
		}
	}
}

// StartServer starts a server of its own for one test, with opt's settings (Path,
// ports and Password are chosen here), on a temporary data path; it is stopped at
// cleanup. The package's server (Server) has ClickHouse's defaults, as an external
// server; this one is for another configuration, e.g. the embedded server's
// chlocal.Options.PromptCleanup. It skips under -short like Require.
func StartServer(t testing.TB, opt chlocal.Options) *chlocal.Server {
	t.Helper()
	Require(t)
	opt.Path = filepath.Join(t.TempDir(), "data")
	if opt.Password == "" {
		opt.Password = "chtest-" + sanitize(t.Name())
	}
	srv, err := startOnFreePorts(opt)
	if err != nil {
		t.Fatalf("chtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("chtest: %v", err)
		}
	})
	return srv
}

// Conn opens a native-protocol connection (async_insert=0) to the package's
// server as its admin user, closed at cleanup.
func Conn(t testing.TB) driver.Conn {
	t.Helper()
	srv := Server(t)
	return open(t, clickhouse.Native, srv.TCPAddr(), srv)
}

// HTTPConn opens an HTTP connection (async_insert=0) to the package's server as
// its admin user, closed at cleanup.
func HTTPConn(t testing.TB) driver.Conn {
	t.Helper()
	srv := Server(t)
	return open(t, clickhouse.HTTP, srv.HTTPAddr(), srv)
}

func open(t testing.TB, proto clickhouse.Protocol, addr string, srv *chlocal.Server) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{
		Protocol:    proto,
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: "default", Username: srv.User(), Password: srv.Password()},
		Settings:    clickhouse.Settings{"async_insert": 0},
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("chtest: open %s %s: %v", proto, addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("chtest: ping %s %s: %v", proto, addr, err)
	}
	return conn
}

// Database creates a fresh database named after the test and drops it at cleanup.
func Database(t testing.TB) string {
	t.Helper()
	return DatabaseOf(t, "")
}

// DatabaseOf is Database with the database engine given ("" = the server's default,
// Atomic): "Memory" is the database engine the embedded admin may create that can
// neither EXCHANGE nor RENAME tables, what goldbridge does without in a non-Atomic
// database.
func DatabaseOf(t testing.TB, engine string) string {
	t.Helper()
	conn := Conn(t)
	name := fmt.Sprintf("%s_%d", sanitize(t.Name()), dbSeq.Add(1))
	ctx := context.Background()
	create := "CREATE DATABASE `" + name + "`"
	if engine != "" {
		create += " ENGINE = " + engine
	}
	if err := conn.Exec(ctx, create); err != nil {
		t.Fatalf("chtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS `"+name+"` SYNC"); err != nil {
			t.Errorf("chtest: drop database %s: %v", name, err)
		}
	})
	return name
}

// sanitize maps a test name to [a-z0-9_], at most 48 characters, starting with a letter.
func sanitize(name string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(name) {
		if b.Len() >= 48 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Strings runs a query of one String column and returns its rows in the query's order.
func Strings(t testing.TB, conn driver.Conn, query string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Cluster is a private topology of plain nodes in shards (chlocal.Cluster), started
// for one test: a Distributed table over it reads one node of each shard.
type Cluster struct {
	Name     string
	User     string
	Password string
	Nodes    [][]*chlocal.Server // by shard
	opts     [][]chlocal.Options
}

// StartCluster starts shards × replicas nodes (the cluster "gb"), in parallel, on free
// loopback ports, each with its own data directory; they are stopped at cleanup. It
// skips under -short like Require.
func StartCluster(t testing.TB, shards, replicas int) *Cluster {
	t.Helper()
	Require(t)
	dir, err := os.MkdirTemp("", "goldbridge-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	ports, err := chlocal.FreePorts(2 * shards * replicas)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := chlocal.EnsurePassword(filepath.Join(dir, "admin.password"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Name: "gb", User: chlocal.DefaultUser, Password: pw}
	topo := &chlocal.Cluster{Name: c.Name}
	for s := range shards {
		var nodes []string
		for r := range replicas {
			nodes = append(nodes, fmt.Sprintf("127.0.0.1:%d", ports[2*(s*replicas+r)]))
		}
		topo.Shards = append(topo.Shards, nodes)
	}
	c.Nodes = make([][]*chlocal.Server, shards)
	c.opts = make([][]chlocal.Options, shards)
	var wg sync.WaitGroup
	errs := make(chan error, shards*replicas)
	for s := range shards {
		c.Nodes[s] = make([]*chlocal.Server, replicas)
		c.opts[s] = make([]chlocal.Options, replicas)
		for r := range replicas {
			i := 2 * (s*replicas + r)
			c.opts[s][r] = chlocal.Options{Path: filepath.Join(dir, fmt.Sprintf("s%dr%d", s+1, r+1)), TCPPort: ports[i], HTTPPort: ports[i+1], Password: pw, Cluster: topo}
			wg.Go(func() {
				srv, err := c.start(t, s, r)
				c.Nodes[s][r] = srv
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		if t.Failed() { // which node died, and what it said
			for s, nodes := range c.Nodes {
				for r, n := range nodes {
					if n != nil {
						out := n.Output()
						exited, status := n.ExitStatus()
						t.Logf("cluster node shard %d replica %d (%s): pid %d, exited %v (%v); output tail:\n%s", s+1, r+1, n.TCPAddr(), n.PID(), exited, status, out[max(0, len(out)-3000):])
					}
				}
			}
		}
		c.stop()
		if t.Failed() {
			t.Logf("cluster data kept in %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	for err := range errs {
		if err != nil {
			t.Fatalf("chtest: cluster: %v", err)
		}
	}
	return c
}

// Addresses are the nodes' native addresses, by shard.
func (c *Cluster) Addresses() [][]string {
	out := make([][]string, len(c.Nodes))
	for s, nodes := range c.Nodes {
		for _, n := range nodes {
			out[s] = append(out[s], n.TCPAddr())
		}
	}
	return out
}

// StopNode stops one node (its data stays); StartNode starts it again.
func (c *Cluster) StopNode(t testing.TB, shard, replica int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Nodes[shard][replica].Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// StartNode starts a node StopNode stopped, with its data.
func (c *Cluster) StartNode(t testing.TB, shard, replica int) {
	t.Helper()
	srv, err := c.start(t, shard, replica)
	if err != nil {
		t.Fatal(err)
	}
	c.Nodes[shard][replica] = srv
}

// start starts a node, supervised as goldbridge supervises every server it starts: libchdb
// 26.7 aborts on routine client socket errors (docs/operations.md, "Supervision"), which
// a node meets when a peer or a client goes away mid-query; a node that exits on its own
// is started again at once (and logged), until Stop or the end of the test.
func (c *Cluster) start(t testing.TB, shard, replica int) (*chlocal.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := chlocal.Start(ctx, c.opts[shard][replica])
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go srv.Supervise(sctx, func(exit, err error) {
		t.Logf("cluster node shard %d replica %d exited on its own (%v): restarted (%v)", shard+1, replica+1, exit, err)
	})
	return srv, nil
}

// stop stops every node, in parallel (a node takes seconds).
func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for _, nodes := range c.Nodes {
		for _, n := range nodes {
			if n == nil {
				continue
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = n.Stop(ctx)
			})
		}
	}
	wg.Wait()
}

// Clients opens a client to every node as the admin (default database), by shard,
// closed at cleanup.
func (c *Cluster) Clients(t testing.TB) [][]*chconn.Client {
	t.Helper()
	out := make([][]*chconn.Client, len(c.Nodes))
	for s, nodes := range c.Addresses() {
		for _, addr := range nodes {
			cc, err := chconn.Open(context.Background(), chconn.Options{Addresses: []string{addr}, User: c.User, Password: c.Password,
				Database: "default", MaxRetries: 2, RetryBackoff: 50 * time.Millisecond, DialTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cc.Close() })
			out[s] = append(out[s], cc)
		}
	}
	return out
}
