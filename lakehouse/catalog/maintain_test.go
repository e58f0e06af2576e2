package catalog_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// liveEntries maps each live data file of tbl's current snapshot to the snapshot that
// added it and its data sequence number: what sync's change detection and Silver's
// incremental reads go by.
func liveEntries(t *testing.T, tbl *table.Table) map[string]string {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				t.Fatal(err)
			}
			out[e.DataFile().FilePath()] = fmt.Sprintf("snapshot %d seq %d", e.SnapshotID(), e.SequenceNum())
		}
	}
	return out
}

// TestRewriteManifestsKeepsEntries: merging manifests keeps every live file with the
// snapshot that added it and its sequence number (a Gold partition does not look
// changed to sync), the rows and the Bronze-style incremental reads; with fewer
// manifests than the limit it commits nothing.
func TestRewriteManifestsKeepsEntries(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "bronze.orders"
	createTable(t, lh, ident)
	for range 5 {
		appendRows(t, lh, ident, sampleRows())
	}
	tbl, _ := lh.LoadTable(ctx, ident)
	before, rows := liveEntries(t, tbl), scanRows(t, tbl)
	first := tbl.Metadata().Snapshots()[1].SnapshotID
	incr, err := tbl.NewIncrementalAppendScan().FromSnapshotExclusive(first).PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b, a, err := lh.RewriteManifests(ctx, ident, 5); err != nil || b != 5 || a != 5 {
		t.Fatalf("rewrite at the limit: %d -> %d manifests, %v; want nothing done", b, a, err)
	}
	b, a, err := lh.RewriteManifests(ctx, ident, 2)
	if err != nil || b != 5 || a >= 2 {
		t.Fatalf("rewrite: %d -> %d manifests, %v", b, a, err)
	}
	tbl, _ = lh.LoadTable(ctx, ident)
	if after := liveEntries(t, tbl); !maps.Equal(after, before) {
		t.Fatalf("entries changed:\nbefore %v\nafter  %v", before, after)
	}
	assertRows(t, scanRows(t, tbl), rows)
	again, err := tbl.NewIncrementalAppendScan().FromSnapshotExclusive(first).PlanFiles(ctx)
	if err != nil || len(again) != len(incr) {
		t.Fatalf("incremental scan after the rewrite: %d tasks (%v), before %d", len(again), err, len(incr))
	}
}

// TestExpireKeepsProtected: Expire keeps the Min newest snapshots, every snapshot
// younger than Age, and a protected snapshot with everything after it; it folds the
// properties in the same commit; with nothing to expire it commits nothing.
func TestExpireKeepsProtected(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "bronze.orders"
	createTable(t, lh, ident)
	for range 6 {
		appendRows(t, lh, ident, sampleRows())
	}
	tbl, _ := lh.LoadTable(ctx, ident)
	snaps := tbl.Metadata().Snapshots()
	protect := snaps[2].SnapshotID // keeps snapshots 2..5
	time.Sleep(5 * time.Millisecond)
	fold := func(*table.Table) (iceberg.Properties, error) {
		return iceberg.Properties{"goldbridge.test-fold": "yes"}, nil
	}
	res, err := lh.Expire(ctx, ident, catalog.Retention{Min: 1, Protect: []int64{protect}}, fold)
	if err != nil || res.Snapshots != 2 || res.Kept != 4 || res.Files == 0 {
		t.Fatalf("expire: %+v, %v; want 2 expired, 4 kept, their files deleted", res, err)
	}
	tbl, _ = lh.LoadTable(ctx, ident)
	if tbl.SnapshotByID(protect) == nil || tbl.Properties()["goldbridge.test-fold"] != "yes" {
		t.Fatal("the protected snapshot was expired, or the fold was not committed")
	}
	loc := tbl.MetadataLocation()
	if res, err := lh.Expire(ctx, ident, catalog.Retention{Age: time.Hour, Min: 1}, fold); err != nil || res.Snapshots != 0 || res.Files != 0 {
		t.Fatalf("expire within the age: %+v, %v", res, err)
	}
	tbl, _ = lh.LoadTable(ctx, ident)
	if tbl.MetadataLocation() != loc {
		t.Fatal("an expiry with nothing to expire committed")
	}
}
