package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exitConfig is a file-fed pipeline without marts: two entities, one landing directory each.
func exitConfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := filepath.Join(dir, "pipeline.yaml")
	src := `version: 1
lakehouse:
  catalog: {type: sql}
  warehouse: file://${STATE_DIR}/warehouse
sources:
  a_landing: {type: file, system: a, path: ` + filepath.Join(dir, "a") + `, format: jsonl}
  b_landing: {type: file, system: b, path: ` + filepath.Join(dir, "b") + `, format: jsonl}
entities:
  a:
    sources: [a_landing]
    silver:
      mode: upsert
      key: [id]
      updated_at: ts
      columns: [{name: id, type: string, required: true}, {name: ts, type: timestamp}]
  b:
    sources: [b_landing]
    silver:
      mode: upsert
      key: [id]
      updated_at: ts
      columns: [{name: id, type: string, required: true}, {name: ts, type: timestamp}]
`
	writeFile(t, cfg, src)
	return cfg
}

// TestExitCodesTellTheTruth: a missing landing directory fails its source only (exit 1,
// named; the other entity is ingested), and a Silver run above the quarantine gate exits
// 6 naming its top reason, not 0 with a WARN (issue 17).
func TestExitCodesTellTheTruth(t *testing.T) {
	dir := t.TempDir()
	cfg := exitConfig(t, dir)
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "b", "1.jsonl"), `{"id":"x","ts":"2026-11-20T10:00:00Z"}`+"\n"+`{"ts":"2026-11-20T10:00:00Z"}`+"\n"+`{"ts":"2026-11-20T10:00:00Z"}`+"\n")

	code, out, errs := runCLI(t, "-c", cfg, "--state-dir", state, "ingest")
	if code != exitFailure || !strings.Contains(errs, "ingest a:") || !strings.Contains(errs, filepath.Join(dir, "a")) {
		t.Fatalf("ingest: exit %d, want %d naming entity a\n%s\n%s", code, exitFailure, out, errs)
	}
	if !strings.Contains(out, "ingest b: 1 files") {
		t.Fatalf("entity b not ingested beside the failed source:\n%s", out)
	}
	code, out, errs = runCLI(t, "-c", cfg, "--state-dir", state, "silver", "b")
	if code != exitSilverGate || !strings.Contains(errs, "missing_id (2)") || !strings.Contains(errs, "silver b") {
		t.Fatalf("silver: exit %d, want %d with the top reason\n%s\n%s", code, exitSilverGate, out, errs)
	}
}

// TestIngestWaitsForTheEndOfALine: with the default sources.<name>.tail_wait a file
// whose writer paused mid-line lands its whole lines and waits for the rest, which
// lands whole once written (issue 37).
func TestIngestWaitsForTheEndOfALine(t *testing.T) {
	dir := t.TempDir()
	cfg := exitConfig(t, dir)
	state := filepath.Join(dir, "state")
	path := filepath.Join(dir, "a", "1.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	settled := func() { // older than settle (5s), younger than tail_wait (1h)
		at := time.Now().Add(-10 * time.Second)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, path, `{"id":"x","ts":"2026-11-20T10:00:00Z"}`+"\n"+`{"id":"y","ts":"2026-11-20T1`)
	settled()
	code, out, errs := runCLI(t, "-c", cfg, "--state-dir", state, "--log-level", "warn", "ingest", "a")
	if code != exitOK || !strings.Contains(out, "1 rows") || !strings.Contains(out, "waiting for the newline of the last line of "+path) {
		t.Fatalf("half a line: exit %d\n%s\n%s", code, out, errs)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("1:00:00Z\"}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	settled()
	code, out, errs = runCLI(t, "-c", cfg, "--state-dir", state, "--log-level", "warn", "ingest", "a")
	if code != exitOK || !strings.Contains(out, "1 rows") || strings.Contains(out, "waiting") || strings.Contains(out, "1 changed") {
		t.Fatalf("line finished: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "-c", cfg, "--state-dir", state, "silver", "a")
	if code != exitOK || !strings.Contains(out, "2 bronze rows = 2 current") {
		t.Fatalf("silver: exit %d\n%s\n%s", code, out, errs)
	}
}
