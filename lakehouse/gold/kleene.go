package gold

import (
	"fmt"
	"slices"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// tri is a truth value of SQL's three-valued logic.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

// kleene is a mart filter or measure condition split at its and, or and not, each
// leaf compiled on its own: when a column it reads is NULL, it is evaluated as SQL does (unknown OR true is true, unknown AND false is false, NOT
// unknown is unknown), a leaf that fails on a NULL input being unknown.
type kleene struct {
	op    string // "and", "or", "not", or "" for a leaf
	kids  []*kleene
	prog  *vm.Program
	names []int // the leaf's columns, as indexes into rowFilter.names
	// strict are the leaf's columns that are an operand of its comparison, in or string
	// operator: NULL there makes the leaf unknown (expr says false to nil in ["a"]).
	strict []int
}

// strictOps are the operators that yield NULL on a NULL operand in SQL (== and != but
// against the nil literal).
var strictOps = []string{"==", "!=", "<", "<=", ">", ">=", "in", "contains", "startsWith", "endsWith", "matches"}

// compileKleene splits the expression tree n (nil when its root is no and, or or not:
// then a NULL input that makes it fail or false is the same as unknown).
func compileKleene(n ast.Node, env map[string]any, names []string) (*kleene, error) {
	if op := kleeneOp(n); op == "" {
		return nil, nil
	}
	return compileKleeneNode(n, env, names)
}

func kleeneOp(n ast.Node) string {
	switch n := n.(type) {
	case *ast.BinaryNode:
		switch n.Operator {
		case "&&", "and":
			return "and"
		case "||", "or":
			return "or"
		}
	case *ast.UnaryNode:
		if n.Operator == "!" || n.Operator == "not" {
			return "not"
		}
	}
	return ""
}

func compileKleeneNode(n ast.Node, env map[string]any, names []string) (*kleene, error) {
	k := &kleene{op: kleeneOp(n)}
	var kids []ast.Node
	switch n := n.(type) {
	case *ast.BinaryNode:
		kids = []ast.Node{n.Left, n.Right}
	case *ast.UnaryNode:
		kids = []ast.Node{n.Node}
	}
	if k.op != "" {
		for _, c := range kids {
			kc, err := compileKleeneNode(c, env, names)
			if err != nil {
				return nil, err
			}
			k.kids = append(k.kids, kc)
		}
		return k, nil
	}
	src := n.String()
	prog, err := expr.Compile(src, expr.Env(env), expr.AsBool())
	if err != nil {
		return nil, fmt.Errorf("operand %q: %w", src, err)
	}
	k.prog = prog
	if b, ok := n.(*ast.BinaryNode); ok && slices.Contains(strictOps, b.Operator) {
		_, ln := b.Left.(*ast.NilNode)
		_, rn := b.Right.(*ast.NilNode)
		for _, side := range []ast.Node{b.Left, b.Right} {
			if id, ok := side.(*ast.IdentifierNode); ok && !ln && !rn {
				if i := slices.Index(names, id.Value); i >= 0 {
					k.strict = append(k.strict, i)
				}
			}
		}
	}
	ast.Find(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.IdentifierNode); ok {
			if i := slices.Index(names, id.Value); i >= 0 && !slices.Contains(k.names, i) {
				k.names = append(k.names, i)
			}
		}
		return false
	})
	return k, nil
}

// eval evaluates k on env (null[i]: rowFilter.names[i] is NULL in this row).
func (k *kleene) eval(m *vm.VM, env map[string]any, null []bool) (tri, error) {
	switch k.op {
	case "":
		if slices.ContainsFunc(k.strict, func(i int) bool { return null[i] }) {
			return triUnknown, nil
		}
		out, err := m.Run(k.prog, env)
		if err != nil {
			if slices.ContainsFunc(k.names, func(i int) bool { return null[i] }) {
				return triUnknown, nil
			}
			return triFalse, err
		}
		switch out {
		case true:
			return triTrue, nil
		case false:
			return triFalse, nil
		}
		return triUnknown, nil
	case "not":
		v, err := k.kids[0].eval(m, env, null)
		switch {
		case err != nil || v == triUnknown:
			return v, err
		case v == triTrue:
			return triFalse, nil
		}
		return triTrue, nil
	}
	// and, or: the dominant value (false for and, true for or) wins over unknown.
	dominant := triFalse
	if k.op == "or" {
		dominant = triTrue
	}
	out := triTrue - dominant // the neutral value
	for _, c := range k.kids {
		v, err := c.eval(m, env, null)
		if err != nil {
			return triFalse, err
		}
		if v == dominant {
			return v, nil
		}
		if v == triUnknown {
			out = triUnknown
		}
	}
	return out, nil
}
