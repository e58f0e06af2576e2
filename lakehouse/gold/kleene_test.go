package gold

import (
	"testing"

	"goldbridge/lakehouse/silver"
)

// TestConditionThreeValued: a mart filter or measure condition over a NULL column (a
// LEFT JOIN without a match) is true exactly where SQL's WHERE or countIf takes the row:
// unknown OR true is true, unknown AND false is false, NOT unknown is unknown.
func TestConditionThreeValued(t *testing.T) {
	cols := map[string]silver.Type{"segment": {Kind: silver.String}, "amount": {Kind: silver.Float64}}
	null := silver.Value{Null: true}
	for _, tc := range []struct {
		expr    string
		segment silver.Value
		amount  float64
		want    bool // the SQL outcome
	}{
		{`segment == "vip" || amount >= 150`, null, 200, true},
		{`segment == "vip" || amount >= 150`, null, 100, false},
		{`amount >= 150 or segment == "vip"`, null, 200, true},
		{`segment != "vip" || amount < 50`, null, 20, true},
		{`segment != "vip" || amount < 50`, silver.Value{S: "vip"}, 20, true},
		{`segment != "vip" || amount < 50`, silver.Value{S: "vip"}, 80, false},
		{`not (segment == "vip" && amount > 100)`, null, 50, true}, // NOT (NULL AND false)
		{`not (segment == "vip" && amount > 100)`, null, 150, false},
		{`not (segment == "vip")`, null, 0, false},
		{`!(segment == "vip" || amount > 100)`, null, 150, false},
		{`!(segment == "vip" || amount > 100)`, null, 50, false},
		{`segment == "vip" && amount > 100`, null, 150, false},
		{`(segment == "new" || amount > 100) && not (amount > 500)`, null, 150, true},
		{`segment == nil || segment == "vip"`, null, 0, true},
		{`(segment ?? "none") == "none"`, null, 0, true},
		{`segment != "new"`, null, 0, false},
		{`segment in ["vip"] or amount > 1`, null, 2, true},
		{`not (segment in ["vip"])`, null, 2, false},
		{`segment not in ["vip"]`, null, 2, false},
		{`not (segment startsWith "v")`, null, 2, false},
		{`not (segment contains "v")`, null, 2, false},
		{`not (segment matches "v")`, null, 2, false},
		{`not (amount > 1)`, silver.Value{S: "vip"}, 2, false},
	} {
		rf, err := compileExpr("filter", tc.expr, cols)
		if err != nil {
			t.Fatal(err)
		}
		row := map[string]silver.Value{"segment": tc.segment, "amount": {F: tc.amount}}
		at := func(i int) silver.Value { return row[rf.names[i]] }
		slots := make([]int, len(rf.names))
		types := make([]silver.Type, len(rf.names))
		for i, n := range rf.names {
			slots[i], types[i] = i, cols[n]
		}
		got, err := rf.test(at, slots, types)
		if err != nil || got != tc.want {
			t.Errorf("%s with segment %v, amount %v: %v %v, want %v", tc.expr, tc.segment, tc.amount, got, err, tc.want)
		}
	}
}
