package catalog_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestNewestWith: the newest snapshot of the current lineage whose summary has one of the
// properties, walking back over commits that record none; nil when none does.
func TestNewestWith(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "bronze.orders"
	createTable(t, lh, ident)
	appendRows(t, lh, ident, sampleRows())
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if s := catalog.NewestWith(tbl, "goldbridge.test.mark"); s != nil {
		t.Fatalf("found %d before any commit recorded the property", s.SnapshotID)
	}
	marked, err := lh.Seal(ctx, ident, iceberg.Properties{"goldbridge.test.mark": "1"})
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, lh, ident, sampleRows()) // a commit without it
	if tbl, err = lh.LoadTable(ctx, ident); err != nil {
		t.Fatal(err)
	}
	for _, props := range [][]string{{"goldbridge.test.mark"}, {"goldbridge.test.other", "goldbridge.test.mark"}} {
		if s := catalog.NewestWith(tbl, props...); s == nil || s.SnapshotID != marked {
			t.Fatalf("NewestWith(%v) = %v, want snapshot %d", props, s, marked)
		}
	}
	if s := catalog.NewestWith(tbl, "goldbridge.test.other"); s != nil {
		t.Fatalf("found %d for a property no commit recorded", s.SnapshotID)
	}
}
