package silver

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// TestCmpFilterMatchesVM checks that the filters taken by cmpFilter decide every row
// as the expression VM does, and that other shapes stay with the VM.
func TestCmpFilterMatchesVM(t *testing.T) {
	cols := []ColumnSpec{
		{Name: "i", Type: Type{Kind: Int64}},
		{Name: "s", Type: Type{Kind: Int32}},
		{Name: "f", Type: Type{Kind: Float64}},
		{Name: "d", Type: Type{Kind: Decimal, Precision: 18, Scale: 2}},
		{Name: "name", Type: Type{Kind: String}},
	}
	var fast []string
	for _, c := range []string{"i", "s", "f", "d"} {
		for _, op := range []string{">=", ">", "<=", "<", "==", "!="} {
			for _, lit := range []string{"0", "3", "-2", "2.5", "-0.5", "1e0"} {
				fast = append(fast, c+" "+op+" "+lit)
			}
		}
	}
	slow := []string{"0 <= i", "i + 1 > 0", "name == 'x'", "i > f", "i >= 0 && f >= 0", "not (i > 0)", "i in [1, 2]"}
	rng := rand.New(rand.NewPCG(5, 6))
	value := func(k Kind) Value {
		if rng.IntN(8) == 0 {
			return Value{Null: true}
		}
		n := int64(rng.IntN(11) - 5) // near the literals, so equality happens
		switch k {
		case Float64:
			return Value{F: float64(n) / 2}
		case Decimal:
			return Value{D: decimal128.FromI64(n * 50)} // n/2 at scale 2
		}
		return Value{I: n}
	}
	mixed := 0
	for _, expr := range append(fast, slow...) {
		rs, _, err := compileRules([]RuleSpec{{ID: "R", Kind: "filter", Expr: expr}}, cols, nil)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if taken, want := rs.rules[0].cmp != nil, slices.Contains(fast, expr); taken != want {
			t.Fatalf("%s: cmpFilter %v, want %v", expr, taken, want)
		}
		// The same rule on the VM alone.
		vmSet := vmOnly(rs)
		rejected := 0
		for range 400 {
			row := make([]Value, len(cols))
			for i, c := range cols {
				row[i] = value(c.Type.Kind)
			}
			row[4] = Value{S: "x"}
			got, want := rs.apply(slices.Clone(row)), vmSet.apply(slices.Clone(row))
			if got != want {
				t.Fatalf("%s on %+v: %q, the VM says %q", expr, row[:4], got, want)
			}
			var viol []string
			rs.violations(row, func(id string) { viol = append(viol, id) })
			if (len(viol) > 0) != (want != "") {
				t.Fatalf("%s on %+v: violations %v, the VM rejects %q", expr, row[:4], viol, want)
			}
			if want != "" {
				rejected++
			}
		}
		if rejected > 50 && rejected < 350 {
			mixed++
		}
	}
	if mixed < len(fast)/2 {
		t.Fatalf("only %d expressions both passed and rejected many rows; the test proves little", mixed)
	}
}
