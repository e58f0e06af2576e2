package silver

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// vmOnly is rs with every expression on the VM: the oracle the direct path is held to
// (expr's own evaluator).
func vmOnly(rs *ruleSet) *ruleSet {
	c := rs.clone()
	c.rules = slices.Clone(rs.rules)
	for k := range c.rules {
		c.rules[k].cmp, c.rules[k].direct = nil, nil
	}
	c.inEnv = slices.Clone(rs.inEnv)
	for _, r := range rs.rules {
		if r.cmp != nil {
			for _, i := range r.refs {
				c.inEnv[i] = true // a cmpFilter's column, now read from the environment
			}
		}
	}
	c.env = maps.Clone(rs.env)
	return c
}

// directCols are columns of every kind an expression reads.
var directCols = []ColumnSpec{
	{Name: "i", Type: Type{Kind: Int64}},
	{Name: "n", Type: Type{Kind: Int32}},
	{Name: "f", Type: Type{Kind: Float64}},
	{Name: "d", Type: Type{Kind: Decimal, Precision: 10, Scale: 2}},
	{Name: "s", Type: Type{Kind: String}},
	{Name: "b", Type: Type{Kind: Bool}},
	{Name: "ts", Type: Type{Kind: Timestamp}},
	{Name: "ts2", Type: Type{Kind: Timestamp}},
	{Name: "dt", Type: Type{Kind: Date}},
}

func TestDirectCompiles(t *testing.T) {
	for _, c := range []struct {
		expr   string
		direct bool
	}{
		{"f >= 0", true},
		{`ts >= date("2024-01-01") && ts < date("2025-01-01")`, true},
		{"f ?? 0", true},
		{"(ts2 - ts).Minutes()", true},
		{"hash(i, ts, ts2, f, d, s)", true},
		{`b ? s : "none"`, true},
		{"-i % 7 == 3 || !(f / 2 > 1.5)", true},
		{`s != "x" and n ** 2 < 10`, true},
		{"upper(s) == \"A\"", true},       // a scalar builtin
		{"len(trim(s)) > 2", true},        // the same
		{`len(split(s, ",")) > 2`, false}, // a builtin making a list: the VM
		{`repeat(s, 2) == ""`, false},     // goldbridge's bounded repeat: the VM
		{"ts.Year() == 2024", false},      // a time's method: the VM
		{`(ts2 - ts).String() != ""`, false},
		{`s in ["a", "b"]`, true},
		{"n in [1, 2]", true},
		{`s contains "b" || s startsWith "a" || s endsWith "c"`, true},
		{`s matches "^a+$"`, true},
		{`s matches s`, false}, // a pattern per row: the VM
		{"i in 1..3", true},    // expr's optimizer makes it i >= 1 && i <= 3
	} {
		rs, _, err := compileRules([]RuleSpec{{ID: "R", Kind: "filter", Expr: c.expr}}, directCols, nil)
		if err != nil {
			rs, _, err = compileRules([]RuleSpec{{ID: "R", Kind: "derive", Column: "x", Type: "float64", Expr: c.expr}}, directCols, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := rs.rules[0].direct != nil; got != c.direct {
			t.Errorf("%s: direct %v, want %v", c.expr, got, c.direct)
		}
	}
}

// TestDirectMatchesVM applies random registries (filters, normalizes that retype,
// derives read by later rules, rules only the VM evaluates between them) to random rows
// with NULLs, zeros and extremes, directly and on the VM alone: the same reason, the
// same cells and the same violations of the finished row, row by row.
func TestDirectMatchesVM(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 7))
	sets, rows, directRules := 0, 0, 0
	for sets < 400 {
		specs := randomRules(rng)
		rs, extra, err := compileRules(specs, directCols, nil)
		if err != nil {
			continue // a random expression of the wrong type: not this test's subject
		}
		sets++
		for _, r := range rs.rules {
			if r.direct != nil {
				directRules++
			}
		}
		vm := vmOnly(rs)
		for range 60 {
			row := randomDirectRow(rng, len(extra))
			a, b := slices.Clone(row), slices.Clone(row)
			got, want := rs.apply(a), vm.apply(b)
			if got != want || fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("rules %v\non %v:\ndirect %q %v\nVM     %q %v", specs, row, got, a, want, b)
			}
			// The quality report's row level: every filter on the finished row.
			var dv, vv []string
			rs.violations(a, func(id string) { dv = append(dv, id) })
			vm.violations(b, func(id string) { vv = append(vv, id) })
			if !slices.Equal(dv, vv) {
				t.Fatalf("rules %v\non the finished row %v: violations %v, on the VM alone %v", specs, a, dv, vv)
			}
			rows++
		}
	}
	if directRules < sets { // the generator must mostly make rules the direct path takes
		t.Fatalf("only %d direct rules in %d sets", directRules, sets)
	}
	t.Logf("%d registries, %d rows, %d rules evaluated directly", sets, rows, directRules)
}

// randomRules is a registry of 1–5 rules over directCols: each a filter, a normalize
// (sometimes retyping f to int32) or a derive of a new column that later rules may read.
func randomRules(rng *rand.Rand) []RuleSpec {
	g := exprGen{rng: rng, nums: []string{"i", "n", "f", "d"}}
	var specs []RuleSpec
	retyped := false
	if rng.IntN(3) == 0 { // a filter reading f before f is retyped: on the finished row, f is an int32
		retyped = true
		specs = append(specs, RuleSpec{ID: "P0", Kind: "filter", Expr: "(f ?? 1) " + g.pick("<", ">=", "!=") + " " + g.num(1), Reason: "p"},
			RuleSpec{ID: "P1", Kind: "normalize", Column: "f", Type: "int32", Expr: "f ?? 0"})
	}
	for k := range 1 + rng.IntN(5) {
		id := fmt.Sprintf("R%d", k)
		switch rng.IntN(4) {
		case 0:
			specs = append(specs, RuleSpec{ID: id, Kind: "filter", Expr: g.boolean(3), Reason: "r"})
		case 1:
			if !retyped && rng.IntN(2) == 0 {
				retyped = true
				specs = append(specs, RuleSpec{ID: id, Kind: "normalize", Column: "f", Type: "int32", Expr: "f ?? " + g.pick("0", "-1", "i ?? 3")})
				continue
			}
			specs = append(specs, RuleSpec{ID: id, Kind: "normalize", Column: "s", Expr: g.str(2)})
		case 2:
			col := fmt.Sprintf("x%d", k)
			specs = append(specs, RuleSpec{ID: id, Kind: "derive", Column: col, Type: "float64", Expr: g.num(3)})
			g.nums = append(g.nums, col)
		default:
			col := fmt.Sprintf("y%d", k)
			specs = append(specs, RuleSpec{ID: id, Kind: "derive", Column: col, Type: "string", Expr: g.str(3)})
			g.strs = append(g.strs, col)
		}
	}
	return specs
}

// exprGen writes random expressions, mostly well typed, some only the VM evaluates.
type exprGen struct {
	rng        *rand.Rand
	nums, strs []string // columns of each kind (derived ones added)
}

func (g *exprGen) pick(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

func (g *exprGen) num(depth int) string {
	if depth == 0 || g.rng.IntN(4) == 0 {
		return g.pick(g.pick(g.nums...), "0", "2", "-3", "1.5", "1e300", "0.1")
	}
	switch g.rng.IntN(9) {
	case 0, 1:
		return "(" + g.num(depth-1) + " " + g.pick("+", "-", "*", "/", "%", "**") + " " + g.num(depth-1) + ")"
	case 2:
		return "-" + g.num(depth-1)
	case 3:
		return "(" + g.num(depth-1) + " ?? " + g.num(depth-1) + ")"
	case 4:
		return "(" + g.boolean(depth-1) + " ? " + g.num(depth-1) + " : " + g.num(depth-1) + ")"
	case 5:
		return "(ts2 - ts)." + g.pick("Minutes", "Hours", "Seconds", "Milliseconds") + "()"
	case 6:
		return g.pick("len(", "float(", "int(") + g.str(depth-1) + ")"
	case 7:
		return "ts.Year()" // the VM's
	}
	return g.pick("abs(", "round(", "-int(", "max(2, ") + g.num(depth-1) + ")"
}

func (g *exprGen) boolean(depth int) string {
	if depth == 0 || g.rng.IntN(5) == 0 {
		return g.pick("b", "true", "(b ?? false)")
	}
	switch g.rng.IntN(10) {
	case 0, 1:
		return g.num(depth-1) + " " + g.pick("<", ">", "<=", ">=", "==", "!=") + " " + g.num(depth-1)
	case 2:
		return g.boolean(depth-1) + " " + g.pick("&&", "||", "and", "or") + " " + g.boolean(depth-1)
	case 3:
		return "!(" + g.boolean(depth-1) + ")"
	case 4:
		return g.str(depth-1) + " " + g.pick("==", "!=") + " " + g.str(depth-1)
	case 5:
		return "ts " + g.pick(">=", "<", "==") + " " + g.pick(`date("2024-01-01")`, "ts2", "dt")
	case 6:
		return g.pick(`(ts2 - ts) > duration("1h")`, `len(split(s, "")) > 1`) // the second the VM's
	case 7:
		return g.str(depth-1) + " " + g.pick("startsWith", "endsWith", "contains") + " " + g.str(depth-1)
	case 8:
		return g.pick("s", "(s ?? nil)", g.str(depth-1)) + g.pick(` in ["a", "abc", ""]`, ` in ["a"]`, ` matches "^a"`, ` matches "b$"`, " matches s")
	}
	return g.pick("i", "n", "(i ?? n)", "f") + g.pick(" in [0, 1, 3]", " in [1.5, 3]", " in 1..3")
}

func (g *exprGen) str(depth int) string {
	if depth == 0 || g.rng.IntN(4) == 0 {
		return g.pick(append([]string{"s", `"a"`, `""`}, g.strs...)...)
	}
	switch g.rng.IntN(5) {
	case 0:
		return g.str(depth-1) + " + " + g.str(depth-1)
	case 1:
		return "(" + g.str(depth-1) + " ?? \"none\")"
	case 2:
		return "hash(" + strings.Join([]string{g.pick("i", "f", "d", "ts", "b", "dt"), g.str(depth - 1), g.num(depth - 1)}[:1+g.rng.IntN(3)], ", ") + ")"
	case 3:
		return "(" + g.boolean(depth-1) + " ? " + g.str(depth-1) + " : " + g.str(depth-1) + ")"
	}
	if g.rng.IntN(3) == 0 {
		return "repeat(" + g.str(depth-1) + ", 2)" // the VM's
	}
	return g.pick("upper(", "lower(", "trim(", "string(") + g.str(depth-1) + ")"
}

// randomDirectRow is a row of directCols (plus extra cells): ~20% NULLs, zeros and
// extremes among the values.
func randomDirectRow(rng *rand.Rand, extra int) []Value {
	row := make([]Value, len(directCols)+extra)
	for i := range row {
		row[i] = Value{Null: true}
	}
	for i, c := range directCols {
		if rng.IntN(5) == 0 {
			continue
		}
		switch c.Type.Kind {
		case Int64:
			row[i] = Value{I: []int64{0, 1, -7, 3, math.MaxInt64, math.MinInt64}[rng.IntN(6)]}
		case Int32:
			row[i] = Value{I: int64(rng.IntN(5) - 2)}
		case Float64:
			row[i] = Value{F: []float64{0, 1.5, -2.25, 1e308, math.Inf(1), 3}[rng.IntN(6)]}
		case Decimal:
			row[i] = Value{D: decimal128.FromI64(int64(rng.IntN(2001) - 1000))}
		case String:
			row[i] = Value{S: []string{"", "a", "abc", "ÿ"}[rng.IntN(4)]}
		case Bool:
			row[i] = Value{B: rng.IntN(2) == 0}
		case Timestamp:
			row[i] = Value{I: 1704067200_000000 + int64(rng.IntN(4))*5400_000000}
		case Date:
			row[i] = Value{I: 19723 + int64(rng.IntN(3))}
		}
	}
	return row
}

// BenchmarkTaxiRules applies the taxi example's expression rules (F3, N1-N4, E1, E0) to
// 4096 rows per op, directly and on the VM alone.
func BenchmarkTaxiRules(b *testing.B) {
	specs := []RuleSpec{
		{ID: "F3", Kind: "filter", Expr: `ts >= date("2024-01-01") && ts < date("2025-01-01")`, Reason: "out_of_range"},
		{ID: "N1", Kind: "normalize", Column: "f", Type: "int32", Expr: "f ?? 0"},
		{ID: "N2", Kind: "normalize", Column: "n", Expr: "n ?? 99"},
		{ID: "N3", Kind: "normalize", Column: "d", Expr: "d ?? 0.0"},
		{ID: "N4", Kind: "normalize", Column: "i", Expr: "i ?? 0"},
		{ID: "E1", Kind: "derive", Column: "minutes", Type: "float64", Expr: "(ts2 - ts).Minutes()"},
		{ID: "E0", Kind: "derive", Column: "key", Type: "string", Expr: "hash(i, ts, ts2, n, d, s)"},
	}
	rs, extra, err := compileRules(specs, directCols, nil)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pool := make([][]Value, 4096)
	for i := range pool {
		pool[i] = randomDirectRow(rng, len(extra))
		pool[i][6], pool[i][7] = Value{I: 1704067200_000000 + int64(i)*60_000000}, Value{I: 1704067200_000000 + int64(i)*90_000000}
		pool[i][2] = Value{F: 2}
	}
	for _, c := range []struct {
		name string
		rs   *ruleSet
	}{{"direct", rs}, {"vm", vmOnly(rs)}} {
		b.Run(c.name, func(b *testing.B) {
			row := make([]Value, len(pool[0]))
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range pool {
					copy(row, p)
					c.rs.apply(row)
				}
			}
		})
	}
}
