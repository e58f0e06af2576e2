package chlocal_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtest"
)

// TestPromptCleanup: a server with ClickHouse's defaults (as an external server) keeps
// the parts a merge replaced and the data of a dropped table on disk; started on the
// same data with Options.PromptCleanup it deletes them at start (a stop right after
// the start waits for it), then deletes within seconds the parts it replaces, except one
// that a running query reads, which that query reads to the end.
func TestPromptCleanup(t *testing.T) {
	chtest.Require(t)
	ctx := context.Background()
	ports, err := chlocal.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	start := func(prompt bool) (*chlocal.Server, driver.Conn) {
		t.Helper()
		srv, err := chlocal.Start(ctx, chlocal.Options{Path: dir, TCPPort: ports[0], HTTPPort: ports[1], Password: "pw-cleanup", PromptCleanup: prompt})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Kill() })
		return srv, openNative(t, srv)
	}
	count := func(conn driver.Conn, q string) uint64 {
		t.Helper()
		var n uint64
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	usage := func() chlocal.Usage {
		t.Helper()
		u, err := chlocal.DiskUsage(dir)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	// waitParts waits until the data directory holds want part directories.
	waitParts := func(want int, within time.Duration) time.Duration {
		t.Helper()
		t0 := time.Now()
		for usage().PartDirs != want {
			if time.Since(t0) > within {
				t.Fatalf("%d part directories after %s, want %d", usage().PartDirs, within, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(t0)
	}
	merge := func(conn driver.Conn, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			mustExec(t, conn, fmt.Sprintf("INSERT INTO d.t VALUES (%d)", i))
		}
		mustExec(t, conn, "OPTIMIZE TABLE d.t FINAL")
	}

	srv, conn := start(false)
	mustExec(t, conn, "CREATE DATABASE d")
	mustExec(t, conn, "CREATE TABLE d.t (id UInt64) ENGINE = MergeTree ORDER BY id")
	merge(conn, 1, 6)
	mustExec(t, conn, "CREATE TABLE d.gone AS d.t")
	mustExec(t, conn, "INSERT INTO d.gone VALUES (1)")
	mustExec(t, conn, "DROP TABLE d.gone")
	parts := count(conn, "SELECT count() FROM system.parts WHERE database = 'd' AND table = 't'")
	if active := count(conn, "SELECT count() FROM system.parts WHERE database = 'd' AND active"); parts < 2 || active != 1 {
		t.Fatalf("%d parts of d.t, %d active: want one active and some replaced", parts, active)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// The replaced parts of d.t and the one of the dropped table stay behind.
	if u := usage(); u.PartDirs != int(parts)+1 {
		t.Fatalf("%d part directories after a stop with the defaults, want %d", u.PartDirs, parts+1)
	}

	// A prompt server deletes them from its cleanup task, which first runs about a
	// second after it starts (not at its shutdown): a stop waits for it, so that a life
	// of a few hundred milliseconds (a cron run's) leaves only the live part.
	srv, _ = start(true)
	t0 := time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if u := usage(); u.PartDirs != 1 {
		t.Fatalf("%d part directories after a prompt server's start and stop, want 1", u.PartDirs)
	}
	t.Logf("prompt cleanup by a start and a stop: %s", time.Since(t0))

	srv, conn = start(true)
	t.Logf("prompt cleanup at start: %s", waitParts(1, 10*time.Second))
	if n := count(conn, "SELECT count() FROM system.dropped_tables"); n != 0 {
		t.Fatalf("%d dropped tables left", n)
	}
	merge(conn, 6, 9)
	t.Logf("prompt cleanup of a merge: %s", waitParts(1, 10*time.Second))

	// A query that started on the old part holds it: it is deleted once the query ends.
	var old string
	if err := conn.QueryRow(ctx, "SELECT name FROM system.parts WHERE database = 'd' AND table = 't' AND active").Scan(&old); err != nil {
		t.Fatal(err)
	}
	reader := openNative(t, srv)
	got := make(chan error, 1)
	go func() {
		var sum uint64
		err := reader.QueryRow(ctx, "SELECT sum(id) FROM d.t WHERE sleepEachRow(1) = 0 SETTINGS max_threads = 1, function_sleep_max_microseconds_per_block = 10000000").Scan(&sum)
		if err == nil && sum != 36 { // 1..8
			err = fmt.Errorf("the reader summed %d, want 36", sum)
		}
		got <- err
	}()
	// Listed is not enough: the query holds its parts once it has read its block.
	for count(conn, "SELECT count() FROM system.processes WHERE query LIKE '%sleepEachRow(1)%' AND query NOT LIKE '%system.processes%' AND read_rows > 0") == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	merge(conn, 9, 10)
	time.Sleep(2500 * time.Millisecond) // two cleanup rounds
	var state string
	if err := conn.QueryRow(ctx, "SELECT removal_state FROM system.parts WHERE database = 'd' AND table = 't' AND name = ?", old).Scan(&state); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("the reader ended too early to hold the part: %v", err)
	default:
	}
	if state != "Part ownership is not unique" {
		t.Fatalf("removal state of the part the reader holds: %q", state)
	}
	if _, err := os.Stat(filepath.Join(partDir(t, conn, "d", "t"), old)); err != nil {
		t.Fatalf("the part a running query reads was deleted: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup once the query ended: %s", waitParts(1, 10*time.Second))
}

// partDir is the directory of db.table's parts.
func partDir(t *testing.T, conn driver.Conn, db, table string) string {
	t.Helper()
	var paths []string
	if err := conn.QueryRow(context.Background(), "SELECT data_paths FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&paths); err != nil || len(paths) != 1 {
		t.Fatalf("data path of %s.%s: %v %v", db, table, paths, err)
	}
	return paths[0]
}

// TestDiskUsage: part directories are those in a table's directory but detached/, and a
// file with several names is counted once.
func TestDiskUsage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("hard links are told apart on Linux only")
	}
	dir := t.TempDir()
	table := filepath.Join(dir, "store", "abc", "abc12345-0000-0000-0000-000000000000")
	write := func(path string, n int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "metadata", "d.sql"), 10)
	write(filepath.Join(table, "format_version.txt"), 1)
	write(filepath.Join(table, "all_1_1_0", "data.bin"), 1000)
	write(filepath.Join(table, "all_1_1_0", "count.txt"), 3)
	write(filepath.Join(table, "detached", "broken_all_2_2_0", "data.bin"), 100)
	if err := os.MkdirAll(filepath.Join(table, "all_1_1_1"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"data.bin", "count.txt"} { // a clone: hard links
		if err := os.Link(filepath.Join(table, "all_1_1_0", f), filepath.Join(table, "all_1_1_1", f)); err != nil {
			t.Fatal(err)
		}
	}
	u, err := chlocal.DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := (chlocal.Usage{PartDirs: 2, Bytes: 10 + 1 + 1000 + 3 + 100}); u != want {
		t.Fatalf("got %+v, want %+v", u, want)
	}
	if _, err := chlocal.DiskUsage(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: %v", err)
	}
}
