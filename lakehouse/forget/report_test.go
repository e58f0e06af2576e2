package forget

import (
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/bronze"
)

// TestReports: the dry run's and the run's texts name every table with what was found or
// done in it (rows and files, at most 32 Gold partitions, a rebuild, a note), and the
// places goldbridge cannot reach.
func TestReports(t *testing.T) {
	parts := make([]string, 40)
	for i := range parts {
		parts[i] = time.Date(2026, 1, 1+i, 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
	}
	res := Result{Entity: "orders", Found: true, BronzeSnapshot: 7, Elapsed: 1500 * time.Millisecond,
		Tables: []TableReport{
			{Layer: LayerBronze, Table: "bronze.orders", Rows: 3, Files: 2, Snapshots: 4, DeletedFiles: 2, DeletedMetadata: 5},
			{Layer: LayerKeys, Table: "silver.orders_keys", Rows: -1, Note: "keys only"},
			{Layer: LayerGold, Table: "gold.kpi", Partitions: parts},
		},
		Unreachable: []string{"landing files", "backups"}}
	req := bronze.ForgetRequest{Field: "user_id", Value: "u-42"}
	var plan, run strings.Builder
	res.WritePlan(&plan, req)
	res.WriteRun(&run, req)
	for _, want := range []string{
		"forget orders (dry run): " + req.String() + "\n",
		"  bronze     bronze.orders: 3 rows in 2 data files; would expire 4 snapshots\n",
		"  keys       silver.orders_keys: rebuilt (keys only); would expire 0 snapshots\n",
		"gold.kpi: 40 partitions fed by the subject (2026-01-01, ", "2026-02-01, …); would expire",
		"    - landing files\n    - backups\n",
	} {
		if !strings.Contains(plan.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, plan.String())
		}
	}
	if strings.Contains(plan.String(), "2026-02-02") {
		t.Errorf("plan shows more than 32 partitions:\n%s", plan.String())
	}
	for _, want := range []string{
		"forget orders: " + req.String() + " erased (bronze snapshot 7, 1.50s)\n",
		"bronze.orders: 3 rows in 2 data files; 4 snapshots expired, 2 data files and 5 metadata files deleted\n",
	} {
		if !strings.Contains(run.String(), want) {
			t.Errorf("run lacks %q:\n%s", want, run.String())
		}
	}
	var none strings.Builder
	Result{Entity: "orders"}.WritePlan(&none, req)
	if !strings.Contains(none.String(), "a forget would change nothing") {
		t.Errorf("nothing found: %s", none.String())
	}
}
