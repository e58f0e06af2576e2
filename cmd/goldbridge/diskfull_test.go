//go:build linux

package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"goldbridge/serving/chlocal"
)

// The disk-full test runs in a user and mount namespace of its own (unshare -rm), where
// it may mount a small tmpfs as the state directory; these variables tell the
// re-executed test where, and which goldbridge binary to run.
const (
	diskFullMountEnv = "GOLDBRIDGE_TEST_DISKFULL_MOUNT"
	diskFullBinEnv   = "GOLDBRIDGE_TEST_DISKFULL_BIN"
)

// TestDiskFull fills a 64 MB tmpfs state directory (issues 17 and 18): during a Bronze
// ingest (3 runs), during Silver (2 runs) and during Gold (2 runs); then the ClickHouse
// data directory, a tmpfs of its own inside it, during the server's start, the mart's
// DDL and push (2 runs). Each failing run exits 1, naming what failed and the full disk,
// and leaves no garbage behind. Once the space is freed, the next run succeeds with no manual step,
// check exits 0, Silver, Gold and the served mart equal a clean run's over the same
// input, and the warehouse holds within 10% of the clean run's bytes.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the chain on the embedded stack in a tmpfs (skipped with -short)")
	}
	if mnt := os.Getenv(diskFullMountEnv); mnt != "" {
		diskFullInside(t, mnt, os.Getenv(diskFullBinEnv))
		return
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare(1) is not installed: no user and mount namespace for a tmpfs")
	}
	mnt := t.TempDir()
	ns := []string{"-rm", "--propagation", "private"}
	if out, err := exec.Command(unshare, append(ns, "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt)...).CombinedOutput(); err != nil {
		t.Skipf("no user and mount namespace with a tmpfs here (unshare -rm mount -t tmpfs: %v: %s)", err, bytes.TrimSpace(out))
	}
	bin := buildGoldbridge(t)
	cmd := exec.Command(unshare, append(ns, os.Args[0], "-test.run=^TestDiskFull$", "-test.v", "-test.count=1", "-test.timeout=15m")...)
	cmd.Env = append(os.Environ(), diskFullMountEnv+"="+mnt, diskFullBinEnv+"="+bin)
	out, err := cmd.CombinedOutput()
	t.Logf("in the namespace:\n%s", out)
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestDiskFull")) {
		t.Fatalf("the disk-full test in its namespace failed: %v", err)
	}
}

// diskFullInside is TestDiskFull in the namespace: mnt becomes a 64 MB tmpfs.
func diskFullInside(t *testing.T, mnt, bin string) {
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", mnt, err)
	}
	ports := testPorts(t, 2)
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	writeEmbeddedConfig(t, cfg, ports[0], ports[1], nil)
	clean, state := filepath.Join(mnt, "clean"), filepath.Join(mnt, "state")
	ballast := filepath.Join(mnt, "ballast")
	gb := func(dir string, args ...string) (int, string) {
		t.Helper()
		var errb bytes.Buffer
		cmd := exec.Command(bin, append([]string{"-c", cfg, "--state-dir", dir}, args...)...)
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, errb.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), errb.String()
		}
		t.Fatalf("goldbridge %s: %v", strings.Join(args, " "), err)
		return 0, ""
	}
	ok := func(dir string, args ...string) {
		t.Helper()
		if code, errs := gb(dir, args...); code != 0 {
			t.Fatalf("goldbridge %s: exit %d\n%s", strings.Join(args, " "), code, tail(errs, 3000))
		}
	}
	// failing runs args with the disk full: exit 1 (not 2, not a crash), the error names
	// what failed and one of the disk-full messages.
	failing := func(n int, want, disk []string, args ...string) {
		t.Helper()
		for i := range n {
			code, errs := gb(state, args...)
			last := errorMessage(errs)
			t.Logf("%s #%d with the disk full: exit %d: %s", strings.Join(args, " "), i+1, code, tail(last, 600))
			if code != exitFailure || strings.Contains(errs, "panic:") || strings.Contains(errs, "fatal error:") {
				t.Fatalf("goldbridge %s with the disk full: exit %d, want %d\n%s", strings.Join(args, " "), code, exitFailure, tail(errs, 3000))
			}
			if !containsAny(last, want) || !containsAny(last, disk) {
				t.Fatalf("goldbridge %s with the disk full: error %q does not name one of %q and one of %q", strings.Join(args, " "), last, want, disk)
			}
		}
	}
	enospc := []string{"no space left on device"}

	// The clean run, on the same file system.
	ok(clean, "demo", "generate", "--events", "10000", "--seed", "1")
	ok(state, "demo", "generate", "--events", "10000", "--seed", "1")
	ok(clean, "run")
	cleanBytes := diskUsage(t, filepath.Join(clean, "warehouse"))
	bronzeBytes := diskUsage(t, filepath.Join(clean, "warehouse", "bronze.db"))
	silverBytes := diskUsage(t, filepath.Join(clean, "warehouse", "silver.db"))
	goldBytes := diskUsage(t, filepath.Join(clean, "warehouse", "gold.db"))
	t.Logf("clean run: warehouse %d bytes (bronze %d, silver %d, gold %d), clickhouse %d bytes", cleanBytes, bronzeBytes, silverBytes, goldBytes,
		diskUsage(t, filepath.Join(clean, "clickhouse")))
	// What is left free: less than the table needs, enough for SQLite to open the catalog.
	const sqliteRoom = 96 << 10
	if bronzeBytes/2 < sqliteRoom || silverBytes/2 < sqliteRoom || goldBytes/2 < sqliteRoom {
		t.Fatalf("the generated data is too small to fill the disk between the stages")
	}

	// 1. Bronze: three runs fail in ingest; none leaves its Parquet files behind.
	fillDisk(t, mnt, ballast, bronzeBytes/2)
	failing(3, []string{"ingest orders"}, enospc, "run")
	if got := diskUsage(t, filepath.Join(state, "warehouse")); got > cleanBytes/10 {
		t.Fatalf("after 3 failed ingests the warehouse holds %d bytes (a clean run's: %d): the failed writes left files", got, cleanBytes)
	}
	freeDisk(t, ballast)

	// 2. Silver: two runs fail writing the Silver table.
	ok(state, "ingest")
	before := diskUsage(t, filepath.Join(state, "warehouse"))
	fillDisk(t, mnt, ballast, silverBytes/2)
	failing(2, []string{"silver orders"}, enospc, "silver")
	if got := diskUsage(t, filepath.Join(state, "warehouse")); got-before > cleanBytes/10 {
		t.Fatalf("2 failed Silver runs grew the warehouse from %d to %d bytes: the failed writes left files", before, got)
	}
	freeDisk(t, ballast)

	// 3. Gold: two runs fail writing the mart's day partitions, a file each (a partition
	// writer that failed after its last batch used to end the write without an error,
	// leaving the other partitions' files: see third_party patch 0006).
	ok(state, "silver")
	before = diskUsage(t, filepath.Join(state, "warehouse"))
	fillDisk(t, mnt, ballast, goldBytes/2)
	failing(2, []string{"gold daily_revenue_kpi"}, enospc, "gold")
	if got := diskUsage(t, filepath.Join(state, "warehouse")); got-before > cleanBytes/10 {
		t.Fatalf("2 failed Gold runs grew the warehouse from %d to %d bytes: the failed writes left files", before, got)
	}
	freeDisk(t, ballast)

	// 4. ClickHouse: the lake is complete, and the server's data directory is a 16 MB
	// tmpfs of its own, full but for 12 KB (less than the state tmpfs could keep: SQLite
	// needs more to open the catalog): the server starts, and the mart's first DDL and
	// its push hit the full disk.
	ok(state, "gold")
	chDir := filepath.Join(state, "clickhouse")
	if err := os.MkdirAll(chDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", chDir, "tmpfs", 0, "size=16m,mode=0700"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", chDir, err)
	}
	chBallast := filepath.Join(chDir, "ballast")
	fillDisk(t, chDir, chBallast, 12<<10)
	failing(2, []string{"sync daily_revenue_kpi", "embedded clickhouse"}, []string{"no space left on device", "NOT_ENOUGH_SPACE", "Cannot reserve"}, "run")
	freeDisk(t, chBallast)

	// 5. Space is back: the next run converges with no manual step.
	ok(state, "run")
	ok(state, "check")
	// Silver, its quarantine and Gold in one query (each query starts a ClickHouse), then
	// the served mart; run ids and timestamps aside.
	const kpi = "report_date, country, category, grouping_level, total_revenue, total_orders, unique_customers, avg_order_value"
	for _, args := range [][]string{
		{"query", "SELECT 'silver', toString(tuple(count(), sum(amount), countIf(is_deleted), groupBitXor(cityHash64(order_id, updated_at, amount)))) FROM silver.orders" +
			" UNION ALL SELECT 'quarantine', toString(tuple(error_reason, count())) FROM silver.orders_quarantine GROUP BY error_reason" +
			" UNION ALL SELECT 'gold', toString(tuple(" + kpi + ")) FROM gold.daily_revenue_kpi FORMAT TSV"},
		{"clickhouse", "query", "SELECT " + kpi + " FROM marts.daily_revenue_kpi_final ORDER BY ALL FORMAT TSV"},
	} {
		want, got := sortedLines(queryOut(t, bin, cfg, clean, args)), sortedLines(queryOut(t, bin, cfg, state, args))
		if want != got {
			t.Fatalf("%s after the disk-full runs differs from the clean run's:\n got %s\nwant %s", args, tail(got, 1500), tail(want, 1500))
		}
		if strings.Count(want, "\n") < 100 {
			t.Fatalf("%s: only %d rows", args, strings.Count(want, "\n"))
		}
		t.Logf("%s: %d rows, as in the clean run", args[0], strings.Count(want, "\n"))
	}
	got := diskUsage(t, filepath.Join(state, "warehouse"))
	t.Logf("warehouse after 9 failed runs and the successful ones: %d bytes; clean run: %d bytes (%+.1f%%); clickhouse %d bytes",
		got, cleanBytes, 100*float64(got-cleanBytes)/float64(cleanBytes), diskUsage(t, filepath.Join(state, "clickhouse")))
	if float64(got) > 1.1*float64(cleanBytes) {
		t.Fatalf("the warehouse holds %d bytes, more than 10%% over a clean run's %d", got, cleanBytes)
	}
}

// sortedLines sorts the lines of s.
func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// queryOut runs a read-only goldbridge query against dir and returns its standard output.
func queryOut(t *testing.T, bin, cfg, dir string, args []string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, append([]string{"-c", cfg, "--state-dir", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("goldbridge %s: %v\n%s", strings.Join(args, " "), err, tail(errb.String(), 3000))
	}
	return out.String()
}

// fillDisk allocates a ballast file so that about leave bytes stay free on mnt.
func fillDisk(t *testing.T, mnt, ballast string, leave int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	n := int64(st.Bavail)*st.Bsize - leave
	if n <= 0 {
		t.Fatalf("only %d bytes free on %s", int64(st.Bavail)*st.Bsize, mnt)
	}
	f, err := os.OpenFile(ballast, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		t.Fatalf("fallocate %d bytes: %v", n, err)
	}
}

func freeDisk(t *testing.T, ballast string) {
	t.Helper()
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
}

// diskUsage is the space the files under dir take, as du counts it (allocated blocks).
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// errorMessage is the error goldbridge printed at exit: from its last "goldbridge: "
// line on (a run's failures are joined, one a line).
func errorMessage(stderr string) string {
	i := strings.LastIndex(stderr, "\ngoldbridge: ")
	if i < 0 {
		return strings.TrimSpace(stderr)
	}
	return strings.TrimSpace(stderr[i+1:])
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
