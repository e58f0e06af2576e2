package catalog_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// tableFiles lists every file under tbl's location (the test's oracle: the file system
// itself, not iceberg-go's listing), with its size.
func tableFiles(t *testing.T, tbl *table.Table) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	root := strings.TrimPrefix(tbl.Location(), "file://")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = st.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFailedWriteLeavesNoFiles(t *testing.T) {
	ctx := context.Background()
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		// write runs inside the attempt against the table as loaded before it.
		write   func(t *testing.T, lh *catalog.Lakehouse, tbl *table.Table) error
		wantErr error
		// kept: the files the failed write created stay (another write overlapped).
		kept bool
		// otherFirst: another write to the table is in progress when this one begins.
		otherFirst bool
	}{
		{"data files written, never committed", func(t *testing.T, _ *catalog.Lakehouse, tbl *table.Table) error {
			writeFiles(t, tbl, genRows(100, 50))
			return errBoom
		}, errBoom, false, false},
		{"commit refused after writing manifests", func(t *testing.T, lh *catalog.Lakehouse, tbl *table.Table) error {
			files := writeFiles(t, tbl, genRows(100, 50))
			_, err := lh.Commit(ctx, "bronze.orders", func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
				tx := tbl.NewTransaction()
				if err := tx.AddDataFiles(ctx, files, nil); err != nil {
					return nil, err
				}
				return nil, errBoom // manifests written, the catalog never updated
			})
			return err
		}, errBoom, false, false},
		{"files written after another write to the table began", func(t *testing.T, lh *catalog.Lakehouse, tbl *table.Table) error {
			other := lh.BeginWrite("bronze.orders")
			defer other.End(ctx, nil)
			writeFiles(t, tbl, genRows(100, 50))
			return errBoom
		}, errBoom, true, false},
		{"another write in progress when it began", func(t *testing.T, _ *catalog.Lakehouse, tbl *table.Table) error {
			writeFiles(t, tbl, genRows(100, 50))
			return errBoom
		}, errBoom, true, true},
		{"another write to the table before it", func(t *testing.T, lh *catalog.Lakehouse, tbl *table.Table) error {
			// the earlier write ended (see otherFirst) before this one began: not overlapping
			writeFiles(t, tbl, genRows(100, 50))
			return errBoom
		}, errBoom, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lh := lakehousetest.Open(t)
			tbl := createTable(t, lh, "bronze.orders")
			if _, err := lh.Commit(ctx, "bronze.orders", addFiles(writeFiles(t, tbl, sampleRows()), nil)); err != nil {
				t.Fatal(err)
			}
			tbl, err := lh.LoadTable(ctx, "bronze.orders")
			if err != nil {
				t.Fatal(err)
			}
			before := tableFiles(t, tbl)

			if tc.otherFirst {
				other := lh.BeginWrite("bronze.orders")
				defer other.End(ctx, nil)
			} else {
				lh.BeginWrite("bronze.orders").End(ctx, nil)
			}
			w := lh.BeginWrite("bronze.orders", "bronze.untouched")
			err = w.End(ctx, tc.write(t, lh, tbl))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("End = %v, want %v", err, tc.wantErr)
			}
			after := tableFiles(t, tbl)
			var added []string
			for p := range after {
				if _, ok := before[p]; !ok {
					added = append(added, p)
				}
			}
			for p := range before {
				if _, ok := after[p]; !ok {
					t.Errorf("file of the committed table deleted: %s", p)
				}
			}
			if tc.kept != (len(added) > 0) {
				t.Fatalf("files added by the failed write and left: %v (want some: %t)", added, tc.kept)
			}
			// The committed rows are intact.
			fresh, err := lh.LoadTable(ctx, "bronze.orders")
			if err != nil {
				t.Fatal(err)
			}
			assertRows(t, scanRows(t, fresh), sampleRows())
		})
	}
}

func TestSucceededWriteKeepsItsFiles(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	tbl := createTable(t, lh, "bronze.orders")
	w := lh.BeginWrite("bronze.orders")
	_, err := lh.Commit(ctx, "bronze.orders", addFiles(writeFiles(t, tbl, sampleRows()), iceberg.Properties{watermarkKey: "1"}))
	if err := w.End(ctx, err); err != nil {
		t.Fatal(err)
	}
	fresh, err := lh.LoadTable(ctx, "bronze.orders")
	if err != nil {
		t.Fatal(err)
	}
	assertRows(t, scanRows(t, fresh), sampleRows())
}

func TestSweepOrphans(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	tbl := createTable(t, lh, "bronze.orders")
	if _, err := lh.Commit(ctx, "bronze.orders", addFiles(writeFiles(t, tbl, sampleRows()), nil)); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, "bronze.orders")
	if err != nil {
		t.Fatal(err)
	}
	committed := tableFiles(t, tbl)
	// Leftovers of a killed write: data files never committed, one old, one young; and a
	// stray file in the metadata directory.
	before := tableFiles(t, tbl)
	writeFiles(t, tbl, genRows(100, 10))
	oldData := newFiles(t, tbl, before)
	before = tableFiles(t, tbl)
	writeFiles(t, tbl, genRows(200, 10))
	youngData := newFiles(t, tbl, before)
	meta := filepath.Join(strings.TrimPrefix(tbl.Location(), "file://"), "metadata", "stray-m0.avro")
	if err := os.WriteFile(meta, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * catalog.SweepAge)
	var wantBytes int64
	for _, p := range append(slices.Clone(oldData), meta) {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(p)
		wantBytes += st.Size()
	}
	// Every committed file is old too: age alone must not doom it.
	for p := range committed {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}

	sw, err := lh.SweepOrphans(ctx, catalog.SweepAge)
	if err != nil {
		t.Fatal(err)
	}
	if sw.Files != len(oldData)+1 || sw.Bytes != wantBytes {
		t.Fatalf("swept %+v, want %d files, %d bytes", sw, len(oldData)+1, wantBytes)
	}
	left := tableFiles(t, tbl)
	for _, p := range append(slices.Clone(oldData), meta) {
		if _, ok := left[p]; ok {
			t.Errorf("old orphan %s not swept", p)
		}
	}
	for _, p := range youngData {
		if _, ok := left[p]; !ok {
			t.Errorf("young orphan %s swept: it may belong to a write in progress", p)
		}
	}
	for p := range committed {
		if _, ok := left[p]; !ok {
			t.Errorf("committed file %s swept", p)
		}
	}
	fresh, err := lh.LoadTable(ctx, "bronze.orders")
	if err != nil {
		t.Fatal(err)
	}
	assertRows(t, scanRows(t, fresh), sampleRows())

	// A table with a write in progress is skipped.
	for _, p := range youngData {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	w := lh.BeginWrite("bronze.orders")
	if sw, err := lh.SweepOrphans(ctx, catalog.SweepAge); err != nil || sw.Files != 0 {
		t.Fatalf("sweep during a write: %+v, %v; want nothing removed", sw, err)
	}
	if err := w.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if sw, err := lh.SweepOrphans(ctx, catalog.SweepAge); err != nil || sw.Files != len(youngData) {
		t.Fatalf("sweep after the write: %+v, %v; want %d files", sw, err, len(youngData))
	}
}

// newFiles returns the files under tbl's location that are not in before.
func newFiles(t *testing.T, tbl *table.Table, before map[string]int64) []string {
	t.Helper()
	var out []string
	for p := range tableFiles(t, tbl) {
		if _, ok := before[p]; !ok {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no new files")
	}
	slices.Sort(out)
	return out
}
