package bronze

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"goldbridge/lakehouse/lakehousetest"
)

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	fmt.Fprint(zw, s)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func payloadsByFile(t *testing.T, rows []row) map[string][]string {
	out := map[string][]string{}
	for _, r := range rows {
		out[filepath.Base(r.file)] = append(out[filepath.Base(r.file)], r.payload)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// TestUnreadableFilesAreQuarantined: a truncated .gz, a .zst that is not zstd, a CSV with a
// bare quote and a Parquet file that is not one are quarantined and listed, the good files
// beside them land (issue 17: ingest failed on every run and nothing landed).
func TestUnreadableFilesAreQuarantined(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	good := gzipped(t, "{\"a\":1}\n{\"a\":2}\n")
	writeFile(t, filepath.Join(dir, "1-good.jsonl"), []byte("{\"g\":1}\n"))
	writeFile(t, filepath.Join(dir, "2-truncated.jsonl.gz"), good[:len(good)-12])
	writeFile(t, filepath.Join(dir, "3-notzstd.jsonl.zst"), []byte("{\"plain\":1}\n"))
	writeFile(t, filepath.Join(dir, "4-barequote.csv"), []byte("id,note\n1,fine\n2,a \"bad\" quote\n3,after\n"))
	writeFile(t, filepath.Join(dir, "5-bad.parquet"), []byte("PAR1 this is not parquet"))
	writeFile(t, filepath.Join(dir, "6-good.jsonl"), []byte("{\"g\":2}\n"))

	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil {
		t.Fatalf("ingest failed instead of quarantining: %v", err)
	}
	var names []string
	for _, q := range res.Quarantined {
		names = append(names, filepath.Base(q.Path))
		if q.Reason == "" || q.FirstSeen == "" || q.Size == 0 {
			t.Errorf("quarantine record %+v", q)
		}
	}
	if want := []string{"2-truncated.jsonl.gz", "3-notzstd.jsonl.zst", "4-barequote.csv", "5-bad.parquet"}; !slices.Equal(names, want) {
		t.Fatalf("quarantined %v, want %v", names, want)
	}
	got := payloadsByFile(t, scanAll(t, lh))
	if !slices.Equal(got["1-good.jsonl"], []string{`{"g":1}`}) || !slices.Equal(got["6-good.jsonl"], []string{`{"g":2}`}) {
		t.Fatalf("good files: %v", got)
	}
	// The whole records read before a failure land, nothing after it.
	if !slices.Equal(got["4-barequote.csv"], []string{`{"id":"1","note":"fine"}`}) {
		t.Fatalf("bare-quote CSV landed %v", got["4-barequote.csv"])
	}
	tbl, _ := lh.LoadTable(ctx, ident)
	recorded, err := QuarantinedFiles(tbl)
	if err != nil || len(recorded) != 4 || recorded[filepath.Join(dir, "3-notzstd.jsonl.zst")].Checksum == "" {
		t.Fatalf("recorded quarantine %v (%v)", recorded, err)
	}
	before := tbl.CurrentSnapshot().SnapshotID

	// Unchanged: not read again, still listed, nothing committed.
	res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil || len(res.Quarantined) != 4 || res.Rows != 0 || res.SnapshotID != 0 {
		t.Fatalf("second run: %+v (%v)", res, err)
	}
	first := res.Quarantined[1].FirstSeen

	// Repaired: the truncated file is read again and leaves the quarantine.
	writeFile(t, filepath.Join(dir, "2-truncated.jsonl.gz"), good)
	res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil || res.Rows != 2 || len(res.Quarantined) != 3 {
		t.Fatalf("after the repair: %+v (%v)", res, err)
	}
	// It is read from its start: the record that landed before the failure lands again
	// (docs/bronze.md; Silver counts it as a duplicate).
	if got := payloadsByFile(t, scanAll(t, lh)); !slices.Equal(got["2-truncated.jsonl.gz"], []string{`{"a":1}`, `{"a":1}`, `{"a":2}`}) {
		t.Fatalf("repaired file landed %v", got["2-truncated.jsonl.gz"])
	}
	// On demand: the others are read again, and stay quarantined with their first sighting.
	res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{RetryQuarantined: true})
	if err != nil || len(res.Quarantined) != 3 || res.Quarantined[0].FirstSeen != first {
		t.Fatalf("retry: %+v (%v)", res, err)
	}
	tbl, _ = lh.LoadTable(ctx, ident)
	if tbl.CurrentSnapshot().SnapshotID == before {
		t.Fatal("no commit")
	}
	// A removed file leaves the quarantine.
	if err := os.Remove(filepath.Join(dir, "5-bad.parquet")); err != nil {
		t.Fatal(err)
	}
	if res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil || len(res.Quarantined) != 2 {
		t.Fatalf("after removal: %+v (%v)", res, err)
	}
	tbl, _ = lh.LoadTable(ctx, ident)
	if recorded, _ := QuarantinedFiles(tbl); len(recorded) != 2 {
		t.Fatalf("recorded %v", recorded)
	}
}

// TestSymlinksAreFollowed: a symlinked landing file is ingested; a dangling one is
// quarantined with its reason (issue 17: skipped without a log line).
func TestSymlinksAreFollowed(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir, elsewhere := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(elsewhere, "real.jsonl"), []byte("{\"s\":1}\n"))
	if err := os.Symlink(filepath.Join(elsewhere, "real.jsonl"), filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "gone.jsonl"), filepath.Join(dir, "dangling.jsonl")); err != nil {
		t.Fatal(err)
	}
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1 || len(res.Files) != 1 || filepath.Base(res.Files[0].Path) != "link.jsonl" {
		t.Fatalf("symlink not ingested: %+v", res)
	}
	if len(res.Quarantined) != 1 || !strings.Contains(res.Quarantined[0].Reason, "dangling symbolic link") {
		t.Fatalf("dangling link: %+v", res.Quarantined)
	}
	// The target appears: the link is read.
	writeFile(t, filepath.Join(elsewhere, "gone.jsonl"), []byte("{\"s\":2}\n"))
	if res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil || res.Rows != 1 || len(res.Quarantined) != 0 {
		t.Fatalf("after the target appeared: %+v (%v)", res, err)
	}
}

// TestBOMIsStripped: a UTF-8 BOM is no part of a CSV header or a JSONL file's first line
// (issue 17: every CSV row was quarantined as missing_order_id).
func TestBOMIsStripped(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "1.csv"), []byte("\ufefforder_id,amount\no-1,5\n"))
	writeFile(t, filepath.Join(dir, "2.jsonl"), []byte("\ufeff{\"order_id\":\"o-2\"}\n"))
	writeFile(t, filepath.Join(dir, "3.jsonl.gz"), gzipped(t, "\ufeff{\"order_id\":\"o-3\"}\n"))
	if _, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil {
		t.Fatal(err)
	}
	got := payloadsByFile(t, scanAll(t, lh))
	if got["1.csv"][0] != `{"order_id":"o-1","amount":"5"}` || got["2.jsonl"][0] != `{"order_id":"o-2"}` || got["3.jsonl.gz"][0] != `{"order_id":"o-3"}` {
		t.Fatalf("BOM kept: %q", got)
	}
}

// TestRecordLimits: a JSONL line over MaxRecordBytes lands as a marker (Silver
// quarantines it) and the next line lands whole; a CSV quote never closed fails its file
// instead of reading the rest of it into one field.
func TestRecordLimits(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	huge := `{"x":"` + strings.Repeat("y", MaxRecordBytes) + `"}`
	writeFile(t, filepath.Join(dir, "1.jsonl"), []byte(huge+"\n{\"after\":1}\n"))
	writeFile(t, filepath.Join(dir, "2.csv"), []byte("id,note\n1,\"never closed\n"+strings.Repeat("z,z\n", MaxRecordBytes/4+1<<20)))
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Quarantined) != 1 || !strings.Contains(res.Quarantined[0].Reason, "longer than") {
		t.Fatalf("quarantined %+v", res.Quarantined)
	}
	got := payloadsByFile(t, scanAll(t, lh))["1.jsonl"]
	want := OversizedPrefix + fmt.Sprint(len(huge)) + ":" + huge[:oversizedHead]
	if len(got) != 2 || got[1] != `{"after":1}` || got[0] != want {
		t.Fatalf("got %d payloads: %.80q", len(got), got)
	}
}

// TestReadStopsAtListedSize: bytes appended after a file was listed are not read.
func TestReadStopsAtListedSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "1.jsonl")
	writeFile(t, path, []byte("{\"a\":1}\n{\"a\":2}\n{\"a\":3"))
	var got []string
	sum, _, err := source("").readFile(context.Background(), path, 16, func(p []byte, _ int64) error {
		got = append(got, string(p))
		return nil
	})
	want, _ := checksumReader(strings.NewReader("{\"a\":1}\n{\"a\":2}\n"))
	if err != nil || !slices.Equal(got, []string{`{"a":1}`, `{"a":2}`}) || sum != want {
		t.Fatalf("got %q, sum %s want %s (%v)", got, sum, want, err)
	}
}

// TestGrowingFileAppendedLinesAreNewRecords: a JSON Lines file that grows after it was
// ingested has only its appended lines read (issue 17: "changed and skipped" forever).
func TestGrowingFileAppendedLinesAreNewRecords(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "1.jsonl")
	writeFile(t, path, []byte("{\"n\":1}\n{\"n\":2}\n"))
	if _, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "{\"n\":3}\n\n{\"n\":4}\n")
	f.Close()
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil || res.Rows != 2 || res.Blank != 1 || len(res.Changed) != 0 || len(res.Files) != 1 || res.Files[0].From != 16 {
		t.Fatalf("after the append: %+v (%v)", res, err)
	}
	if sum, _ := checksumFile(path); res.Files[0].Checksum != sum {
		t.Fatalf("recorded checksum %s, file %s", res.Files[0].Checksum, sum)
	}
	got := payloadsByFile(t, scanAll(t, lh))["1.jsonl"]
	if !slices.Equal(got, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`}) {
		t.Fatalf("bronze holds %v", got)
	}
	// Unchanged since: nothing more. Rewritten (prefix differs): reported, not re-read.
	if res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil || res.Rows != 0 || res.Skipped != 1 {
		t.Fatalf("third run: %+v (%v)", res, err)
	}
	writeFile(t, path, []byte("{\"n\":9}\n{\"n\":2}\n{\"n\":3}\n\n{\"n\":4}\n{\"n\":5}\n"))
	if res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil || res.Rows != 0 || len(res.Changed) != 1 {
		t.Fatalf("rewritten: %+v (%v)", res, err)
	}
}

// TestFileAppendedWhileIngesting: a writer appends lines in two writes each while ingest
// runs again and again; with a settle time no torn line lands and every complete line
// lands exactly once (issue 17: a half line became a Bronze row and the rest was skipped).
// With a tail wait and no settle time the same holds: a file is read up to its last
// newline (issue 37).
func TestFileAppendedWhileIngesting(t *testing.T) {
	for _, tt := range []struct {
		name             string
		settle, tailWait time.Duration
	}{{"settle", 150 * time.Millisecond, 0}, {"tail_wait", 0, time.Hour}} {
		t.Run(tt.name, func(t *testing.T) {
			src := source(t.TempDir())
			src.Settle, src.TailWait = tt.settle, tt.tailWait
			appendWhileIngesting(t, src)
		})
	}
}

func appendWhileIngesting(t *testing.T, src FileSource) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := src.Dir
	path := filepath.Join(dir, "live.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const lines = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range lines {
			fmt.Fprintf(f, `{"order_id":"o-%09d","user_id":"u-0016674","a`, i)
			time.Sleep(time.Millisecond)
			fmt.Fprint(f, "mount\":1}\n")
			if i%50 == 49 {
				time.Sleep(400 * time.Millisecond) // pauses longer than the settle time
			}
		}
		f.Close()
	}()
	ingestOnce := func() {
		if _, err := IngestFiles(ctx, lh, ident, []FileSource{src}, Options{}); err != nil {
			t.Error(err)
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			ingestOnce()
			time.Sleep(20 * time.Millisecond)
		}
	}
	ingestOnce()
	got := payloadsByFile(t, scanAll(t, lh))["live.jsonl"]
	seen := map[string]bool{}
	for _, p := range got {
		if !json.Valid([]byte(p)) {
			t.Errorf("torn row %q", p)
		}
		if seen[p] {
			t.Errorf("row twice: %s", p)
		}
		seen[p] = true
	}
	if len(seen) != lines {
		t.Fatalf("%d distinct rows, want %d", len(seen), lines)
	}
}

// TestPermissionDeniedIsQuarantined: a landing file goldbridge may not read is quarantined
// with its reason and the files beside it land; once readable, --retry-quarantined (the
// content did not change) lands it (issue 17, item 2). Root reads any file, so as root the
// test runs itself again in a user namespace of its own (unshare --user: no capabilities
// over this machine's files), where a mode-000 file is unreadable.
func TestPermissionDeniedIsQuarantined(t *testing.T) {
	if os.Geteuid() == 0 && os.Getenv("GB_TEST_NO_CAPS") == "" {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("running as root without unshare(1): cannot make a file unreadable")
		}
		if err := exec.Command(unshare, "--user", "true").Run(); err != nil {
			t.Skipf("running as root and no user namespace (%v): cannot make a file unreadable", err)
		}
		cmd := exec.Command(unshare, "--user", os.Args[0], "-test.run=^TestPermissionDeniedIsQuarantined$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "GB_TEST_NO_CAPS=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestPermissionDeniedIsQuarantined") {
			t.Fatalf("in a user namespace: %v\n%s", err, out)
		}
		return
	}
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "1-good.jsonl"), []byte("{\"g\":1}\n"))
	locked := filepath.Join(dir, "2-locked.jsonl")
	writeFile(t, locked, []byte("{\"l\":1}\n"))
	writeFile(t, filepath.Join(dir, "3-good.jsonl"), []byte("{\"g\":3}\n"))
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(locked); err == nil {
		f.Close()
		t.Fatal("a mode-000 file is readable here: the test proves nothing")
	}
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil {
		t.Fatalf("ingest failed instead of quarantining: %v", err)
	}
	if len(res.Quarantined) != 1 || res.Quarantined[0].Path != locked || !strings.Contains(res.Quarantined[0].Reason, "permission denied") {
		t.Fatalf("quarantined %+v, want %s for permission denied", res.Quarantined, locked)
	}
	got := payloadsByFile(t, scanAll(t, lh))
	if len(got) != 2 || !slices.Equal(got["1-good.jsonl"], []string{`{"g":1}`}) || !slices.Equal(got["3-good.jsonl"], []string{`{"g":3}`}) {
		t.Fatalf("landed %v, want the two readable files", got)
	}
	if err := os.Chmod(locked, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{RetryQuarantined: true})
	if err != nil || len(res.Quarantined) != 0 || res.Rows != 1 {
		t.Fatalf("retry after chmod: %+v (%v)", res, err)
	}
	if got := payloadsByFile(t, scanAll(t, lh)); !slices.Equal(got["2-locked.jsonl"], []string{`{"l":1}`}) {
		t.Fatalf("the file landed as %v", got["2-locked.jsonl"])
	}
}
