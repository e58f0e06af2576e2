package silver

import (
	"github.com/expr-lang/expr/ast"
)

// cmpFilter is a filter rule of the form <numeric column> <comparison> <number literal>
// (amount >= 0, qty < 1000): the usual shape of a validity rule. It is evaluated on the
// typed cell, without the expression VM and its environment, with the VM's result: the
// cell is compared as the environment would present it (an integer column as int, a
// decimal as float64), mixed int/float comparisons in float64. A NULL cell passes only
// where the VM's generic equality says nil != <number> (a float or decimal column, or an
// integer one against a fractional literal); elsewhere the VM's comparison with nil fails
// or is false (docs/expressions.md, "NULL semantics"). FuzzRuleEval holds it to the VM.
type cmpFilter struct {
	col   int
	kind  Kind  // the column's
	scale int32 // the column's, for a decimal
	op    cmpOp
	lit   float64
	ilit  int
	isInt bool // the literal is an integer
}

// cmpOp is a comparison operator, resolved once when the rule is compiled.
type cmpOp uint8

const (
	opGE cmpOp = iota
	opGT
	opLE
	opLT
	opEQ
	opNE
)

var cmpOps = map[string]cmpOp{">=": opGE, ">": opGT, "<=": opLE, "<": opLT, "==": opEQ, "!=": opNE}

// newCmpFilter returns the cmpFilter a compiled filter expression is, or nil.
func newCmpFilter(root ast.Node, index map[string]int, cols []ColumnSpec) *cmpFilter {
	b, ok := root.(*ast.BinaryNode)
	if !ok {
		return nil
	}
	op, ok := cmpOps[b.Operator]
	if !ok {
		return nil
	}
	id, ok := b.Left.(*ast.IdentifierNode)
	if !ok {
		return nil
	}
	col, ok := index[id.Value]
	if !ok {
		return nil
	}
	t := cols[col].Type
	switch t.Kind {
	case Int32, Int64, Float64, Decimal:
	default:
		return nil
	}
	f := &cmpFilter{col: col, kind: t.Kind, scale: int32(t.Scale), op: op}
	switch lit := b.Right.(type) {
	case *ast.IntegerNode:
		f.ilit, f.lit, f.isInt = lit.Value, float64(lit.Value), true
	case *ast.FloatNode:
		f.lit = lit.Value
	default:
		return nil
	}
	return f
}

// pass evaluates the filter on the row's cell.
func (f *cmpFilter) pass(row []Value) bool {
	v := row[f.col]
	if v.Null {
		// OpEqualInt (an integer column and literal) asserts its operands and fails on nil;
		// OpEqual (runtime.Equal) says nil equals no number.
		return f.op == opNE && !(f.isInt && (f.kind == Int32 || f.kind == Int64))
	}
	switch f.kind {
	case Int32, Int64:
		if f.isInt {
			return compare(int(v.I), f.ilit, f.op)
		}
		return compare(float64(int(v.I)), f.lit, f.op)
	case Float64:
		return compare(v.F, f.lit, f.op)
	case Decimal:
		return compare(v.D.ToFloat64(f.scale), f.lit, f.op)
	}
	return false
}

func compare[T int | float64](a, b T, op cmpOp) bool {
	switch op {
	case opGE:
		return a >= b
	case opGT:
		return a > b
	case opLE:
		return a <= b
	case opLT:
		return a < b
	case opEQ:
		return a == b
	}
	return a != b
}
