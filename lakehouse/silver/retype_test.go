package silver

import (
	"context"
	"slices"
	"strings"
	"testing"

	"goldbridge/lakehouse/lakehousetest"
)

// TestNormalizeRetypes is issue 19's "Why" 4 (the rule part): the course's N1,
// "passenger_count DOUBLE -> INT, NULL -> 0", is one normalize rule with a type. The
// column is read as the source has it (2.0), leaves Silver as an int; a fractional value
// is the rule's quarantine reason. A filter before the rule sees the double.
func TestNormalizeRetypes(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	ty := func(s string) Type { x, _ := ParseType(s); return x }
	spec := EntitySpec{
		Name: "trips", Table: "silver.trips", QuarantineTable: "silver.trips_quarantine",
		Mode: ModeAppend, Key: []string{"id"}, Buckets: 4,
		Columns: []ColumnSpec{
			{Name: "id", Path: "$.id", Type: ty("string")},
			{Name: "passenger_count", Path: "$.pc", Type: ty("float64")},
		},
		Rules: []RuleSpec{
			{ID: "F9", Kind: "filter", Expr: "passenger_count == nil || passenger_count < 9.5", Reason: "too_many"},
			{ID: "N1", Kind: "normalize", Column: "passenger_count", Type: "int32", Expr: "passenger_count ?? 0"},
			{ID: "F8", Kind: "filter", Expr: "passenger_count != 7", Reason: "seven"},
		},
		WarnQuarantinePct: 90, WarnDuplicatePct: 90,
	}
	writeLanding(t, landing, "1.jsonl",
		`{"id":"a","pc":2.0}`, `{"id":"b","pc":null}`, `{"id":"c","pc":2.5}`,
		`{"id":"d","pc":9.7}`, `{"id":"e","pc":"3"}`, `{"id":"f","pc":7}`)
	ingestInto(t, lh, "bronze.trips", landing)
	res, err := Run(ctx, lh, spec, "bronze.trips", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Read: 6, Current: 3, Inserted: 3, Quarantined: 3}); res.Counts != want {
		t.Fatalf("counts %+v, want %+v", res.Counts, want)
	}
	got := tableRows(t, lh, spec.Table, appendSkip...)
	if want := []string{"id=a|passenger_count=2", "id=b|passenger_count=0", "id=e|passenger_count=3"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	tbl, err := lh.LoadTable(ctx, spec.Table)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := tbl.Schema().FindFieldByName("passenger_count"); !ok || f.Type.String() != "int" {
		t.Fatalf("passenger_count is %v in Silver, want int", f.Type)
	}
	reasons := strings.Join(colValues(tableRows(t, lh, spec.QuarantineTable), QColReason), ",")
	for _, want := range []string{"N1:normalize_failed", "F9:too_many", "F8:seven"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("quarantine reasons %s lack %s", reasons, want)
		}
	}
	// One column is retyped by one rule.
	spec.Rules = append(spec.Rules, RuleSpec{ID: "N2", Kind: "normalize", Column: "passenger_count", Type: "int64", Expr: "passenger_count"})
	if _, _, err := compileRules(spec.Rules, spec.Columns, nil); err == nil || !strings.Contains(err.Error(), "retyped by an earlier rule") {
		t.Fatalf("second retype: %v", err)
	}
}

// TestCSVEmptyIsNull is issue 19's "Why" 4 (the CSV part): in a CSV landing file an empty
// field is NULL before typing (sources.<name>.csv.null_values, default [""]), so a column's
// default and a rule's ?? fire, and "4.0" of a DOUBLE column becomes the int 4 through the
// course's N1. Before, every row with an empty field was invalid_<column>.
func TestCSVEmptyIsNull(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	ty := func(s string) Type { x, _ := ParseType(s); return x }
	none := "none"
	spec := EntitySpec{
		Name: "trips", Table: "silver.trips", QuarantineTable: "silver.trips_quarantine",
		Mode: ModeAppend, Key: []string{"id"}, Buckets: 4,
		Columns: []ColumnSpec{
			{Name: "id", Path: "$.id", Type: ty("string")},
			{Name: "passenger_count", Path: "$.passenger_count", Type: ty("float64")},
			{Name: "store_and_fwd_flag", Path: "$.store_and_fwd_flag", Type: ty("string"), Default: &none},
			{Name: "fare", Path: "$.fare", Type: ty("decimal(10,2)")},
		},
		Rules: []RuleSpec{
			{ID: "N1", Kind: "normalize", Column: "passenger_count", Type: "int32", Expr: "passenger_count ?? 0"},
		},
		WarnQuarantinePct: 90, WarnDuplicatePct: 90,
	}
	writeLanding(t, landing, "1.csv", "id,passenger_count,store_and_fwd_flag,fare",
		"a,4.0,N,1.50", "b,,,", `c,2,"",`, "d,x,Y,2")
	ingestInto(t, lh, "bronze.trips", landing)
	res, err := Run(ctx, lh, spec, "bronze.trips", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Read: 4, Current: 3, Inserted: 3, Quarantined: 1}); res.Counts != want {
		t.Fatalf("counts %+v, want %+v", res.Counts, want)
	}
	got := tableRows(t, lh, spec.Table, appendSkip...)
	want := []string{
		"id=a|passenger_count=4|store_and_fwd_flag=N|fare=1.50",
		"id=b|passenger_count=0|store_and_fwd_flag=none|fare=NULL",
		"id=c|passenger_count=2|store_and_fwd_flag=none|fare=NULL",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	reasons := colValues(tableRows(t, lh, spec.QuarantineTable), QColReason)
	if len(reasons) != 1 || !strings.HasPrefix(reasons[0], `invalid_passenger_count: not a number "x"`) {
		t.Fatalf("quarantine reasons %q", reasons)
	}
}
