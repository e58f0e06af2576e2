package lakesql

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/lakehousetest"
)

// TestForLake: a query over a table of the lake reads its current metadata file through
// icebergLocal; a snapshot the table does not keep is a QueryError carrying notKept's
// note; a name that is no lake table is left to ClickHouse.
func TestForLake(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	sch := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	tbl, _, err := lh.LoadOrCreateTable(ctx, "silver.things", sch, *iceberg.UnpartitionedSpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	note := func(name string) string { return "kept by policy of " + name }
	sql, used, err := ForLake(ctx, lh, "SELECT count() FROM silver.things JOIN marts.kpi USING (id)", AsOf{}, note)
	if err != nil {
		t.Fatal(err)
	}
	meta := strings.TrimPrefix(tbl.MetadataLocation(), "file://")
	if len(used) != 1 || used[0] != "silver.things" || !strings.Contains(sql, "icebergLocal(") || !strings.Contains(sql, meta) || !strings.Contains(sql, "marts.kpi") {
		t.Fatalf("sql %q, used %v", sql, used)
	}
	_, _, err = ForLake(ctx, lh, "SELECT * FROM silver.things FOR VERSION AS OF 42", AsOf{}, note)
	if !errors.Is(err, ErrQuery) || !strings.Contains(err.Error(), "kept by policy of silver.things") {
		t.Fatalf("a snapshot not kept: %v", err)
	}
}
