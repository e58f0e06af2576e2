package silver

import (
	"context"
	"slices"
	"testing"

	"goldbridge/lakehouse/lakehousetest"
)

// TestDerivedKey is issue 19's "Why" 1: trips have no key, so one is derived with hash()
// and the anti-join deduplicates on it, with no string copies of the float columns and
// no composite key in the schema. The oracle is the documented digest written out.
func TestDerivedKey(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	ty := func(s string) Type { x, _ := ParseType(s); return x }
	spec := EntitySpec{
		Name: "trips", Table: "silver.trips", QuarantineTable: "silver.trips_quarantine",
		Mode: ModeAppend, Key: []string{"trip_key"}, EventTime: "pickup", Buckets: 4,
		Columns: []ColumnSpec{
			{Name: "vendor", Path: "$.vendor", Type: ty("int64")},
			{Name: "pickup", Path: "$.pickup", Type: ty("timestamp"), Required: true},
			{Name: "fare", Path: "$.fare", Type: ty("float64")},
		},
		Rules:             []RuleSpec{{ID: "E0", Kind: "derive", Column: "trip_key", Type: "string", Expr: "hash(vendor, pickup, fare)"}},
		WarnQuarantinePct: 50, WarnDuplicatePct: 90,
	}
	writeLanding(t, landing, "1.jsonl",
		`{"vendor":1,"pickup":"2024-01-01T00:10:00Z","fare":12.5}`,
		`{"vendor":1,"pickup":"2024-01-01T00:10:00Z","fare":12.5}`, // delivered twice
		`{"vendor":null,"pickup":"2024-01-01T00:10:00Z","fare":12.5}`,
		`{"vendor":2,"pickup":"2024-01-01T01:00:00+01:00","fare":7}`,
	)
	ingestInto(t, lh, "bronze.trips", landing)
	res, err := Run(ctx, lh, spec, "bronze.trips", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Read: 4, Current: 3, Inserted: 3, Duplicates: 1}); res.Counts != want {
		t.Fatalf("counts %+v, want %+v", res.Counts, want)
	}
	want := []string{
		oracleHash("1:1,30:2024-01-01T00:10:00.000000000Z,4:12.5"),
		oracleHash("-,30:2024-01-01T00:10:00.000000000Z,4:12.5"),
		oracleHash("1:2,30:2024-01-01T00:00:00.000000000Z,1:7"),
	}
	slices.Sort(want)
	got := colValues(tableRows(t, lh, spec.Table, appendSkip...), "trip_key")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("trip keys %v, want %v", got, want)
	}
	// A re-delivery in a later landing is a duplicate of the stored trip.
	writeLanding(t, landing, "2.jsonl", `{"vendor":2,"pickup":"2024-01-01T00:00:00Z","fare":7.0}`)
	ingestInto(t, lh, "bronze.trips", landing)
	if res, err = Run(ctx, lh, spec, "bronze.trips", Options{}); err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Read: 1, Duplicates: 1}); res.Counts != want {
		t.Fatalf("run 2 counts %+v, want %+v", res.Counts, want)
	}
}
