package chlocal

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRepairDatabases: a full disk during CREATE DATABASE left metadata/marts.sql empty
// and every later start failed ("Empty query: while loading database `marts`"); the
// definition of an Atomic database whose directory link exists is written back as
// ClickHouse writes it, one without a link is moved aside, and readable ones are left.
func TestRepairDatabases(t *testing.T) {
	const id = "1c156ff8-8ac1-4d5b-8269-ea7f1a327214"
	good := "ATTACH DATABASE _ UUID 'aaaaaaaa-8ac1-4d5b-8269-ea7f1a327214'\nENGINE = Atomic\n"
	dir := t.TempDir()
	meta := filepath.Join(dir, "metadata")
	if err := os.MkdirAll(filepath.Join(dir, "store", "1c1", id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(meta, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "store", "1c1", id), filepath.Join(meta, "marts")); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"marts.sql": "", "lost.sql": "  \n", "default.sql": good} {
		if err := os.WriteFile(filepath.Join(meta, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !MetadataBroken(dir) {
		t.Fatal("MetadataBroken = false with an empty database definition")
	}
	fixed, err := repairMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fixed)
	if want := []string{filepath.Join(meta, "lost.sql"), filepath.Join(meta, "marts.sql")}; !slices.Equal(fixed, want) {
		t.Fatalf("repaired %v, want %v", fixed, want)
	}
	for name, want := range map[string]string{
		"marts.sql":    "ATTACH DATABASE _ UUID '" + id + "'\nENGINE = Atomic\n",
		"lost.sql.bak": "  \n",
		"default.sql":  good,
	} {
		b, err := os.ReadFile(filepath.Join(meta, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(meta, "lost.sql")); !os.IsNotExist(err) {
		t.Errorf("lost.sql still there: %v", err)
	}
	if MetadataBroken(dir) {
		t.Fatal("MetadataBroken = true after the repair")
	}
}
