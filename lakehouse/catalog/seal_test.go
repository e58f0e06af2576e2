package catalog_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestSealIsAReplace is issue 37, item 3: the snapshot Seal commits (forget's seal of
// every table) changes no row, and was labelled operation "delete", at which a Spark
// stream reading the table stops. It is a "replace" now, and still keeps its promises:
// the goldbridge.* keys of the head plus its own in the summary, the head's totals, the
// same rows, and no manifest left that holds only DELETED entries (they keep the removed
// files' column bounds).
func TestSealIsAReplace(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "bronze.orders"
	createTable(t, lh, ident)
	appendRows(t, lh, ident, sampleRows())
	tbl, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return nil, err
		}
		tx := tbl.NewTransaction() // a copy-on-write commit dropping one data file
		if err := tx.ReplaceDataFilesWithDataFiles(ctx, []iceberg.DataFile{tasks[0].File}, nil, iceberg.Properties{watermarkKey: "7"}); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	head := tbl.CurrentSnapshot()
	rows := scanRows(t, tbl)
	if deletedOnly(t, tbl, head) == 0 {
		t.Fatal("setup: the overwrite left no manifest of DELETED entries")
	}

	id, err := lh.Seal(ctx, ident, iceberg.Properties{"goldbridge.forget.field": "user_id"})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err = lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	seal := tbl.CurrentSnapshot()
	if seal.SnapshotID != id || seal.ParentSnapshotID == nil || *seal.ParentSnapshotID != head.SnapshotID {
		t.Fatalf("seal %d on %v, want %d on %d", seal.SnapshotID, seal.ParentSnapshotID, id, head.SnapshotID)
	}
	if op := seal.Summary.Operation; op != table.OpReplace {
		t.Errorf("seal operation %q, want %q", op, table.OpReplace)
	}
	p := seal.Summary.Properties
	if p[watermarkKey] != "7" || p["goldbridge.forget.field"] != "user_id" || p["total-records"] != head.Summary.Properties["total-records"] ||
		p["total-data-files"] != head.Summary.Properties["total-data-files"] || seal.SequenceNumber <= head.SequenceNumber {
		t.Errorf("seal summary %v (seq %d), head %v (seq %d)", p, seal.SequenceNumber, head.Summary.Properties, head.SequenceNumber)
	}
	if n := deletedOnly(t, tbl, seal); n != 0 {
		t.Errorf("the seal keeps %d manifests of only DELETED entries", n)
	}
	assertRows(t, scanRows(t, tbl), rows)
	if _, err := lh.ExpireBefore(ctx, ident, id); err != nil {
		t.Fatal(err)
	}
}

// appendRows appends rows to ident in one snapshot.
func appendRows(t *testing.T, lh *catalog.Lakehouse, ident string, rows []row) {
	t.Helper()
	_, err := lh.Commit(context.Background(), ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		rdr := toReader(t, rows)
		defer rdr.Release()
		if err := tx.Append(ctx, rdr, nil); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deletedOnly counts the manifests of snap that list no live file.
func deletedOnly(t *testing.T, tbl *table.Table, snap *table.Snapshot) int {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range manifests {
		if !m.HasAddedFiles() && !m.HasExistingFiles() {
			n++
		}
	}
	return n
}
