package silver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"goldbridge/demo"
	"goldbridge/lakehouse/lakehousetest"
)

// TestCrashBeforeCommit SIGKILLs a real Silver run after its data files are written and
// before the commit, then runs again: the result equals a run without the crash.
func TestCrashBeforeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx := context.Background()
	state, landing := t.TempDir(), t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: landing, Events: 8000, Seed: 5, End: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	lh := lakehousetest.OpenDir(t, state)
	ingest(t, lh, landing)
	lh.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), "SILVER_CRASH_STATE="+state)
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child should die by SIGKILL, got %v\n%s", err, out)
	}
	var parquet int
	filepath.Walk(filepath.Join(state, "warehouse"), func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.Contains(p, "silver.db/orders/") && strings.HasSuffix(p, ".parquet") {
			parquet++
		}
		return nil
	})
	if parquet == 0 {
		t.Fatal("the child died before writing Silver data files: the test would prove nothing")
	}

	lh = lakehousetest.OpenDir(t, state)
	res, err := Run(ctx, lh, ordersSpec(), "bronze.orders", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 8000 {
		t.Fatalf("rerun read %d rows, want 8000", res.Read)
	}
	want, _ := oracle(t, landing)
	got := silverRows(t, lh)
	if len(got) != len(want) {
		t.Fatalf("silver %d keys, oracle %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %s: silver %s, oracle %s", k, got[k], w)
		}
	}
}

// TestCrashChild is the process killed by TestCrashBeforeCommit, or, with
// SILVER_CRASH_PASSES set, by TestCrashBetweenPasses after the first pass.
func TestCrashChild(t *testing.T) {
	state := os.Getenv("SILVER_CRASH_STATE")
	if state == "" {
		t.Skip("helper process of TestCrashBeforeCommit")
	}
	lh := lakehousetest.OpenDir(t, state)
	kill := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	opt := Options{afterWrite: kill}
	if os.Getenv("SILVER_CRASH_PASSES") != "" {
		opt = Options{PassRows: 2000, afterPass: func(int) { kill() }}
	}
	_, err := Run(context.Background(), lh, ordersSpec(), "bronze.orders", opt)
	t.Fatalf("not killed: %v", err)
}

// TestCrashBetweenPasses SIGKILLs a Silver run built in passes after its first pass
// wrote its data files: Silver has no commit, and the rerun (in passes too) equals the
// oracle, with each quarantined row once.
func TestCrashBetweenPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx := context.Background()
	state, landing := t.TempDir(), t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: landing, Events: 8000, Seed: 5, End: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	lh := lakehousetest.OpenDir(t, state)
	ingest(t, lh, landing)
	lh.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), "SILVER_CRASH_STATE="+state, "SILVER_CRASH_PASSES=1")
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child should die by SIGKILL, got %v\n%s", err, out)
	}
	var parquet int
	filepath.Walk(filepath.Join(state, "warehouse"), func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.Contains(p, "silver.db/orders/") && strings.HasSuffix(p, ".parquet") {
			parquet++
		}
		return nil
	})
	if parquet == 0 {
		t.Fatal("the child died before its first pass wrote Silver data files: the test would prove nothing")
	}

	lh = lakehousetest.OpenDir(t, state)
	if tbl, err := lh.LoadTable(ctx, "silver.orders"); err != nil || tbl.CurrentSnapshot() != nil {
		t.Fatalf("silver after the crash: %v, want a table without snapshots", err)
	}
	res, err := Run(ctx, lh, ordersSpec(), "bronze.orders", Options{PassRows: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 8000 || res.Passes < 2 {
		t.Fatalf("rerun read %d rows in %d passes, want 8000 in several", res.Read, res.Passes)
	}
	want, wantQ := oracle(t, landing)
	got := silverRows(t, lh)
	if len(got) != len(want) {
		t.Fatalf("silver %d keys, oracle %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %s: silver %s, oracle %s", k, got[k], w)
		}
	}
	if q := tableRows(t, lh, "silver.orders_quarantine"); len(q) != wantQ {
		t.Fatalf("quarantine has %d rows, oracle %d", len(q), wantQ)
	}
}
