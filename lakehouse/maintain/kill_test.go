package maintain

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestMaintainChild is the re-executed test binary of TestSIGKILLSweep: maintenance of
// the lake in MAINTAIN_KILL_DIR, SIGKILLed at MAINTAIN_KILL_AT ("table step").
func TestMaintainChild(t *testing.T) {
	dir, at := os.Getenv("MAINTAIN_KILL_DIR"), os.Getenv("MAINTAIN_KILL_AT")
	if dir == "" {
		t.Skip("the child of TestSIGKILLSweep")
	}
	lh, err := catalog.Open(context.Background(), lakehousetest.Config(dir))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), lh, entities, marts, Options{
		Policy: func(string) Policy { return tiny },
		fault: func(ident, step string) error {
			if ident+" "+step == at {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSIGKILLSweep SIGKILLs a real maintaining process before a compaction's commit and
// after each step of each kind of table, one point after the other on the same lake
// (each kill leaves what the next maintenance starts from); then maintenance runs to
// its end, and the chain goes on. Every table then holds the rows of a lake maintained
// without interruption, and no Gold run had to recompute everything (the snapshots the
// watermarks name survived every kill).
func TestSIGKILLSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary 16 times (skipped with -short)")
	}
	l, clean := newLake(t), newLake(t)
	for i := range 8 {
		l.land(t, i)
		clean.land(t, i)
		l.run(t, ordersDaily, eventsDaily) // no maintenance: every step has work waiting
		clean.run(t, ordersDaily, eventsDaily)
	}
	maintain(t, clean.lh, Options{})
	killed := 0
	for _, ident := range []string{"gold.orders_daily", "silver.orders", "silver.events_keys", "bronze.orders"} {
		for _, step := range []string{"commit", "compact", "manifests", "expire"} {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMaintainChild$")
			cmd.Env = append(os.Environ(), "MAINTAIN_KILL_DIR="+l.dir, "MAINTAIN_KILL_AT="+ident+" "+step)
			out, err := cmd.CombinedOutput()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				killed++
				continue
			}
			if err != nil {
				t.Fatalf("maintenance killed at %s %s: %v\n%s", ident, step, err, out)
			}
		}
	}
	if killed < 10 {
		t.Fatalf("only %d of 16 kill points were reached: the sweep proves little", killed)
	}
	maintain(t, l.lh, Options{})
	l.land(t, 8)
	clean.land(t, 8)
	l.run(t, ordersDaily, eventsDaily)
	clean.run(t, ordersDaily, eventsDaily)
	for _, tbl := range allTables {
		sameRows(t, tbl, rows(t, l.lh, tbl, 0), rows(t, clean.lh, tbl, 0))
	}
	t.Logf("%d of 16 kill points reached", killed)
}
