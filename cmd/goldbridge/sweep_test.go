package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSweepKilledWrites is issue 17 item 8 for a killed write (no process left to clean
// up): an unreferenced Parquet file older than catalog.SweepAge in a table's data
// directory is deleted by the next writing command; a younger one is kept; and the sweep
// runs at most once per SweepAge (the <state-dir>/orphan-sweep stamp), so a second old
// orphan waits until the stamp is an hour old.
func TestSweepKilledWrites(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "pipeline.yaml")
	writeOrdersConfig(t, cfgPath, func(map[string]any) {})
	state := filepath.Join(dir, "state")
	gb := func(args ...string) {
		t.Helper()
		if code, out, errs := runCLI(t, append([]string{"-c", cfgPath, "--state-dir", state}, args...)...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	gb("demo", "generate", "--events", "300", "--seed", "3")
	gb("ingest")
	files, _ := filepath.Glob(filepath.Join(state, "warehouse", "bronze*", "orders", "data", "*.parquet"))
	if len(files) == 0 {
		files, _ = filepath.Glob(filepath.Join(state, "warehouse", "*", "*", "data", "*", "*.parquet"))
	}
	if len(files) == 0 {
		t.Fatal("no Bronze data file found under the warehouse")
	}
	dataDir := filepath.Dir(files[0])
	hourAgo := time.Now().Add(-2 * time.Hour)
	orphan := func(name string, mod time.Time) string {
		t.Helper()
		p := filepath.Join(dataDir, name)
		if err := os.WriteFile(p, []byte("PAR1 a killed write's file"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	stamp := filepath.Join(state, "orphan-sweep")
	_ = os.Chtimes(stamp, hourAgo, hourAgo) // the ingest above swept already

	old1, young := orphan("00000-killed-old.parquet", hourAgo), orphan("00000-killed-young.parquet", time.Now())
	gb("ingest")
	if exists(old1) || !exists(young) {
		t.Fatalf("after a sweep: old orphan kept %v, young orphan kept %v; want false, true", exists(old1), exists(young))
	}
	for _, f := range files {
		if !exists(f) {
			t.Fatalf("the sweep deleted a referenced file %s", f)
		}
	}
	old2 := orphan("00000-killed-old-2.parquet", hourAgo)
	gb("ingest")
	if !exists(old2) {
		t.Fatal("a second sweep within the hour ran: the stamp was not honoured")
	}
	_ = os.Chtimes(stamp, hourAgo, hourAgo)
	gb("ingest")
	if exists(old2) || !exists(young) {
		t.Fatalf("after the stamp aged: old orphan kept %v, young kept %v", exists(old2), exists(young))
	}
}
