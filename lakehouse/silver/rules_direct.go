package silver

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	exprrt "github.com/expr-lang/expr/vm/runtime"
)

// A rule's expression is evaluated directly on the row when every node of its checked
// program is of a shape this file knows (columns, literals, comparisons, arithmetic, the
// logical operators, ??, ?:, in, contains, startsWith, endsWith, matches with a literal
// pattern, hash(…), scalar builtins such as upper or len, a duration's Hours, Minutes,
// Seconds…): a tree of closures, each node calling the function the VM's opcode for it
// calls (expr's runtime Equal, Less, Add, …, the builtin's own function; the same type
// assertions), so a value it returns is the VM's. Anything else, a nil operand an
// operator refuses, any error or panic, makes the row's rule run on the VM instead,
// which gives its own result or error: the direct path only ever answers where it
// evaluates to completion (TestDirectMatchesVM, FuzzRuleEval). Hand-written because the
// measurement asked for it: on the taxi example (seven rules over 4M rows) the VM's
// environment map, its dispatch and the reflective call of .Minutes() took ~6 s of
// Silver's 39 s of CPU.

// directFn is one node of a directly evaluated expression.
type directFn func(c *directCtx) any

// directCtx is one row's evaluation state: the row, and each column's expression-side
// value (ruleEnvValue) once read, valid while stamp[i] == gen.
type directCtx struct {
	row   []Value
	vals  []any
	stamp []uint64
	gen   uint64
	args  []any // function calls' arguments (directApply)
}

// errDirectBail stops a direct evaluation: the rule runs on the VM.
var errDirectBail = errors.New("silver rules: direct evaluation gives way to the VM")

// size makes room for n columns.
func (c *directCtx) size(n int) {
	c.vals, c.stamp = make([]any, n), make([]uint64, n)
}

// newRow starts a row: every cached column value is stale.
func (c *directCtx) newRow(row []Value) {
	c.row = row
	c.gen++
	clear(c.args) // a call that gave way to the VM left its arguments
	c.args = c.args[:0]
}

// set records column i's new expression-side value (a rule wrote it).
func (c *directCtx) set(i int, v any) {
	c.vals[i], c.stamp[i] = v, c.gen
}

// value is column i's expression-side value as a rule of type t reads it.
func (c *directCtx) value(i int, t Type) any {
	if c.stamp[i] == c.gen {
		return c.vals[i]
	}
	v := ruleEnvValue(t, c.row[i])
	c.set(i, v)
	return v
}

// durationMethods are the time.Duration methods a rule may call directly.
var durationMethods = map[string]func(time.Duration) any{
	"Hours":        func(d time.Duration) any { return d.Hours() },
	"Minutes":      func(d time.Duration) any { return d.Minutes() },
	"Seconds":      func(d time.Duration) any { return d.Seconds() },
	"Milliseconds": func(d time.Duration) any { return d.Milliseconds() },
	"Microseconds": func(d time.Duration) any { return d.Microseconds() },
	"Nanoseconds":  func(d time.Duration) any { return d.Nanoseconds() },
}

// directFunctions are the registered functions a rule may call directly.
var directFunctions = map[string]func(...any) (any, error){hashName: ruleHash}

// compileDirect returns the direct evaluator of a checked expression, or nil when a node
// is of a shape it does not know. index and cols are the columns as the rule sees them.
func compileDirect(root ast.Node, index map[string]int, cols []ColumnSpec) directFn {
	f, ok := directNode(root, index, cols)
	if !ok {
		return nil
	}
	return f
}

func directNode(n ast.Node, index map[string]int, cols []ColumnSpec) (directFn, bool) {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		i, ok := index[n.Value]
		if !ok {
			return nil, false
		}
		t := cols[i].Type
		return func(c *directCtx) any { return c.value(i, t) }, true
	case *ast.IntegerNode: // as the compiler pushes it (IntegerNode)
		var v any
		switch t := n.Type(); {
		case t == nil || t.Kind() == reflect.Int:
			v = n.Value
		case t.Kind() == reflect.Float64:
			v = float64(n.Value)
		case t.Kind() == reflect.Int64:
			v = int64(n.Value)
		default:
			return nil, false
		}
		return directConst(v), true
	case *ast.FloatNode:
		if t := n.Type(); t != nil && t.Kind() == reflect.Float32 {
			return nil, false
		}
		return directConst(n.Value), true
	case *ast.StringNode:
		return directConst(n.Value), true
	case *ast.BoolNode:
		return directConst(n.Value), true
	case *ast.NilNode:
		return directConst(nil), true
	case *ast.ConstantNode:
		return directConst(n.Value), true
	case *ast.UnaryNode:
		return directUnary(n, index, cols)
	case *ast.BinaryNode:
		return directBinary(n, index, cols)
	case *ast.ConditionalNode:
		return directConditional(n, index, cols)
	case *ast.CallNode:
		return directCall(n, index, cols)
	case *ast.BuiltinNode:
		return directBuiltin(n, index, cols)
	}
	return nil, false
}

func directConst(v any) directFn { return func(*directCtx) any { return v } }

func directUnary(n *ast.UnaryNode, index map[string]int, cols []ColumnSpec) (directFn, bool) {
	x, ok := directNode(n.Node, index, cols)
	if !ok || !directPlain(n.Node) {
		return nil, false
	}
	switch n.Operator {
	case "!", "not":
		return func(c *directCtx) any { return !x(c).(bool) }, true
	case "+":
		return x, true
	case "-":
		return func(c *directCtx) any { return exprrt.Negate(x(c)) }, true
	}
	return nil, false
}

// directOps are the binary operators evaluated by one runtime function, as the VM's
// opcode for each (compiler.BinaryNode) evaluates them.
var directOps = map[string]func(a, b any) any{
	"<": func(a, b any) any { return exprrt.Less(a, b) }, ">": func(a, b any) any { return exprrt.More(a, b) },
	"<=": func(a, b any) any { return exprrt.LessOrEqual(a, b) }, ">=": func(a, b any) any { return exprrt.MoreOrEqual(a, b) },
	"+": exprrt.Add, "-": exprrt.Subtract, "*": exprrt.Multiply,
	"/": func(a, b any) any { return exprrt.Divide(a, b) }, "%": func(a, b any) any { return exprrt.Modulo(a, b) },
	"**": func(a, b any) any { return exprrt.Exponent(a, b) }, "^": func(a, b any) any { return exprrt.Exponent(a, b) },
}

func directBinary(n *ast.BinaryNode, index map[string]int, cols []ColumnSpec) (directFn, bool) {
	l, okl := directNode(n.Left, index, cols)
	r, okr := directNode(n.Right, index, cols)
	if !okl || !okr || !directPlain(n.Left) || !directPlain(n.Right) {
		return nil, false
	}
	switch n.Operator {
	case "==", "!=":
		eq := directEqual(n, l, r)
		if n.Operator == "!=" {
			return func(c *directCtx) any { return !eq(c).(bool) }, true
		}
		return eq, true
	case "and", "&&":
		return func(c *directCtx) any {
			if a := l(c); !a.(bool) {
				return a
			}
			return r(c)
		}, true
	case "or", "||":
		return func(c *directCtx) any {
			if a := l(c); a.(bool) {
				return a
			}
			return r(c)
		}, true
	case "??":
		return func(c *directCtx) any {
			if a := l(c); !exprrt.IsNil(a) {
				return a
			}
			return r(c)
		}, true
	case "in":
		return directIn(n, l, r), true
	case "contains", "startsWith", "endsWith": // OpContains, OpStartsWith, OpEndsWith
		f := map[string]func(string, string) bool{"contains": strings.Contains, "startsWith": strings.HasPrefix, "endsWith": strings.HasSuffix}[n.Operator]
		return func(c *directCtx) any {
			a, b := l(c), r(c)
			if exprrt.IsNil(a) || exprrt.IsNil(b) {
				return false
			}
			return f(a.(string), b.(string))
		}, true
	case "matches":
		pat, ok := n.Right.(*ast.StringNode) // OpMatchesConst; a pattern computed per row: the VM
		if !ok {
			return nil, false
		}
		re, err := regexp.Compile(pat.Value)
		if err != nil {
			return nil, false
		}
		return func(c *directCtx) any {
			a := l(c)
			if exprrt.IsNil(a) {
				return false
			}
			return re.MatchString(a.(string))
		}, true
	}
	op, ok := directOps[n.Operator]
	if !ok {
		return nil, false
	}
	return func(c *directCtx) any { return op(l(c), r(c)) }, true
}

// directIn is OpIn (runtime.In), with the set the optimizer makes of a list of string or
// integer literals looked up without reflection.
func directIn(n *ast.BinaryNode, l, r directFn) directFn {
	if k, ok := n.Right.(*ast.ConstantNode); ok {
		switch set := k.Value.(type) {
		case map[string]struct{}:
			return directSetIn(set, l)
		case map[int]struct{}:
			return directSetIn(set, l)
		}
	}
	return func(c *directCtx) any { return exprrt.In(l(c), r(c)) }
}

// directSetIn looks a needle of the set's key type up in it, any other by runtime.In.
func directSetIn[K comparable](set map[K]struct{}, l directFn) directFn {
	return func(c *directCtx) any {
		a := l(c)
		if k, ok := a.(K); ok {
			_, in := set[k]
			return in
		}
		return exprrt.In(a, set)
	}
}

// directEqual is == as compiler.equalBinaryNode compiles it: typed for two simple ints
// or strings (asserting, as OpEqualInt and OpEqualString do), else runtime.Equal.
func directEqual(n *ast.BinaryNode, l, r directFn) directFn {
	lk, rk := directKind(n.Left), directKind(n.Right)
	simple := directSimple(n.Left) && directSimple(n.Right)
	switch {
	case lk == rk && lk == reflect.Int && simple:
		return func(c *directCtx) any { return l(c).(int) == r(c).(int) }
	case lk == rk && lk == reflect.String && simple:
		return func(c *directCtx) any { return l(c).(string) == r(c).(string) }
	}
	return func(c *directCtx) any { return exprrt.Equal(l(c), r(c)) }
}

func directConditional(n *ast.ConditionalNode, index map[string]int, cols []ColumnSpec) (directFn, bool) {
	cond, ok1 := directNode(n.Cond, index, cols)
	a, ok2 := directNode(n.Exp1, index, cols)
	b, ok3 := directNode(n.Exp2, index, cols)
	if !ok1 || !ok2 || !ok3 || !directPlain(n.Cond) || !directPlain(n.Exp1) || !directPlain(n.Exp2) {
		return nil, false
	}
	return func(c *directCtx) any {
		if cond(c).(bool) {
			return a(c)
		}
		return b(c)
	}, true
}

// directCall is a call of a registered function (directFunctions) or of a duration's
// method without arguments (durationMethods); an error gives way to the VM.
func directCall(n *ast.CallNode, index map[string]int, cols []ColumnSpec) (directFn, bool) {
	switch callee := n.Callee.(type) {
	case *ast.IdentifierNode:
		fn, ok := directFunctions[callee.Value]
		if !ok {
			return nil, false
		}
		args, ok := directCallArgs(callee.Value, n.Arguments, index, cols)
		if !ok {
			return nil, false
		}
		return directApply(fn, args), true
	case *ast.MemberNode:
		prop, ok := callee.Property.(*ast.StringNode)
		if !ok || callee.Optional || len(n.Arguments) > 0 || callee.Node.Type() != reflect.TypeFor[time.Duration]() {
			return nil, false
		}
		m, ok := durationMethods[prop.Value]
		if !ok {
			return nil, false
		}
		x, ok := directNode(callee.Node, index, cols)
		if !ok {
			return nil, false
		}
		return func(c *directCtx) any { return m(x(c).(time.Duration)) }, true
	}
	return nil, false
}

// directCallArgs compiles the arguments of a call of the function name; false when name
// is also a column's (the call is not the function's) or an argument is not direct.
func directCallArgs(name string, nodes []ast.Node, index map[string]int, cols []ColumnSpec) ([]directFn, bool) {
	if _, shadowed := index[name]; shadowed {
		return nil, false
	}
	args := make([]directFn, len(nodes))
	for i, a := range nodes {
		var ok bool
		if args[i], ok = directNode(a, index, cols); !ok || !directPlain(a) {
			return nil, false
		}
	}
	return args, true
}

// directApply calls fn with the arguments' values (OpCall…); an error gives way to the VM.
func directApply(fn func(...any) (any, error), args []directFn) directFn {
	return func(c *directCtx) any {
		// The arguments go on c.args as a stack: a call among them pushes its own
		// after and pops them before this one takes its slice.
		start := len(c.args)
		for _, a := range args {
			v := a(c)
			c.args = append(c.args, v)
		}
		out, err := fn(c.args[start:]...)
		clear(c.args[start:])
		c.args = c.args[:start]
		if err != nil {
			panic(errDirectBail)
		}
		return out
	}
}

// directBuiltins are the builtins evaluated directly: scalar functions whose builtin the
// VM calls as it is (Fast: OpCallBuiltin1; Func: OpCall…), none with a memory budget.
var directBuiltins = map[string]bool{
	"len": true, "abs": true, "ceil": true, "floor": true, "round": true, "int": true, "float": true, "string": true,
	"upper": true, "lower": true, "trim": true, "trimPrefix": true, "trimSuffix": true, "replace": true,
	"indexOf": true, "lastIndexOf": true, "hasPrefix": true, "hasSuffix": true, "max": true, "min": true,
	"duration": true, "date": true,
}

// directBuiltin is a builtin's call as compiler.BuiltinNode compiles it outside its
// special cases (the predicates).
func directBuiltin(n *ast.BuiltinNode, index map[string]int, cols []ColumnSpec) (directFn, bool) {
	id, ok := builtin.Index[n.Name]
	if !ok || !directBuiltins[n.Name] || n.Map != nil {
		return nil, false
	}
	args, ok := directCallArgs(n.Name, n.Arguments, index, cols)
	if !ok {
		return nil, false
	}
	switch f := builtin.Builtins[id]; {
	case f.Fast != nil:
		if len(args) != 1 {
			return nil, false
		}
		a, fast := args[0], f.Fast
		return func(c *directCtx) any { return fast(a(c)) }, true
	case f.Safe == nil && f.Func != nil:
		return directApply(f.Func, args), true
	}
	return nil, false
}

// directPlain reports whether the VM takes a node's value as it is: not a pointer it
// would dereference (compiler.derefInNeeded).
func directPlain(n ast.Node) bool {
	t := n.Type()
	return t == nil || t.Kind() != reflect.Pointer
}

// directKind and directSimple are the compiler's kind and isSimpleType.
func directKind(n ast.Node) reflect.Kind {
	if t := n.Type(); t != nil {
		return t.Kind()
	}
	return reflect.Invalid
}

func directSimple(n ast.Node) bool {
	t := n.Type()
	return t != nil && t.PkgPath() == ""
}
