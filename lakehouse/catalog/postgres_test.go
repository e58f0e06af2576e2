package catalog_test

import (
	"context"
	"strings"
	"testing"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestPostgresCatalog: a postgres:// URI opens the SQL catalog on PostgreSQL (pgx),
// with the password in the URI or from PGPASSWORD; a wrong password is refused and the
// error does not show it; tables persist across handles.
func TestPostgresCatalog(t *testing.T) {
	pg := lakehousetest.StartPostgres(t)
	ctx := context.Background()
	wh := "file://" + t.TempDir() + "/warehouse"
	lh, err := catalog.Open(ctx, catalog.Config{Type: catalog.TypeSQL, URI: pg.URI(true), Warehouse: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	if lh.Embedded() || lh.DB() != nil {
		t.Errorf("a postgres catalog reports embedded=%v, DB=%v", lh.Embedded(), lh.DB())
	}
	tbl := createTable(t, lh, "bronze.orders")
	files := writeFiles(t, tbl, sampleRows())
	if _, err := lh.Commit(ctx, "bronze.orders", addFiles(files, nil)); err != nil {
		t.Fatal(err)
	}

	t.Setenv("PGPASSWORD", pg.Password)
	again, err := catalog.Open(ctx, catalog.Config{Type: catalog.TypeSQL, URI: pg.URI(false), Warehouse: wh})
	if err != nil {
		t.Fatalf("open with PGPASSWORD: %v", err)
	}
	defer again.Close()
	got, err := again.LoadTable(ctx, "bronze.orders")
	if err != nil {
		t.Fatal(err)
	}
	assertRows(t, scanRows(t, got), sampleRows())

	t.Setenv("PGPASSWORD", "")
	wrong := strings.Replace(pg.URI(true), pg.Password, "not-"+pg.Password, 1)
	_, err = catalog.Open(ctx, catalog.Config{Type: catalog.TypeSQL, URI: wrong, Warehouse: wh})
	if err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if strings.Contains(err.Error(), pg.Password) {
		t.Errorf("the error shows the password: %v", err)
	}
	t.Logf("wrong password: %v", err)
	if _, err := catalog.Open(ctx, catalog.Config{Type: catalog.TypeSQL, URI: pg.URI(true)}); err == nil || !strings.Contains(err.Error(), "needs a warehouse") {
		t.Errorf("a postgres catalog without a warehouse: %v", err)
	}
}

// TestPostgresCatalogOpenRace: workers started together on a fresh database each create
// iceberg-go's catalog tables; CREATE TABLE IF NOT EXISTS races in PostgreSQL ("type
// iceberg_tables already exists"), so opening is serialized by an advisory lock and all
// of them succeed.
func TestPostgresCatalogOpenRace(t *testing.T) {
	pg := lakehousetest.StartPostgres(t)
	ctx := context.Background()
	wh := "file://" + t.TempDir() + "/warehouse"
	const workers = 6
	errs := make(chan error, workers)
	for range workers {
		go func() {
			lh, err := catalog.Open(ctx, catalog.Config{Type: catalog.TypeSQL, URI: pg.URI(true), Warehouse: wh})
			if err == nil {
				lh.Close()
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
