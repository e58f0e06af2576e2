package silver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestCriticalCheckCommitsNothing is issue 37's second observation: a failed row-level
// check was logged and the run committed anyway. A normalisation after the filter makes
// a written row fail F1 (5 - 10 < 0). With the default severity (critical) the run fails
// with ErrCriticalCheck and the Silver, quarantine and keys tables are as before: the
// same snapshots, rows and watermark, and not one file more in the warehouse. With the
// row check at warning severity the same run publishes everything, the failure recorded
// in the report and in the snapshot summary.
func TestCriticalCheckCommitsNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lh := lakehousetest.OpenDir(t, dir)
	landing := t.TempDir()
	spec := eventsSpec()
	spec.KeysTable = "silver.events_keys"
	spec.Rules = append(spec.Rules, RuleSpec{ID: "N1", Kind: "normalize", Column: "amount", Expr: "amount - 10"})
	writeLanding(t, landing, "1.jsonl",
		event("e1", "2026-01-10T10:00:00Z", "50"),
		event("e2", "2026-01-10T11:00:00Z", "-1"), // F1: quarantined
	)
	ingestInto(t, lh, "bronze.events", landing)
	if _, err := Run(ctx, lh, spec, "bronze.events", Options{}); err != nil {
		t.Fatal(err)
	}
	tables := []string{spec.Table, spec.QuarantineTable, spec.KeysTable}
	before := lakeState(t, lh, tables)

	writeLanding(t, landing, "2.jsonl",
		event("e3", "2026-01-11T10:00:00Z", "5"), // 5 - 10 = -5: a written row fails F1
		event("e4", "2026-01-11T11:00:00Z", "70"),
		event("e5", "2026-01-11T12:00:00Z", "-2"), // F1: quarantined
	)
	ingestInto(t, lh, "bronze.events", landing)
	files := warehouseFiles(t, dir)
	res, err := Run(ctx, lh, spec, "bronze.events", Options{PassRows: 1}) // in passes: the gate follows the last
	if !errors.Is(err, ErrCriticalCheck) || !strings.Contains(err.Error(), "silver events: critical quality check failed: rows: 1 rows fail F1; nothing committed") {
		t.Fatalf("run with a critical failure: %v", err)
	}
	wantFail := []Failure{{Check: CheckRows, Severity: SeverityCritical, Detail: "1 rows fail F1"}}
	if !slices.Equal(res.Quality.Failures, wantFail) || res.SnapshotID != 0 || res.QuarantineSnapshotID != 0 || res.KeysSnapshotID != 0 {
		t.Fatalf("result %+v, want failures %+v and no snapshot", res, wantFail)
	}
	if after := lakeState(t, lh, tables); !slices.Equal(after, before) {
		t.Fatalf("the refused run changed the tables:\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if got := warehouseFiles(t, dir); !slices.Equal(got, files) {
		t.Fatalf("the refused run left files: %v", diff(got, files))
	}

	spec.Severity = Severities{Rows: SeverityWarning}
	res, err = Run(ctx, lh, spec, "bronze.events", Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantFail[0].Severity = SeverityWarning
	if !slices.Equal(res.Quality.Failures, wantFail) || res.Read != 3 || res.Current != 2 || res.Quarantined != 1 {
		t.Fatalf("warning run: counts %+v, failures %+v, want %+v", res.Counts, res.Quality.Failures, wantFail)
	}
	want := []string{appendRow("e1", "40.00", "2026-01-10T10:00:00Z"), appendRow("e3", "-5.00", "2026-01-11T10:00:00Z"),
		appendRow("e4", "60.00", "2026-01-11T11:00:00Z")}
	if got := tableRows(t, lh, spec.Table, appendSkip...); !slices.Equal(got, want) {
		t.Fatalf("silver after the warning run:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := colValues(tableRows(t, lh, spec.KeysTable), "event_id"); !slices.Equal(got, []string{"e1", "e3", "e4"}) {
		t.Errorf("keys table %v", got)
	}
	if got := colValues(tableRows(t, lh, spec.QuarantineTable), QColReason); !slices.Equal(got, []string{"F1:negative_amount", "F1:negative_amount"}) {
		t.Errorf("quarantine reasons %v", got)
	}
	tbl, _ := lh.LoadTable(ctx, spec.Table)
	if q := tbl.CurrentSnapshot().Summary.Properties[PropQuality]; !strings.Contains(q, `"failures":[{"check":"rows","severity":"warning","detail":"1 rows fail F1"}]`) {
		t.Errorf("summary quality %s", q)
	}
}

// lakeState renders each table's current snapshot, watermark and rows.
func lakeState(t *testing.T, lh *catalog.Lakehouse, idents []string) []string {
	t.Helper()
	var out []string
	for _, ident := range idents {
		tbl, err := lh.LoadTable(context.Background(), ident)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s: snapshot %d, watermark %d", ident, tbl.CurrentSnapshot().SnapshotID, Watermark(tbl)))
		out = append(out, tableRows(t, lh, ident)...)
	}
	return out
}

// warehouseFiles lists every file under dir/warehouse.
func warehouseFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dir, "warehouse"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// diff is what got holds beyond want.
func diff(got, want []string) []string {
	var out []string
	for _, g := range got {
		if !slices.Contains(want, g) {
			out = append(out, g)
		}
	}
	return out
}
