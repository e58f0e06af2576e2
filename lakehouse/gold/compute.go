package gold

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
	"golang.org/x/sync/errgroup"

	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

const dayMicros = int64(86400e6)

// grainOf maps a source value of the grain column to the partition's grain value:
// days since the epoch (day, month: the first day of the month) or µs (hour).
func (m MartSpec) grainOf(v silver.Value, src silver.Type) int64 {
	micros := v.I
	if src.Kind == silver.Date {
		micros = v.I * dayMicros
	}
	switch m.GrainUnit {
	case "hour":
		return floorDiv(micros, 3600e6) * 3600e6
	case "month":
		t := time.UnixMicro(micros).UTC()
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).Unix() / 86400
	default:
		return floorDiv(micros, dayMicros)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// grainRange is the [start, end) of a grain value in the source column's units.
func (m MartSpec) grainRange(g int64, src silver.Type) (int64, int64) {
	var startUS, endUS int64
	switch m.GrainUnit {
	case "hour":
		startUS, endUS = g, g+3600e6
	case "month":
		t := time.Unix(g*86400, 0).UTC()
		startUS, endUS = t.UnixMicro(), t.AddDate(0, 1, 0).UnixMicro()
	default:
		startUS, endUS = g*dayMicros, (g+1)*dayMicros
	}
	if src.Kind == silver.Date {
		return floorDiv(startUS, dayMicros), floorDiv(endUS+dayMicros-1, dayMicros)
	}
	return startUS, endUS
}

// GrainString renders a grain value as in the summary's partition list.
func (m MartSpec) GrainString(g int64) string {
	if m.GrainUnit == "hour" {
		return time.UnixMicro(g).UTC().Format(time.RFC3339)
	}
	return time.Unix(g*86400, 0).UTC().Format(time.DateOnly)
}

// rowFilter is the compiled mart filter over Silver rows.
type rowFilter struct {
	prog  *vm.Program
	vm    vm.VM
	names []string
	env   map[string]any
	// tri evaluates the expression with SQL's three-valued logic when it fails on a NULL
	// input (nil: its root is no and, or or not).
	tri  *kleene
	null []bool

	// memo caches the outcome by the values of the referenced columns: a filter is a
	// pure function of them (filters calling now() are not cached), and most filters
	// read few distinct values (not is_deleted, status == "paid").
	memo   map[string]bool
	memoOK bool
	keyBuf []byte
}

// clone is rf with state of its own (VM, environment, memo) for another goroutine; the
// compiled program is shared (nil for nil).
func (rf *rowFilter) clone() *rowFilter {
	if rf == nil {
		return nil
	}
	return newRowFilter(rf.prog, rf.names, maps.Clone(rf.env), rf.tri, rf.memoOK)
}

// newRowFilter is a filter running prog over the named columns, with a VM, memo and
// NULL flags of its own; memoOK says whether its outcomes may be cached.
func newRowFilter(prog *vm.Program, names []string, env map[string]any, tri *kleene, memoOK bool) *rowFilter {
	return &rowFilter{prog: prog, names: names, env: env, tri: tri, null: make([]bool, len(names)), memo: map[string]bool{}, memoOK: memoOK}
}

// memoLimit bounds the memo; a filter over many distinct values runs the program.
const memoLimit = 1 << 14

// memoKey renders the referenced values (by slot) as the memo key.
func (rf *rowFilter) memoKey(at func(int) silver.Value, slots []int, types []silver.Type) []byte {
	b := rf.keyBuf[:0]
	for i, s := range slots {
		v := at(s)
		if v.Null {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		t := keyText(v, types[i])
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t)))
		b = append(b, t...)
	}
	rf.keyBuf = b
	return b
}

// test evaluates the expression on a row (at: the value of a slot; slots and types: of
// rf.names). An operator that cannot take a NULL input (segment != "x" with no segment,
// e.g. after a LEFT JOIN without a match) makes its operand unknown, as in SQL, and an
// unknown result is false. Any other error is returned.
func (rf *rowFilter) test(at func(int) silver.Value, slots []int, types []silver.Type) (bool, error) {
	var key []byte
	if rf.memoOK {
		key = rf.memoKey(at, slots, types)
		if keep, ok := rf.memo[string(key)]; ok {
			return keep, nil
		}
	}
	for i, n := range rf.names {
		rf.env[n] = exprValue(at(slots[i]), types[i])
	}
	anyNull := false
	for i := range rf.names {
		rf.null[i] = at(slots[i]).Null
		anyNull = anyNull || rf.null[i]
	}
	keep := false
	if anyNull && rf.tri != nil {
		// An operand over a NULL input is unknown, which OR true makes true, AND false
		// false and NOT unknown, as in SQL (expr would fail, or say nil in ["a"] is
		// false and its negation true). A failure of the split form is unknown too.
		v, err := rf.tri.eval(&rf.vm, rf.env, rf.null)
		keep = err == nil && v == triTrue
	} else if out, err := rf.vm.Run(rf.prog, rf.env); err != nil {
		if !anyNull {
			return false, err
		}
	} else {
		keep, _ = out.(bool)
	}
	if rf.memoOK && len(rf.memo) < memoLimit {
		rf.memo[string(key)] = keep
	}
	return keep, nil
}

func exprValue(v silver.Value, t silver.Type) any {
	if v.Null {
		return nil
	}
	switch t.Kind {
	case silver.String:
		return v.S
	case silver.Float64:
		return v.F
	case silver.Decimal:
		return v.D.ToFloat64(int32(t.Scale))
	case silver.Bool:
		return v.B
	case silver.Date:
		return time.Unix(v.I*86400, 0).UTC()
	case silver.Timestamp:
		return time.UnixMicro(v.I).UTC()
	}
	return int(v.I)
}

func exampleValue(t silver.Type) any {
	switch t.Kind {
	case silver.String:
		return ""
	case silver.Float64, silver.Decimal:
		return 0.0
	case silver.Bool:
		return false
	case silver.Date, silver.Timestamp:
		return time.Time{}
	}
	return 0
}

// compileFilter compiles the mart filter (nil when there is none).
func compileFilter(src string, cols map[string]silver.Type) (*rowFilter, error) {
	return compileExpr("filter", src, cols)
}

// compileExpr compiles a boolean expression over the mart's row columns, named what in
// errors (nil when src is empty).
func compileExpr(what, src string, cols map[string]silver.Type) (*rowFilter, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var names []string
	ast.Find(tree.Node, func(n ast.Node) bool {
		if id, ok := n.(*ast.IdentifierNode); ok && !slices.Contains(names, id.Value) {
			if _, known := cols[id.Value]; known {
				names = append(names, id.Value)
			}
		}
		return false
	})
	env := map[string]any{}
	for name, t := range cols {
		env[name] = exampleValue(t)
	}
	prog, err := expr.Compile(src, expr.Env(env), expr.AsBool())
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, src, err)
	}
	pure := true
	ast.Find(tree.Node, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BuiltinNode:
			pure = pure && n.Name != "now"
		case *ast.CallNode:
			if id, ok := n.Callee.(*ast.IdentifierNode); ok && id.Value == "now" {
				pure = false
			}
		}
		return false
	})
	tri, err := compileKleene(tree.Node, env, names)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, src, err)
	}
	return newRowFilter(prog, names, env, tri, pure), nil
}

// scanSilver feeds the Silver rows of tbl matching filter to p: each row is enriched by
// the joins first, then the mart filter applies, then the row is aggregated. In snapshot
// mode every row goes to p.fixedGrain.
//
// ps.keep, when set, selects the grain values to aggregate; rows of other grains are
// skipped before anything else of them is read (a cheap stand-in for a residual filter
// that cannot prune files).
//
// The rows are aggregated by scanWorkers goroutines, each into a partial of its own
// holding the grain values g with g mod workers = its number, which p then absorbs: a
// grain's rows are all one worker's, in scan order, so every group and distinct set is
// the one a single scan builds, value for value (TestLevelsMatchNaiveGroupBy runs both).
func (p *partial) scanSilver(ctx context.Context, tbl *table.Table, snapshot int64, ps pass, rf *rowFilter) (int64, error) {
	pl := p.planScan(ps, rf)
	opts := []table.ScanOption{table.WithSelectedFields(pl.fields...), table.WithRowFilter(ps.filter)}
	if snapshot != 0 {
		opts = append(opts, table.WithSnapshotID(snapshot))
	}
	scan := tbl.Scan(opts...)
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return 0, fmt.Errorf("plan %s: %w", p.m.SourceTable, err)
	}
	// The pass's grain ranges prune row groups by their statistics in the direct read
	// (none in a full build or a snapshot run: passOf(nil)).
	recs, direct := readSilverDirect(ctx, tbl, tasks, pl.fields, p.m.GrainColumn, ps.ranges, ps.readNulls)
	if !direct {
		if _, recs, err = scan.ReadTasks(ctx, tasks); err != nil {
			return 0, fmt.Errorf("scan %s: %w", p.m.SourceTable, err)
		}
	}
	n := p.workers
	if n <= 0 {
		n = scanWorkers()
	}
	if n == 1 || pl.grainSlot < 0 {
		return p.scanRows(ctx, recs, pl, rf, nil)
	}
	return p.scanParallel(ctx, recs, pl, rf, n)
}

// scanWorkers is the number of goroutines that aggregate a scan: one per core, up to 4.
func scanWorkers() int { return min(runtime.GOMAXPROCS(0), 4) }

// scanParallel is scanSilver's aggregation by n workers (see there).
func (p *partial) scanParallel(ctx context.Context, recs iter.Seq2[arrow.RecordBatch, error], pl *scanPlan, rf *rowFilter, n int) (int64, error) {
	parts := make([]*partial, n)
	parts[0] = p
	for k := 1; k < n; k++ {
		q, err := newPartial(p.m)
		if err != nil {
			return 0, err
		}
		q.fixedGrain, q.joins = p.fixedGrain, p.joins
		parts[k] = q
	}
	g, gctx := errgroup.WithContext(ctx)
	queues := make([]chan arrow.RecordBatch, n)
	rows := make([]int64, n)
	for k := range n {
		queues[k] = make(chan arrow.RecordBatch, 2)
		wrf := rf
		if k > 0 {
			wrf = rf.clone()
		}
		own := func(grain int64, null bool) bool {
			if null {
				return k == 0
			}
			return int(uint64(grain)%uint64(n)) == k
		}
		g.Go(func() error {
			var err error
			rows[k], err = parts[k].scanRows(gctx, chanSeq(queues[k]), pl, wrf, own)
			for rec := range queues[k] { // a failed worker still drains its queue
				rec.Release()
			}
			return err
		})
	}
	g.Go(func() error {
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		for rec, err := range recs {
			if err != nil {
				return fmt.Errorf("scan %s: %w", p.m.SourceTable, err)
			}
			for _, q := range queues {
				rec.Retain()
				select {
				case q <- rec:
				case <-gctx.Done():
					rec.Release()
					rec.Release()
					return gctx.Err()
				}
			}
			rec.Release()
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return 0, err
	}
	var total int64
	for k, q := range parts {
		if k > 0 {
			p.absorb(q)
		}
		total += rows[k]
	}
	return total, nil
}

// chanSeq yields the batches of ch until it is closed.
func chanSeq(ch <-chan arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec := range ch {
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// scanPlan is where scanRows finds each input of a row: the Silver fields read, then
// each join's columns, as slots of one row of values.
type scanPlan struct {
	fields     []string
	ps         pass
	runSlot    int // a delta pass: the slot of the run id (the rows of ps.runs only), else -1
	joinBase   []int
	types      map[string]silver.Type
	grainSlot  int
	grainT     silver.Type
	dimSlot    []int
	valSlot    []int
	bySlot     []int
	counts     []bool // per measure: the aggregate takes no input (it counts a mark per row)
	filterSlot []int
	filterType []silver.Type
	condSlot   [][]int
	condTypes  [][]silver.Type
	onSlot     [][]int
	nslots     int
}

// planScan lays out the slots of a scan of p's mart for pass ps and filter rf.
func (p *partial) planScan(ps pass, rf *rowFilter) *scanPlan {
	m := p.m
	pl := &scanPlan{ps: ps, runSlot: -1, types: m.rowColumns(), grainSlot: -1, grainT: m.SourceColumns[m.GrainColumn]}
	slot := map[string]int{}
	need := func(n string) {
		if _, ok := slot[n]; ok || n == "" {
			return
		}
		if _, src := m.SourceColumns[n]; src {
			slot[n] = len(pl.fields)
			pl.fields = append(pl.fields, n)
		}
	}
	if !m.snapshot() {
		need(m.GrainColumn)
	}
	for _, d := range m.Dims {
		need(d.Name)
	}
	for _, ms := range m.Measures {
		need(ms.Column)
		need(ms.By)
	}
	for _, c := range append([]*rowFilter{rf}, p.conds...) {
		if c != nil {
			for _, n := range c.names {
				need(n)
			}
		}
	}
	for _, j := range p.joins {
		for _, on := range j.spec.On {
			need(on.Local)
		}
	}
	if len(pl.fields) == 0 { // e.g. a snapshot count(*) without dimensions
		for _, k := range m.SourceKey {
			need(k)
		}
	}
	if ps.runs != nil {
		pl.runSlot = len(pl.fields)
		pl.fields = append(pl.fields, silver.ColRunID)
	}
	pl.nslots = len(pl.fields)
	pl.joinBase = make([]int, len(p.joins))
	for ji, j := range p.joins {
		pl.joinBase[ji] = pl.nslots
		for _, c := range j.spec.Columns {
			slot[c] = pl.nslots
			pl.nslots++
		}
	}
	slotOf := func(n string) int {
		if i, ok := slot[n]; ok {
			return i
		}
		return -1
	}
	if !m.snapshot() {
		pl.grainSlot = slotOf(m.GrainColumn)
	}
	pl.dimSlot = make([]int, len(m.Dims))
	for i, d := range m.Dims {
		pl.dimSlot[i] = slotOf(d.Name)
	}
	pl.valSlot, pl.bySlot = make([]int, len(m.Measures)), make([]int, len(m.Measures))
	pl.counts = make([]bool, len(m.Measures))
	for i, ms := range m.Measures {
		pl.valSlot[i], pl.bySlot[i] = slotOf(ms.Column), slotOf(ms.By)
		d, _ := ms.Agg.Desc()
		pl.counts[i] = d.Input == mart.InputNone
	}
	exprSlots := func(rf *rowFilter) (slots []int, ts []silver.Type) {
		if rf != nil {
			for _, n := range rf.names {
				slots = append(slots, slotOf(n))
				ts = append(ts, pl.types[n])
			}
		}
		return slots, ts
	}
	pl.filterSlot, pl.filterType = exprSlots(rf)
	pl.condSlot = make([][]int, len(m.Measures))
	pl.condTypes = make([][]silver.Type, len(m.Measures))
	for i, c := range p.conds {
		pl.condSlot[i], pl.condTypes[i] = exprSlots(c)
	}
	pl.onSlot = make([][]int, len(p.joins))
	for ji, j := range p.joins {
		for _, on := range j.spec.On {
			pl.onSlot[ji] = append(pl.onSlot[ji], slotOf(on.Local))
		}
	}
	return pl
}

// scanRows aggregates the rows of recs into p, filtered by rf; own, when set, picks the
// rows by their grain value (null: the row has none) and the others are skipped.
func (p *partial) scanRows(ctx context.Context, recs iter.Seq2[arrow.RecordBatch, error], pl *scanPlan, rf *rowFilter, own func(grain int64, null bool) bool) (int64, error) {
	m := p.m
	row := make([]silver.Value, pl.nslots)
	dims := make([]silver.Value, len(m.Dims))
	vals, bys := make([]silver.Value, len(m.Measures)), make([]silver.Value, len(m.Measures))
	null, mark := silver.Value{Null: true}, silver.Value{I: 1}
	at := func(i int) silver.Value {
		if i < 0 {
			return null
		}
		return row[i]
	}
	var rows int64
	var errFilter error
	// emit filters and aggregates the enriched row.
	emit := func() {
		if rf != nil {
			keep, err := rf.test(at, pl.filterSlot, pl.filterType)
			if err != nil {
				errFilter = err
				return
			}
			if !keep {
				return
			}
		}
		grain := p.fixedGrain
		if !m.snapshot() {
			gv := at(pl.grainSlot)
			if gv.Null {
				// No grain, no partition: such rows cannot be reported by time. They
				// leave the chain counted (Result.NullGrainRows, the null_grain check).
				p.nullGrain++
				return
			}
			grain = m.grainOf(gv, pl.grainT)
		}
		for i := range m.Dims {
			dims[i] = at(pl.dimSlot[i])
		}
		for i := range m.Measures {
			vals[i], bys[i] = at(pl.valSlot[i]), at(pl.bySlot[i])
			if pl.counts[i] {
				vals[i] = mark
			}
			if c := p.conds[i]; c != nil {
				// A conditional aggregate (count_if, sum_if) takes the rows its expression
				// is true for: the others' input is NULL, which every aggregate skips.
				keep, err := c.test(at, pl.condSlot[i], pl.condTypes[i])
				if err != nil {
					errFilter = fmt.Errorf("measure %s: if: %w", m.Measures[i].Name, err)
					return
				}
				if !keep {
					vals[i] = null
				}
			}
		}
		p.add(grain, dims, vals, bys)
		rows++
	}
	// expand enriches the row with join ji and the ones after it (SQL semantics: one
	// output row per match; LEFT keeps an unmatched row with NULLs, INNER drops it).
	var key []byte
	var expand func(ji int)
	expand = func(ji int) {
		if ji == len(p.joins) {
			emit()
			return
		}
		j := p.joins[ji]
		key = key[:0]
		var matches [][]silver.Value
		matched := true
		for i, on := range j.spec.On {
			v := at(pl.onSlot[ji][i])
			if v.Null {
				matched = false
				break
			}
			key = appendJoinKey(key, v, pl.types[on.Local])
		}
		if matched {
			matches = j.rows[string(key)]
		}
		base := pl.joinBase[ji]
		if len(matches) == 0 {
			if j.spec.Type == "inner" {
				return
			}
			for c := range j.spec.Columns {
				row[base+c] = null
			}
			expand(ji + 1)
			return
		}
		for _, mv := range matches {
			copy(row[base:], mv)
			expand(ji + 1)
		}
	}
	ps, grainSlot, grainT := pl.ps, pl.grainSlot, pl.grainT
	for rec, err := range recs {
		if err != nil {
			return rows, fmt.Errorf("scan %s: %w", m.SourceTable, err)
		}
		if err := ctx.Err(); err != nil {
			rec.Release()
			return rows, err
		}
		srcA := make([]arrow.Array, len(pl.fields))
		for i, n := range pl.fields {
			srcA[i] = rec.Column(rec.Schema().FieldIndices(n)[0])
		}
		for r := range int(rec.NumRows()) {
			if pl.runSlot >= 0 && !ps.runs[srcA[pl.runSlot].(*array.String).Value(r)] {
				continue
			}
			if ps.keep != nil || own != nil {
				gv := silver.ValueAt(srcA[grainSlot], r, grainT)
				var g int64
				if !gv.Null {
					g = m.grainOf(gv, grainT)
				}
				if ps.keep != nil && (gv.Null && ps.skipNulls || !gv.Null && !ps.keep[g]) {
					continue // a NULL grain goes on to be filtered and counted (in one pass)
				}
				if own != nil && !own(g, gv.Null) {
					continue
				}
			}
			for i, n := range pl.fields {
				if i != pl.runSlot {
					row[i] = silver.ValueAt(srcA[i], r, m.SourceColumns[n])
				}
			}
			expand(0)
			if errFilter != nil {
				rec.Release()
				return rows, fmt.Errorf("filter: %w", errFilter)
			}
		}
		rec.Release()
	}
	return rows, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// build writes the rows as one Arrow batch in the Gold schema.
func (p *partial) build(rows []*group, runID string, now time.Time) arrow.RecordBatch {
	m := p.m
	sch := m.arrowSchema()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	ts := arrow.Timestamp(now.UnixMicro())
	for _, g := range rows {
		f := 0
		next := func() array.Builder { bl := b.Field(f); f++; return bl }
		if m.GrainUnit == "hour" {
			next().(*array.TimestampBuilder).Append(arrow.Timestamp(g.grain))
		} else {
			next().(*array.Date32Builder).Append(arrow.Date32(g.grain))
		}
		for i, d := range m.Dims {
			appendValue(next(), g.dims[i], d.Type)
		}
		lv := p.levels[g.set]
		set := lv.Keep
		for i := range m.Dims {
			flag := int32(1)
			if slices.Contains(set, i) {
				flag = 0
			}
			next().(*array.Int32Builder).Append(flag)
		}
		next().(*array.StringBuilder).Append(lv.Name)
		for i, ms := range m.Measures {
			a := g.accs[i] // a copy: writing the value may adjust it (a conditional sum)
			shapeOf(ms).write(next(), &a, ms)
		}
		// The carrier levels' rows hold the lists that serving merges coarser levels from.
		carries := lv.Carries(g.set)
		for i, ms := range m.Measures {
			if w := shapeOf(ms).writeHidden; w != nil {
				a := g.accs[i]
				w(next, &a, ms, carries, func() []string { return p.distinctTexts(i, g.grain, a.ids) })
			}
		}
		next().(*array.TimestampBuilder).Append(ts)
		next().(*array.StringBuilder).Append(runID)
	}
	return b.NewRecordBatch()
}

func appendSum(b array.Builder, a acc, t silver.Type) {
	if a.n == 0 {
		b.AppendNull()
		return
	}
	switch t.Kind {
	case silver.Decimal:
		b.(*array.Decimal128Builder).Append(a.dsum)
	case silver.Float64:
		b.(*array.Float64Builder).Append(a.fsum)
	default:
		b.(*array.Int64Builder).Append(a.isum)
	}
}

func appendValue(b array.Builder, v silver.Value, t silver.Type) {
	if v.Null {
		b.AppendNull()
		return
	}
	switch t.Kind {
	case silver.String:
		b.(*array.StringBuilder).Append(v.S)
	case silver.Int32:
		b.(*array.Int32Builder).Append(int32(v.I))
	case silver.Int64:
		b.(*array.Int64Builder).Append(v.I)
	case silver.Float64:
		b.(*array.Float64Builder).Append(v.F)
	case silver.Decimal:
		b.(*array.Decimal128Builder).Append(v.D)
	case silver.Bool:
		b.(*array.BooleanBuilder).Append(v.B)
	case silver.Date:
		b.(*array.Date32Builder).Append(arrow.Date32(v.I))
	case silver.Timestamp:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.I))
	}
}
