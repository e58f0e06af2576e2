package gold

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go/table"
	"github.com/expr-lang/expr"

	"goldbridge/lakehouse/mart"
)

// Failure is one failed data-quality check.
type Failure struct {
	Check    string   `json:"check"`
	Type     string   `json:"type"`
	Severity string   `json:"severity"`
	Count    int      `json:"count"`
	Examples []string `json:"examples,omitempty"`
}

// Report is the outcome of the data-quality gateway for one run.
type Report struct {
	Checked  []string
	Failures []Failure
}

// Critical reports whether any critical check failed.
func (r Report) Critical() bool {
	for _, f := range r.Failures {
		if f.Severity == "critical" {
			return true
		}
	}
	return false
}

// Warnings are the failed warning-level checks.
func (r Report) Warnings() []Failure {
	var out []Failure
	for _, f := range r.Failures {
		if f.Severity != "critical" {
			out = append(out, f)
		}
	}
	return out
}

// Summary is a one-line description of the failures.
func (r Report) Summary() string {
	var parts []string
	for _, f := range r.Failures {
		parts = append(parts, fmt.Sprintf("%s (%s, %s): %d rows", f.Check, f.Type, f.Severity, f.Count))
	}
	return strings.Join(parts, "; ")
}

const maxExamples = 3

// goldRow gives the checks access to one computed row by column name.
type goldRow struct {
	rec  arrow.RecordBatch
	cols map[string]int
	i    int
}

func (r goldRow) isNull(name string) bool { return r.rec.Column(r.cols[name]).IsNull(r.i) }

func (r goldRow) value(name string) any {
	a := r.rec.Column(r.cols[name])
	if a.IsNull(r.i) {
		return nil
	}
	switch arr := a.(type) {
	case *array.String:
		return arr.Value(r.i)
	case *array.Int32:
		return int(arr.Value(r.i))
	case *array.Int64:
		return int(arr.Value(r.i))
	case *array.Float64:
		return arr.Value(r.i)
	case *array.Decimal128:
		return arr.Value(r.i).ToFloat64(a.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Boolean:
		return arr.Value(r.i)
	case *array.Date32:
		return arr.Value(r.i).ToTime()
	case *array.Timestamp:
		return time.UnixMicro(int64(arr.Value(r.i))).UTC()
	case *array.List: // quantiles: the levels' values, usable as q[0] in checks
		lo, hi := arr.ValueOffsets(r.i)
		out := make([]any, 0, hi-lo)
		if fs, ok := arr.ListValues().(*array.Float64); ok {
			for k := lo; k < hi; k++ {
				out = append(out, fs.Value(int(k)))
			}
		}
		return out
	}
	return nil
}

func (r goldRow) String() string {
	var b strings.Builder
	for i, f := range r.rec.Schema().Fields() {
		if strings.Contains(f.Name, "__") || strings.HasPrefix(f.Name, "_") || strings.HasPrefix(f.Name, "grouping_") && f.Name != mart.ColGroupingLevel {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%v", f.Name, goldRow{r.rec, r.cols, r.i}.value(r.rec.Schema().Field(i).Name))
	}
	return b.String()
}

// runChecks evaluates the mart's checks on the computed partitions, before any commit.
// nullGrain is the number of Silver rows left out for a NULL grain (null_grain); hist is
// Gold before the run (row_count_anomaly).
func runChecks(ctx context.Context, hist *goldHistory, m MartSpec, rec arrow.RecordBatch, parts []int64, nullGrain int64) (Report, error) {
	var rep Report
	cols := map[string]int{}
	for i, f := range rec.Schema().Fields() {
		cols[f.Name] = i
	}
	n := int(rec.NumRows())
	for _, ck := range m.Checks {
		rep.Checked = append(rep.Checked, ck.Name)
		f := Failure{Check: ck.Name, Type: ck.Type, Severity: ck.Severity}
		flag := func(i int, why string) {
			f.Count++
			if len(f.Examples) < maxExamples {
				ex := goldRow{rec, cols, i}.String()
				if why != "" {
					ex = why + ": " + ex
				}
				f.Examples = append(f.Examples, ex)
			}
		}
		switch ck.Type {
		case "expr":
			env := map[string]any{}
			for _, f := range rec.Schema().Fields() {
				env[f.Name] = exampleOf(f.Type)
			}
			prog, err := expr.Compile(ck.Expr, expr.Env(env), expr.AsBool())
			if err != nil {
				return rep, fmt.Errorf("check %s: %w", ck.Name, err)
			}
			for i := range n {
				for name := range cols {
					env[name] = goldRow{rec, cols, i}.value(name)
				}
				out, err := expr.Run(prog, env)
				if ok, _ := out.(bool); err != nil || !ok {
					flag(i, "")
				}
			}
		case "not_null":
			for i := range n {
				for _, c := range ck.Columns {
					if _, ok := cols[c]; ok && (goldRow{rec, cols, i}).isNull(c) {
						flag(i, c+" is NULL")
						break
					}
				}
			}
		case "unique_grain":
			seen := map[string]int{}
			for i := range n {
				k := groupKey(rec, cols, m, i)
				if _, dup := seen[k]; dup {
					flag(i, "duplicate group")
				}
				seen[k] = i
			}
		case "consistency":
			checkConsistency(rec, cols, m, flag)
		case "null_grain":
			// Rows that are in no Gold row: counted, with the grain column named.
			f.Count = int(nullGrain)
			if nullGrain > 0 {
				f.Examples = []string{fmt.Sprintf("%d silver rows with %s NULL", nullGrain, m.GrainColumn)}
			}
		case "row_count_anomaly":
			if err := checkRowCounts(ctx, hist, m, rec, cols, parts, ck, &f); err != nil {
				return rep, fmt.Errorf("check %s: %w", ck.Name, err)
			}
		}
		if f.Count > 0 {
			rep.Failures = append(rep.Failures, f)
		}
	}
	return rep, nil
}

// exampleOf is a typed zero value for compiling checks against a Gold row.
func exampleOf(t arrow.DataType) any {
	switch t.ID() {
	case arrow.STRING:
		return ""
	case arrow.INT32, arrow.INT64:
		return 0
	case arrow.FLOAT64, arrow.DECIMAL128:
		return 0.0
	case arrow.BOOL:
		return false
	case arrow.DATE32, arrow.TIMESTAMP:
		return time.Time{}
	}
	return []any{}
}

func groupKey(rec arrow.RecordBatch, cols map[string]int, m MartSpec, i int) string {
	var b strings.Builder
	fmt.Fprint(&b, goldRow{rec, cols, i}.value(m.GrainAs), "|", goldRow{rec, cols, i}.value(mart.ColGroupingLevel))
	for _, d := range m.Dims {
		fmt.Fprint(&b, "|", goldRow{rec, cols, i}.value(d.Name))
	}
	return b.String()
}

// checkConsistency: per partition, the total level of each additive measure (sum, count)
// equals the sum of the rows of every other level (a mart need not compute the detail).
func checkConsistency(rec arrow.RecordBatch, cols map[string]int, m MartSpec, flag func(int, string)) {
	level := rec.Column(cols[mart.ColGroupingLevel]).(*array.String)
	grain := rec.Column(cols[m.GrainAs])
	type sums struct {
		exact    map[string]decimal128.Num // by level + "|" + measure
		float    map[string]float64
		levels   []string // the levels seen, total excluded
		totalRow int
	}
	byGrain := map[string]*sums{}
	var grains []string
	for i := range int(rec.NumRows()) {
		lv := level.Value(i)
		if lv == mart.LevelDetail && len(m.Dims) == 0 {
			continue // the only level: nothing to compare with
		}
		g := grain.ValueStr(i)
		s := byGrain[g]
		if s == nil {
			s = &sums{exact: map[string]decimal128.Num{}, float: map[string]float64{}, totalRow: -1}
			byGrain[g] = s
			grains = append(grains, g)
		}
		if lv == mart.LevelTotal {
			s.totalRow = i
		} else if !slices.Contains(s.levels, lv) {
			s.levels = append(s.levels, lv)
		}
		for _, ms := range m.Measures {
			if !ms.Agg.Additive() {
				continue
			}
			a := rec.Column(cols[ms.Name])
			if a.IsNull(i) {
				continue
			}
			k := lv + "|" + ms.Name
			switch arr := a.(type) {
			case *array.Decimal128:
				s.exact[k] = s.exact[k].Add(arr.Value(i))
			case *array.Int64:
				s.exact[k] = s.exact[k].Add(decimal128.FromI64(arr.Value(i)))
			case *array.Float64:
				s.float[k] += arr.Value(i)
			}
		}
	}
	for _, g := range grains {
		s := byGrain[g]
		if s.totalRow < 0 {
			continue
		}
		for _, lv := range s.levels {
			for _, ms := range m.Measures {
				tk, lk := mart.LevelTotal+"|"+ms.Name, lv+"|"+ms.Name
				if tot, ok := s.exact[tk]; ok && tot != s.exact[lk] {
					flag(s.totalRow, fmt.Sprintf("%s total %s != sum of %s %s", ms.Name, tot.BigInt(), lv, s.exact[lk].BigInt()))
				}
				if tot, ok := s.float[tk]; ok && math.Abs(tot-s.float[lk]) > 1e-6*math.Max(1, math.Abs(tot)) {
					flag(s.totalRow, fmt.Sprintf("%s total %g != sum of %s %g", ms.Name, tot, lv, s.float[lk]))
				}
			}
		}
	}
}

// goldHistory is Gold's rows per partition before the run, which the row-count check
// compares with: read on first use and kept, so the passes of a run read it once.
type goldHistory struct {
	gt     *table.Table
	grain  string
	counts map[int64]int64
}

// rows returns the rows per grain value of the Gold table as the run found it.
func (h *goldHistory) rows(ctx context.Context) (map[int64]int64, error) {
	if h.counts != nil {
		return h.counts, nil
	}
	existing, ok, err := grainCounts(ctx, h.gt, h.grain)
	if err != nil {
		return nil, err
	}
	if !ok {
		existing = map[int64]int64{}
	}
	if !ok && h.gt.CurrentSnapshot() != nil {
		_, recs, err := h.gt.Scan(table.WithSelectedFields(h.grain)).ToArrowRecords(ctx)
		if err != nil {
			return nil, err
		}
		for r, err := range recs {
			if err != nil {
				return nil, err
			}
			g := r.Column(0)
			for i := range int(r.NumRows()) {
				existing[grainValue(g, i)]++
			}
			r.Release()
		}
	}
	h.counts = existing
	return existing, nil
}

// checkRowCounts compares each recomputed partition's row count with the mean of the
// trailing partitions already in Gold.
func checkRowCounts(ctx context.Context, hist *goldHistory, m MartSpec, rec arrow.RecordBatch, cols map[string]int, parts []int64, ck CheckSpec, f *Failure) error {
	existing, err := hist.rows(ctx)
	if err != nil {
		return err
	}
	now := map[int64]int64{}
	g := rec.Column(cols[m.GrainAs])
	for i := range int(rec.NumRows()) {
		now[grainValue(g, i)]++
	}
	for _, p := range parts {
		var prev []int64
		for q := range existing {
			if q < p {
				prev = append(prev, q)
			}
		}
		if len(prev) < ck.Trailing {
			continue // not enough history to judge
		}
		slices.Sort(prev)
		prev = prev[len(prev)-ck.Trailing:]
		var sum int64
		for _, q := range prev {
			sum += existing[q]
		}
		mean := float64(sum) / float64(len(prev))
		if mean > 0 && math.Abs(float64(now[p])-mean)/mean > ck.Tolerance {
			f.Count++
			if len(f.Examples) < maxExamples {
				f.Examples = append(f.Examples, fmt.Sprintf("%s: %d rows vs trailing mean %.1f", m.GrainString(p), now[p], mean))
			}
		}
	}
	return nil
}

func grainValue(a arrow.Array, i int) int64 {
	switch arr := a.(type) {
	case *array.Date32:
		return int64(arr.Value(i))
	case *array.Timestamp:
		return int64(arr.Value(i))
	}
	return 0
}
