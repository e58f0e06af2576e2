package silver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// liveFiles counts the live data and delete files of a table's current snapshot.
func liveFiles(t *testing.T, lh *catalog.Lakehouse, ident string) (data, deletes int) {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range manifestEntries(t, tbl, tbl.CurrentSnapshot(), true) {
		if en.DataFile().ContentType() == iceberg.EntryContentData {
			data++
		} else {
			deletes++
		}
	}
	return data, deletes
}

// manifestEntries are the entries of snap's manifests (without the deleted ones when
// live).
func manifestEntries(t *testing.T, tbl *table.Table, snap *table.Snapshot, live bool) []iceberg.ManifestEntry {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mans, err := snap.Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	var out []iceberg.ManifestEntry
	for _, m := range mans {
		for en, err := range m.Entries(fs, live) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, en)
		}
	}
	return out
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

// TestCompactConflict: the files a compaction rewrote are written once (issue 22, item 2).
// A commit that loses to a concurrent writer that left them alone (a Seal) re-commits the
// same files: exactly one retry, rows unchanged, no delete file left. One that loses to a
// Silver run putting new deletes on them fails with ErrCompactStale instead of bringing
// back the deleted rows: the table reads as that run left it. Either way no data file in
// the warehouse is unreferenced afterwards.
func TestCompactConflict(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		race  func(t *testing.T, lh *catalog.Lakehouse, ident, landing, next string)
		stale bool
	}{
		{"other commit", func(t *testing.T, lh *catalog.Lakehouse, ident, _, _ string) {
			if _, err := lh.Seal(ctx, ident, nil); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"new deletes", func(t *testing.T, lh *catalog.Lakehouse, ident, landing, next string) {
			moveTo(t, next, landing)
			ingest(t, lh, landing)
			if r, err := Run(ctx, lh, ordersSpec(), "bronze.orders", Options{}); err != nil || r.Counts.Updated == 0 {
				t.Fatalf("silver run in between: %+v %v", r.Counts, err)
			}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			lh := lakehousetest.Open(t)
			files := landDemo(t, 8000, 3, 5)
			landing := t.TempDir()
			spec := ordersSpec()
			for _, f := range files[:2] {
				moveTo(t, f, landing)
				ingest(t, lh, landing)
				if _, err := Run(ctx, lh, spec, "bronze.orders", Options{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, dels := liveFiles(t, lh, spec.Table); dels == 0 {
				t.Fatal("no equality deletes to compact")
			}
			want := tableRows(t, lh, spec.Table)
			var attempts []int
			res, err := compactWith(ctx, lh, spec.Table, func(attempt int) {
				attempts = append(attempts, attempt)
				if attempt == 1 {
					c.race(t, lh, spec.Table, landing, files[2])
					want = tableRows(t, lh, spec.Table)
				}
			})
			_, dels := liveFiles(t, lh, spec.Table)
			switch {
			case c.stale:
				if !errors.Is(err, ErrCompactStale) || !slices.Equal(attempts, []int{1, 2}) {
					t.Fatalf("compact over new deletes: attempts %v, err %v; want ErrCompactStale on the retry", attempts, err)
				}
				if dels == 0 {
					t.Errorf("the Silver run's deletes are gone")
				}
			case err != nil:
				t.Fatal(err)
			case !slices.Equal(attempts, []int{1, 2}) || res.SnapshotID == 0 || dels != 0:
				t.Fatalf("compact after a conflict: attempts %v (want [1 2]), snapshot %d, %d delete files left", attempts, res.SnapshotID, dels)
			}
			if got := tableRows(t, lh, spec.Table); !slices.Equal(got, want) {
				t.Fatalf("rows after the compaction: %d, want %d; first difference: %s", len(got), len(want), firstDiff(got, want))
			}
			tbl, err := lh.LoadTable(ctx, spec.Table)
			if err != nil {
				t.Fatal(err)
			}
			orphans, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(0))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range orphans.Files() {
				if strings.HasSuffix(f, ".parquet") {
					t.Errorf("unreferenced data file after the compaction: %s", f)
				}
			}
		})
	}
}

// TestCompactKeepsSortOrder: a Silver table with sort_by is compacted into files sorted
// by it (readers skip row groups by its bounds), with the same rows; concatenating the
// sorted files of a partition (what iceberg-go's compaction does) would not be sorted.
func TestCompactKeepsSortOrder(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	files := landDemo(t, 16000, 4, 6)
	landing := t.TempDir()
	spec := ordersSpec()
	spec.SortBy = []string{"created_at"}
	for _, f := range files[:3] {
		moveTo(t, f, landing)
		ingest(t, lh, landing)
		if _, err := Run(ctx, lh, spec, "bronze.orders", Options{}); err != nil {
			t.Fatal(err)
		}
	}
	before := tableRows(t, lh, spec.Table)
	if _, err := Compact(ctx, lh, spec.Table); err != nil {
		t.Fatal(err)
	}
	if after := tableRows(t, lh, spec.Table); !slices.Equal(after, before) {
		t.Fatal("compaction changed the rows")
	}
	tbl, _ := lh.LoadTable(ctx, spec.Table)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		_, recs, err := tbl.Scan(table.WithSelectedFields("created_at")).ReadTasks(ctx, []table.FileScanTask{task})
		if err != nil {
			t.Fatal(err)
		}
		var prev int64 = -1 << 63
		n := 0
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			col := rec.Column(0).(*array.Timestamp)
			for i := range col.Len() {
				if col.IsNull(i) {
					continue // nulls first or last: only the non-null order is checked
				}
				if v := int64(col.Value(i)); v < prev {
					t.Fatalf("%s is not sorted by created_at after compaction (row %d)", task.File.FilePath(), n+i)
				} else {
					prev = v
				}
			}
			n += col.Len()
			rec.Release()
		}
	}
}
