package silver

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// liveFiles counts the live data and delete files of a table's current snapshot.
func liveFiles(t *testing.T, lh *catalog.Lakehouse, ident string) (data, deletes int) {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		for en, err := range m.Entries(fs, true) {
			if err != nil {
				t.Fatal(err)
			}
			if en.DataFile().ContentType() == iceberg.EntryContentData {
				data++
			} else {
				deletes++
			}
		}
	}
	return data, deletes
}

// TestCompact: after several upsert runs with updates, compaction keeps every row and
// value (run ids included), leaves no delete file, carries the watermark forward, and
// later Silver runs still equal the oracle.
func TestCompact(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	files := landDemo(t, 16000, 4, 5)
	landing := t.TempDir()
	spec := ordersSpec()
	for _, f := range files[:3] {
		moveTo(t, f, landing)
		ingest(t, lh, landing)
		if _, err := Run(ctx, lh, spec, "bronze.orders", Options{}); err != nil {
			t.Fatal(err)
		}
	}
	before := tableRows(t, lh, spec.Table)
	dataBefore, delBefore := liveFiles(t, lh, spec.Table)
	if delBefore == 0 {
		t.Fatal("the runs left no equality deletes: the test does not exercise compaction")
	}
	tbl, _ := lh.LoadTable(ctx, spec.Table)
	wm := Watermark(tbl)

	res, err := Compact(ctx, lh, spec.Table)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compact: %+v (before: %d data files, %d delete files)", res, dataBefore, delBefore)
	if res.SnapshotID == 0 || res.DeleteFilesRemoved != delBefore || res.DataFilesRemoved != dataBefore {
		t.Fatalf("compaction result %+v, want all %d data and %d delete files rewritten", res, dataBefore, delBefore)
	}
	if after := tableRows(t, lh, spec.Table); !slices.Equal(after, before) {
		t.Fatalf("rows changed by compaction: %d rows before, %d after; first difference: %s", len(before), len(after), firstDiff(before, after))
	}
	data, dels := liveFiles(t, lh, spec.Table)
	if dels != 0 || data > spec.Buckets {
		t.Fatalf("after compaction: %d data files (buckets %d), %d delete files", data, spec.Buckets, dels)
	}
	tbl, _ = lh.LoadTable(ctx, spec.Table)
	sum := tbl.CurrentSnapshot().Summary.Properties
	if Watermark(tbl) != wm || sum[PropRunID] != "" || sum[PropCompaction] != res.CompactionID {
		t.Fatalf("compaction summary %v: watermark %d, want %d, empty run id", sum, Watermark(tbl), wm)
	}

	// Nothing left to compact: no new snapshot.
	again, err := Compact(ctx, lh, spec.Table)
	if err != nil || again.SnapshotID != 0 {
		t.Fatalf("second compaction: %+v %v", again, err)
	}

	// Silver keeps working incrementally from the carried watermark.
	moveTo(t, files[3], landing)
	ingest(t, lh, landing)
	r, err := Run(ctx, lh, spec, "bronze.orders", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.BronzeFrom != wm || r.Counts.Read != 4000 || r.Counts.Updated == 0 {
		t.Fatalf("run after compaction: from %d (want %d), counts %+v", r.BronzeFrom, wm, r.Counts)
	}
	want, _ := oracle(t, landing)
	got := silverRows(t, lh)
	if len(got) != len(want) {
		t.Fatalf("silver has %d keys, oracle %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %s:\n silver %s\n oracle %s", k, got[k], w)
		}
	}
}
