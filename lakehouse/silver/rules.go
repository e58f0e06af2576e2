package silver

// The rules registry of an entity: filter (F*), normalize (N*) and enrichment (E*: derive
// and lookup) rules, written down in the config before any code runs, compiled once with
// expr-lang/expr and applied to every typed row in registry order.
//
// Expression environment. Each column is visible by name with a Go value:
//
//	string            string
//	int32, int64      int (expr's integer type)
//	float64           float64
//	decimal(p,s)      float64 — decimal rules compare as float64, not exactly
//	bool              bool
//	date, timestamp   time.Time in UTC (a date is its midnight UTC)
//	NULL              nil
//
// Date literals without a zone (`date("2024-01-01")`) are UTC, and now() is disabled: Silver must
// be rebuildable from Bronze with the same result, so no rule may depend on the clock.
//
// NULL follows SQL. A filter that does not evaluate to true — false, NULL (`amount >= 0`
// on a NULL amount is a runtime error in expr, and NULL in SQL), an error or a non-bool —
// quarantines the row with "<id>:<reason>"; write `amount == nil || amount >= 0` or
// `(amount ?? 0) >= 0` to let NULLs through. Normalize and derive follow "NULL in, NULL
// out" (upper(NULL) is NULL in SQL): an expression that reads a NULL column yields NULL
// without being evaluated, unless it handles nil itself (nil, ??, ?.) or may skip a
// column (a conditional, &&, ||, a closure, $env); such an expression is evaluated, and if
// it then fails while a column it reads is NULL the result is NULL too. Any other runtime
// failure quarantines the row with "<id>:<error class>" (division_by_zero, type_error,
// out_of_range, memory_budget_exceeded, eval_error); a result that does not convert to
// the column's type quarantines it with "<id>:<reason>" (default <kind>_failed).
import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	exprparser "github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

type ruleKind uint8

const (
	ruleFilter ruleKind = iota
	ruleNormalize
	ruleDerive
	ruleLookup
)

var ruleKinds = map[string]ruleKind{"filter": ruleFilter, "normalize": ruleNormalize, "derive": ruleDerive, "lookup": ruleLookup}

// compiledRule is one registry entry ready to run.
type compiledRule struct {
	id     string
	kind   ruleKind
	prog   *vm.Program
	cmp    *cmpFilter // filter: evaluated without the VM (see cmpFilter), else nil
	direct directFn   // the expression evaluated on the row (rules_direct.go), else nil
	types  []Type     // every column's type as the expression reads it (the VM's environment)
	final  bool       // the columns it reads have their final types: direct on a written row too
	refs   []int      // columns the expression reads
	col    int        // column written by normalize/derive
	strict bool       // normalize/derive: NULL in any of refs → NULL, without evaluating

	rejected string     // filter: "<id>:<reason>"
	failed   string     // normalize/derive conversion failure: "<id>:<reason or <kind>_failed>"
	retype   Type       // normalize with a type: the column's type from this rule on
	target   ColumnSpec // normalize/derive: the column as this rule writes it (type at this point)

	keys     []int  // lookup: local key columns in key order
	keyTypes []Type // lookup: their types when the rule runs
	outs     []int  // lookup: the columns it fills
	table    LookupTable
	version  string // lookup: the version of its source loaded (recorded in Silver's commit)
	onChange string // lookup: LookupSpec.OnChange
}

// ruleSet is the compiled registry of an entity. It is not safe for concurrent use (it
// reuses one expression environment and one VM); clone it for each goroutine.
type ruleSet struct {
	rules []compiledRule
	cols  []ColumnSpec // the typed columns, then the columns the rules add
	types []Type       // cols' final types (a finished row's, the quality row level's)
	inEnv []bool       // columns some expression reads: the VM's environment holds them
	env   map[string]any
	fresh bool      // env holds this row's values (filled when a rule first needs the VM)
	dc    directCtx // this row's values as expressions read them
	vm    vm.VM
	key   []byte
	// noFilters skips the filter rules (a Debezium delete: see applyToDelete).
	noFilters bool
}

// clone returns a ruleSet sharing the compiled programs and lookup tables, with its own
// environment, row values and VM.
func (r *ruleSet) clone() *ruleSet {
	c := &ruleSet{rules: r.rules, cols: r.cols, types: r.types, inEnv: r.inEnv, env: maps.Clone(r.env), vm: vm.VM{MemoryBudget: MaxRuleMemory}}
	c.dc.size(len(r.cols))
	return c
}

// compileRules compiles every rule once against the typed columns. It returns the extra
// columns the rules add (derive: the rule's Column with its Type; lookup: each lookup
// column as string), in rule order. Lookups from a file are read with LoadCSVLookup,
// the others with load. Errors name the rule id.
func compileRules(specs []RuleSpec, cols []ColumnSpec, load LookupLoader) (*ruleSet, []ColumnSpec, error) {
	rs, added, problems := compileRuleList(specs, cols, load, lookupFiles{}, false)
	if len(problems) > 0 {
		return nil, nil, problems[0].Err
	}
	return rs, added, nil
}

// RuleProblem is a rule of a registry that does not compile: its index and the reason.
type RuleProblem struct {
	Index int
	Err   error
}

// CheckRules compiles every rule against the typed columns exactly as a Silver run
// does, without reading lookup sources (a lookup is checked against an empty table),
// and returns every rule that does not compile. A failing derive or lookup still adds
// its columns, so the later rules are checked against the columns a fixed config has.
func CheckRules(specs []RuleSpec, cols []ColumnSpec) []RuleProblem {
	empty := func(LookupSpec) (LookupTable, string, error) { return LookupTable{}, "", nil }
	_, _, problems := compileRuleList(specs, cols, empty, nil, true)
	return problems
}

// compileRuleList compiles the rules in order; files nil: lookup files are not read
// (empty tables). With keepGoing it compiles past a failing rule, adding the columns
// the rule would add, and returns every problem; otherwise it stops at the first.
func compileRuleList(specs []RuleSpec, cols []ColumnSpec, load LookupLoader, files lookupFiles, keepGoing bool) (*ruleSet, []ColumnSpec, []RuleProblem) {
	all := slices.Clone(cols)
	index := make(map[string]int, len(cols))
	example := make(map[string]any, len(cols))
	for i, c := range cols {
		if _, dup := index[c.Name]; dup {
			return nil, nil, []RuleProblem{{-1, fmt.Errorf("rules: column %q declared twice", c.Name)}}
		}
		index[c.Name] = i
		example[c.Name] = ruleEnvValue(c.Type, Value{})
	}
	addColumn := func(c ColumnSpec) (int, error) {
		if _, dup := index[c.Name]; dup {
			return 0, fmt.Errorf("column %q already exists", c.Name)
		}
		index[c.Name] = len(all)
		all = append(all, c)
		example[c.Name] = ruleEnvValue(c.Type, Value{})
		return len(all) - 1, nil
	}
	rs := &ruleSet{vm: vm.VM{MemoryBudget: MaxRuleMemory}}
	retyped := map[int]bool{}
	ids := map[string]bool{}
	var problems []RuleProblem
	for n, sp := range specs {
		if sp.ID == "" {
			problems = append(problems, RuleProblem{n, fmt.Errorf("rules[%d]: missing id", n)})
		} else if ids[sp.ID] {
			problems = append(problems, RuleProblem{n, fmt.Errorf("rule %s: duplicate id", sp.ID)})
		}
		if len(problems) > 0 && !keepGoing {
			return nil, nil, problems
		}
		ids[sp.ID] = true
		cr, err := compileRule(sp, all, index, example, addColumn, load, files)
		if err != nil {
			problems = append(problems, RuleProblem{n, fmt.Errorf("rule %s: %w", sp.ID, err)})
			if !keepGoing {
				return nil, nil, problems
			}
			addFailedRuleColumns(sp, addColumn)
			continue
		}
		if cr.kind == ruleNormalize && sp.Type != "" {
			// The column leaves the rule, and Silver, with the rule's type.
			if retyped[cr.col] {
				problems = append(problems, RuleProblem{n, fmt.Errorf("rule %s: column %s is retyped by an earlier rule", sp.ID, all[cr.col].Name)})
				if !keepGoing {
					return nil, nil, problems
				}
				continue
			}
			retyped[cr.col] = true
			all[cr.col].Type = cr.retype
			example[all[cr.col].Name] = ruleEnvValue(cr.retype, Value{})
		}
		rs.rules = append(rs.rules, cr)
	}
	reads := map[int]bool{}
	for k := range rs.rules {
		cr := &rs.rules[k]
		if cr.cmp != nil && all[cr.cmp.col].Type.Kind != cr.cmp.kind {
			cr.cmp = nil // compiled before a retype: the final row (violations) holds the new type
		}
		if cr.cmp == nil { // a cmpFilter reads the row, not the environment
			for _, i := range cr.refs {
				reads[i] = true
			}
		}
		cr.final = !slices.ContainsFunc(cr.refs, func(i int) bool { return cr.types[i] != all[i].Type })
	}
	rs.cols = all
	rs.types = columnTypes(all)
	rs.dc.size(len(all))
	rs.inEnv = make([]bool, len(rs.cols))
	rs.env = make(map[string]any, len(rs.cols))
	for i, c := range rs.cols {
		rs.env[c.Name] = nil
		rs.inEnv[i] = reads[i]
	}
	if len(problems) > 0 {
		return nil, nil, problems
	}
	return rs, slices.Clone(rs.cols[len(cols):]), nil
}

// columnTypes is each column's type.
func columnTypes(cols []ColumnSpec) []Type {
	t := make([]Type, len(cols))
	for i, c := range cols {
		t[i] = c.Type
	}
	return t
}

// addFailedRuleColumns adds the columns a rule that did not compile would have added
// (a derive's column when its type parses, a lookup's columns), so that the rules after
// it are checked against them rather than failing on their names (CheckRules).
func addFailedRuleColumns(sp RuleSpec, addColumn func(ColumnSpec) (int, error)) {
	switch sp.Kind {
	case "derive":
		if t, err := ParseType(sp.Type); err == nil && sp.Column != "" {
			_, _ = addColumn(ColumnSpec{Name: sp.Column, Type: t})
		}
	case "lookup":
		if sp.Lookup != nil {
			for _, c := range sp.Lookup.SilverNames() {
				_, _ = addColumn(ColumnSpec{Name: c, Type: Type{Kind: String}})
			}
		}
	}
}

func compileRule(sp RuleSpec, all []ColumnSpec, index map[string]int, example map[string]any,
	addColumn func(ColumnSpec) (int, error), load LookupLoader, files lookupFiles) (compiledRule, error) {
	kind, ok := ruleKinds[sp.Kind]
	if !ok {
		return compiledRule{}, fmt.Errorf("unknown kind %q (filter, normalize, derive, lookup)", sp.Kind)
	}
	cr := compiledRule{id: sp.ID, kind: kind, col: -1}
	if kind == ruleLookup {
		err := compileLookup(&cr, sp, index, addColumn, all, load, files)
		return cr, err
	}
	if strings.TrimSpace(sp.Expr) == "" {
		return cr, errors.New("missing expr")
	}
	var target ColumnSpec
	switch kind {
	case ruleFilter:
		reason := sp.Reason
		if reason == "" {
			reason = "rejected"
		}
		cr.rejected = sp.ID + ":" + reason
	case ruleNormalize:
		i, ok := index[sp.Column]
		if !ok {
			return cr, fmt.Errorf("normalize: unknown column %q", sp.Column)
		}
		cr.col, target = i, all[i]
		if sp.Type != "" {
			t, err := ParseType(sp.Type)
			if err != nil {
				return cr, fmt.Errorf("normalize %s: %w", sp.Column, err)
			}
			cr.retype, target.Type = t, t
		}
	case ruleDerive:
		if sp.Column == "" {
			return cr, errors.New("derive: missing column")
		}
		t, err := ParseType(sp.Type)
		if err != nil {
			return cr, fmt.Errorf("derive %s: %w", sp.Column, err)
		}
		target = ColumnSpec{Name: sp.Column, Type: t}
	}
	if len(sp.Expr) > MaxRuleExprBytes {
		return cr, fmt.Errorf("expr of %d bytes exceeds the limit of %d", len(sp.Expr), MaxRuleExprBytes)
	}
	// date("2024-01-01") without a zone is already UTC (time.Parse); expr.Timezone is not
	// used, as it breaks method calls on date() results in expr v1.17.8.
	opts := []expr.Option{expr.Env(maps.Clone(example)), expr.DisableBuiltin("now"), hashOption,
		expr.MaxNodes(MaxRuleNodes), expr.Function("repeat", boundedRepeat, new(func(string, int) string))}
	if kind == ruleFilter {
		opts = append(opts, expr.AsBool())
	}
	if cd := newConstDates(example); cd != nil {
		opts = append(opts, expr.Patch(cd))
	}
	prog, err := expr.Compile(sp.Expr, opts...)
	if err != nil {
		return cr, caseHint(err, sp.Expr, example)
	}
	if err := checkClosureNesting(prog.Node()); err != nil {
		return cr, err
	}
	cr.prog = prog
	cr.refs = exprReads(prog, index)
	cr.direct = compileDirect(prog.Node(), index, all)
	cr.types = columnTypes(all)
	if kind == ruleFilter {
		cr.cmp = newCmpFilter(prog.Node(), index, all)
		return cr, nil
	}
	if err := checkResultType(prog.Node().Type(), target); err != nil {
		return cr, err
	}
	cr.target = target
	cr.strict = nullStrict(prog)
	if kind == ruleDerive {
		i, err := addColumn(target)
		if err != nil {
			return cr, fmt.Errorf("derive: %w", err)
		}
		cr.col = i
	}
	reason := sp.Reason
	if reason == "" {
		reason = sp.Kind + "_failed"
	}
	cr.failed = sp.ID + ":" + reason
	return cr, nil
}

func compileLookup(cr *compiledRule, sp RuleSpec, index map[string]int, addColumn func(ColumnSpec) (int, error),
	all []ColumnSpec, load LookupLoader, files lookupFiles) error {
	lk := sp.Lookup
	if lk == nil {
		return errors.New("lookup: missing lookup")
	}
	if len(lk.On) == 0 || len(lk.Columns) == 0 {
		return errors.New("lookup: on and columns are required")
	}
	if (lk.File == "") == (lk.Entity == "") {
		return errors.New("lookup: set exactly one of file or entity")
	}
	local, _ := lookupKeyColumns(*lk)
	keyCols := make([]ColumnSpec, len(local))
	for i, l := range local {
		j, ok := index[l]
		if !ok {
			return fmt.Errorf("lookup: unknown column %q", l)
		}
		cr.keys = append(cr.keys, j)
		cr.keyTypes = append(cr.keyTypes, all[j].Type)
		keyCols[i] = all[j]
	}
	var (
		t   LookupTable
		err error
	)
	switch {
	case lk.File != "" && files == nil:
		t = LookupTable{} // CheckRules: the file is not read
	case lk.File != "":
		t, cr.version, err = files.load(*lk)
	case load == nil:
		err = fmt.Errorf("lookup: no loader for entity %s", lk.Entity)
	default:
		t, cr.version, err = load(*lk)
	}
	if err != nil {
		return err
	}
	if cr.table, err = canonicalLookup(t, keyCols, len(lk.Columns)); err != nil {
		return fmt.Errorf("lookup: %w", err)
	}
	for _, c := range lk.SilverNames() {
		i, err := addColumn(ColumnSpec{Name: c, Type: Type{Kind: String}})
		if err != nil {
			return fmt.Errorf("lookup: %w", err)
		}
		cr.outs = append(cr.outs, i)
	}
	cr.onChange = lk.OnChange
	return nil
}

// canonicalLookup re-keys t with the key texts typed like the local columns and rendered
// as apply renders a row's key. Keys that cannot be typed are dropped: no row can match
// them. A table keyed by string columns only is checked and returned as it is.
func canonicalLookup(t LookupTable, keyCols []ColumnSpec, width int) (LookupTable, error) {
	typed := slices.ContainsFunc(keyCols, func(c ColumnSpec) bool { return c.Type.Kind != String })
	var out LookupTable
	if typed {
		out = make(LookupTable, len(t))
	}
	var buf []byte
	for k, vals := range t {
		if len(vals) != width {
			return nil, fmt.Errorf("key %s has %d values, want %d", lookupKeyString(k), len(vals), width)
		}
		if strings.Count(k, string(lookupKeySep)) != len(keyCols)-1 {
			return nil, fmt.Errorf("key %s does not have %d parts", lookupKeyString(k), len(keyCols))
		}
		if !typed {
			continue
		}
		buf = buf[:0]
		ok := true
		for i, p := range strings.Split(k, string(lookupKeySep)) {
			if i > 0 {
				buf = append(buf, lookupKeySep)
			}
			c := keyCols[i]
			if c.Type.Kind == String {
				buf = append(buf, p...)
				continue
			}
			v, err := convertString(&c, p)
			if err != nil {
				ok = false
				break
			}
			buf = appendLookupKey(buf, c.Type, v)
		}
		if !ok {
			continue
		}
		if prev, dup := out[string(buf)]; dup && !slices.Equal(prev, vals) {
			return nil, fmt.Errorf("keys render to the same %s with different values", lookupKeyString(string(buf)))
		}
		out[string(buf)] = vals
	}
	if !typed {
		return t, nil
	}
	return out, nil
}

// exprReads returns the columns (by index) a program reads; all of them if it uses $env.
func exprReads(prog *vm.Program, index map[string]int) []int {
	v := &ruleIdentVisitor{names: map[string]bool{}}
	node := prog.Node()
	ast.Walk(&node, v)
	var refs []int
	for name, i := range index {
		if v.env || v.names[name] {
			refs = append(refs, i)
		}
	}
	sort.Ints(refs)
	return refs
}

// nullStrict reports whether an expression can be taken as NULL whenever a column it
// reads is NULL, as SQL does for operators and functions: true unless it handles nil
// itself or may not read every column — a nil literal, ??, ?., a conditional, a
// short-circuit operator, a closure or $env.
func nullStrict(prog *vm.Program) bool {
	v := &nullAwareVisitor{}
	node := prog.Node()
	ast.Walk(&node, v)
	return !v.aware
}

type nullAwareVisitor struct{ aware bool }

func (v *nullAwareVisitor) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.NilNode, *ast.ConditionalNode, *ast.ChainNode, *ast.PredicateNode:
		v.aware = true
	case *ast.ConstantNode:
		v.aware = v.aware || x.Value == nil
	case *ast.MemberNode:
		v.aware = v.aware || x.Optional
	case *ast.BinaryNode:
		switch x.Operator {
		case "??", "&&", "||", "and", "or":
			v.aware = true
		}
	case *ast.IdentifierNode:
		v.aware = v.aware || x.Value == "$env"
	case *ast.CallNode:
		v.aware = v.aware || callsHash(x) // hash() tells NULL from ""
	}
}

// caseHint adds to a compile error about an unknown name the column it matches up to
// case, if any: names are case-sensitive (VendorID is not vendorid).
func caseHint(err error, src string, env map[string]any) error {
	tree, perr := exprparser.Parse(src)
	if perr != nil {
		return err
	}
	v := &ruleIdentVisitor{names: map[string]bool{}}
	ast.Walk(&tree.Node, v)
	for _, id := range slices.Sorted(maps.Keys(v.names)) {
		if _, ok := env[id]; ok || !strings.Contains(err.Error(), "unknown name "+id) {
			continue
		}
		for _, c := range slices.Sorted(maps.Keys(env)) {
			if strings.EqualFold(c, id) {
				return hinted{err, fmt.Sprintf("names are case-sensitive: did you mean %s?", c)}
			}
		}
	}
	return err
}

// hinted is an error with a hint at the end of its first line (expr's errors show the
// source on the lines below).
type hinted struct {
	err  error
	hint string
}

func (h hinted) Error() string {
	first, rest, ok := strings.Cut(h.err.Error(), "\n")
	if ok {
		rest = "\n" + rest
	}
	return first + " (" + h.hint + ")" + rest
}

func (h hinted) Unwrap() error { return h.err }

type ruleIdentVisitor struct {
	names map[string]bool
	env   bool
}

func (v *ruleIdentVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		if id.Value == "$env" {
			v.env = true
		}
		v.names[id.Value] = true
	}
}

var (
	ruleTimeType     = reflect.TypeFor[time.Time]()
	ruleDurationType = reflect.TypeFor[time.Duration]()
)

// checkResultType rejects at compile time an expression whose static type cannot fill
// the column. Unknown (interface) types are checked per row.
func checkResultType(t reflect.Type, c ColumnSpec) error {
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if t == ruleDurationType {
		return fmt.Errorf("expression yields a duration; use .Seconds(), .Minutes() or .Hours() for %s", c.Name)
	}
	k := t.Kind()
	number := k >= reflect.Int && k <= reflect.Float64
	ok := false
	switch c.Type.Kind {
	case String:
		ok = k == reflect.String
	case Int32, Int64, Float64, Decimal:
		ok = number || k == reflect.String
	case Bool:
		ok = k == reflect.Bool || k == reflect.String
	case Date, Timestamp:
		ok = t == ruleTimeType || k == reflect.String
	}
	if !ok {
		return fmt.Errorf("expression yields %s, column %s is %s", t, c.Name, c.Type)
	}
	return nil
}

// Limits of the rules' expressions (docs/silver.md, "Limits"). A rule past a compile-time
// limit is a config error naming the rule; a row that pushes an evaluation past a
// run-time one is quarantined with "<id>:memory_budget_exceeded".
//
// Per row, an expression's work is bounded by its nodes times the size of the collections
// it loops over, and those are bounded too: a range (a..b) is charged to the VM's memory
// budget (MaxRuleMemory elements), split() yields at most one element per byte of
// its payload-bounded input, repeat() at most MaxRuleStringBytes, and a loop (all, any,
// map, filter, reduce, ...) may not run inside another loop's predicate.
const (
	MaxRuleExprBytes   = 4096    // expression text
	MaxRuleNodes       = 1000    // parsed expression nodes
	MaxRuleStringBytes = 1 << 20 // a string built by repeat()
	MaxRuleMemory      = 1e6     // the VM's memory budget per evaluation (elements of ranges, maps, ...)
)

// boundedRepeat is expr's repeat() with its result limited to MaxRuleStringBytes (the
// builtin checks only the count, so a long string repeated 10^6 times was allocated).
func boundedRepeat(params ...any) (any, error) {
	s, _ := params[0].(string)
	n, _ := params[1].(int)
	if n < 0 {
		return nil, fmt.Errorf("invalid argument for repeat (expected positive integer, got %d)", n)
	}
	if n > 0 && len(s) > MaxRuleStringBytes/n {
		return nil, fmt.Errorf("memory budget exceeded: repeat of %d bytes %d times", len(s), n)
	}
	return strings.Repeat(s, n), nil
}

// checkClosureNesting refuses a loop inside another loop's predicate (a predicate, a
// range or a builtin that walks a collection), whose cost per row would be the product of
// two collection sizes.
func checkClosureNesting(root ast.Node) error {
	var outer loopFinder
	ast.Walk(&root, &outer)
	for _, p := range outer.predicates {
		var inner loopFinder
		body := p.Node
		ast.Walk(&body, &inner)
		if inner.loops > 0 {
			return errors.New("a loop (a range, all, any, map, filter, sum, sort, ...) inside another loop's predicate is not allowed: its cost per row is unbounded")
		}
	}
	return nil
}

// loopFinder collects the predicates of an expression and counts its loops.
type loopFinder struct {
	predicates []*ast.PredicateNode
	loops      int
}

// collectionBuiltins are the builtins that walk a whole array or map.
var collectionBuiltins = map[string]bool{
	"all": true, "none": true, "any": true, "one": true, "filter": true, "map": true, "count": true,
	"sum": true, "find": true, "findIndex": true, "findLast": true, "findLastIndex": true, "groupBy": true,
	"sortBy": true, "reduce": true, "sort": true, "join": true, "mean": true, "median": true, "min": true,
	"max": true, "concat": true, "flatten": true, "uniq": true, "keys": true, "values": true,
	"toPairs": true, "fromPairs": true, "reverse": true, "repeat": true, "split": true, "splitAfter": true,
}

func (v *loopFinder) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.PredicateNode:
		v.predicates = append(v.predicates, x)
		v.loops++
	case *ast.BinaryNode:
		if x.Operator == ".." {
			v.loops++
		}
	case *ast.BuiltinNode:
		if collectionBuiltins[x.Name] {
			v.loops++
		}
	case *ast.CallNode:
		if id, ok := x.Callee.(*ast.IdentifierNode); ok && collectionBuiltins[id.Value] {
			v.loops++ // repeat, our own function
		}
	}
}
