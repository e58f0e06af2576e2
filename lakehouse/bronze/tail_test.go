package bronze

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
)

// appendTo appends s to the file at path.
func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProducerPausedMidLine is issue 37, item 1: a JSON Lines file read while its writer
// was paused in the middle of a line (longer than settle) landed the half line as a
// record, and every later line of the file was "changed and skipped" forever. Now the
// file is read up to its last newline, the unterminated tail waits, and the rest is read
// when the line is finished: every line lands whole and exactly once. A tail that stays
// unterminated for TailWait is the file's last line, written without a newline: it lands.
func TestProducerPausedMidLine(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	src := source(dir)
	src.TailWait = time.Hour
	path := filepath.Join(dir, "live.jsonl")
	ingest := func(step string) Result {
		t.Helper()
		res, err := IngestFiles(ctx, lh, ident, []FileSource{src}, Options{})
		if err != nil || len(res.Quarantined) != 0 || len(res.Changed) != 0 {
			t.Fatalf("%s: %+v (%v)", step, res, err)
		}
		return res
	}

	writeFile(t, path, []byte("{\"n\":1}\n{\"n\":2,\"note\":\"half"))
	if res := ingest("half a line"); res.Rows != 1 || len(res.Waiting) != 1 || res.Files[0].Size != 8 || res.Files[0].Tail != 19 {
		t.Fatalf("half a line: %+v", res)
	}
	if res := ingest("unchanged"); res.Rows != 0 || res.SnapshotID != 0 || len(res.Waiting) != 1 {
		t.Fatalf("unchanged, still waiting: %+v", res)
	}
	appendTo(t, path, " done\"}\n{\"n\":3}\n{\"n\":4}")
	if res := ingest("line finished"); res.Rows != 2 || len(res.Waiting) != 1 || res.Files[0].From != 8 {
		t.Fatalf("line finished: %+v", res)
	}
	// The writer is gone and never wrote a final newline: after TailWait the tail is the
	// file's last line.
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if res := ingest("closed"); res.Rows != 1 || len(res.Waiting) != 0 || res.Files[0].Tail != 0 {
		t.Fatalf("closed: %+v", res)
	}
	if res := ingest("after"); res.Rows != 0 || res.Skipped != 1 {
		t.Fatalf("after the close: %+v", res)
	}
	got := payloadsByFile(t, scanAll(t, lh))["live.jsonl"]
	want := []string{`{"n":1}`, `{"n":2,"note":"half done"}`, `{"n":3}`, `{"n":4}`}
	if !slices.Equal(got, want) {
		t.Fatalf("bronze holds %q, want %q", got, want)
	}
}
