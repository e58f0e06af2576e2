package catalog_test

import (
	"context"
	"strings"
	"testing"

	iceio "github.com/apache/iceberg-go/io"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestSweepOrphansEmptyDirectoryOnS3: SeaweedFS keeps a directory after its last object
// is deleted and lists it as a prefix, although nothing can be read under it (a
// partition whose files a forget or an expiry deleted). The orphan sweep walks past it:
// it deletes the planted object, and a second sweep, which meets the emptied directory,
// finds nothing and fails on nothing.
func TestSweepOrphansEmptyDirectoryOnS3(t *testing.T) {
	weed := lakehousetest.StartSeaweedFS(t)
	ctx := context.Background()
	lh, err := catalog.Open(ctx, catalog.Config{URI: t.TempDir() + "/catalog.db",
		Warehouse: "s3://" + weed.Bucket + "/sweep", S3: weed.S3()})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	tbl := createTable(t, lh, "bronze.orders")
	if _, err := lh.Commit(ctx, "bronze.orders", addFiles(writeFiles(t, tbl, sampleRows()), nil)); err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := fs.(iceio.WriteFileIO)
	if !ok {
		t.Fatalf("the S3 file IO %T cannot write", fs)
	}
	planted := strings.TrimRight(tbl.Location(), "/") + "/data/day=2026-12-05/00000-0-killed-write.parquet"
	if err := w.WriteFile(planted, []byte("an unreferenced object")); err != nil {
		t.Fatal(err)
	}
	if sw, err := lh.SweepOrphans(ctx, 0); err != nil || sw.Files != 1 {
		t.Fatalf("the sweep deleted %d files, want the 1 planted (err %v)", sw.Files, err)
	}
	if sw, err := lh.SweepOrphans(ctx, 0); err != nil || sw.Files != 0 {
		t.Errorf("the sweep over an emptied directory deleted %d files (err %v), want 0 and no error", sw.Files, err)
	}
}
