package bronze

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"goldbridge/lakehouse/lakehousetest"
)

// TestSiblingSourceIngestedWhileAnotherFails is issue 37, item 2: an entity with two file
// sources, one of whose landing folders is missing, ingested nothing although the log
// said "the other sources go on". Now the healthy source's files are committed, the
// error names the failed source and matches ErrSourceFailed, and the failed source's
// quarantined files are kept for when its folder is back.
func TestSiblingSourceIngestedWhileAnotherFails(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	good, gone := source(t.TempDir()), source(t.TempDir())
	good.Name, gone.Name = "good", "gone"
	writeFile(t, filepath.Join(good.Dir, "1.jsonl"), []byte("{\"g\":1}\n"))
	writeFile(t, filepath.Join(gone.Dir, "bad.jsonl.gz"), []byte("not gzip"))
	res, err := IngestFiles(ctx, lh, ident, []FileSource{good, gone}, Options{})
	if err != nil || len(res.Quarantined) != 1 {
		t.Fatalf("first run: %+v (%v)", res, err)
	}
	if err := os.RemoveAll(gone.Dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(good.Dir, "2.jsonl"), []byte("{\"g\":2}\n"))

	res, err = IngestFiles(ctx, lh, ident, []FileSource{good, gone}, Options{})
	if !errors.Is(err, ErrSourceFailed) || !strings.Contains(err.Error(), "source gone: list landing dir") ||
		strings.Contains(err.Error(), "source good") {
		t.Fatalf("error %v, want the failed source named", err)
	}
	if res.SnapshotID == 0 || res.Rows != 1 || len(res.Failed) != 1 || res.Failed[0].Name != "gone" {
		t.Fatalf("the healthy source was not ingested: %+v", res)
	}
	if got := payloadsByFile(t, scanAll(t, lh)); !slices.Equal(got["2.jsonl"], []string{`{"g":2}`}) {
		t.Fatalf("bronze holds %v", got)
	}
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if q, err := QuarantinedFiles(tbl); err != nil || len(q) != 1 {
		t.Fatalf("the failed source's quarantine was dropped: %v (%v)", q, err)
	}
}
