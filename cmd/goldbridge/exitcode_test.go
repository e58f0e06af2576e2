package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if code != exitQuarantineGate || !strings.Contains(errs, "missing_id (2)") || !strings.Contains(errs, "silver b") {
		t.Fatalf("silver: exit %d, want %d with the top reason\n%s\n%s", code, exitQuarantineGate, out, errs)
	}
}
