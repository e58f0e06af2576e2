// Package lakehousetest opens throwaway embedded Iceberg catalogs for tests.
package lakehousetest

import (
	"context"
	"path/filepath"
	"testing"

	"goldbridge/lakehouse/catalog"
)

// Config returns the embedded catalog configuration rooted at dir:
// dir/catalog.db (SQLite) and dir/warehouse (file:// warehouse).
func Config(dir string) catalog.Config {
	return catalog.Config{
		Type: catalog.TypeSQL,
		URI:  filepath.Join(dir, "catalog.db"),
		// A plain path: catalog.Open turns it into a properly escaped
		// file:// URL.
		Warehouse: filepath.Join(dir, "warehouse"),
	}
}

// Open opens an embedded catalog (SQLite + file warehouse) in a fresh temporary
// directory. It is closed when the test ends.
func Open(t testing.TB) *catalog.Lakehouse {
	t.Helper()

	return OpenDir(t, t.TempDir())
}

// OpenDir opens the embedded catalog rooted at dir (see Config), creating it if
// needed; opening the same dir again sees the same tables. It is closed when
// the test ends.
func OpenDir(t testing.TB, dir string) *catalog.Lakehouse {
	t.Helper()
	lh, err := catalog.Open(context.Background(), Config(dir))
	if err != nil {
		t.Fatalf("lakehousetest: %v", err)
	}
	t.Cleanup(func() {
		if err := lh.Close(); err != nil {
			t.Errorf("lakehousetest: close: %v", err)
		}
	})

	return lh
}
