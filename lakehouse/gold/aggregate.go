package gold

import (
	"math"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"goldbridge/lakehouse/silver"
)

// acc accumulates one measure of one group.
type acc struct {
	n     int64 // non-NULL inputs (count: rows)
	dsum  decimal128.Num
	isum  int64
	fsum  float64
	min   silver.Value
	max   silver.Value
	hasMM bool
	keys  map[string]struct{}
	vals  []float64 // quantiles: every non-NULL input
}

// group is one output row being accumulated: grain, level, dimension values, measures.
type group struct {
	grain int64
	set   int
	dims  []silver.Value
	accs  []acc
}

// add folds one row's measure inputs into the group.
func (g *group) add(ms []MeasureSpec, vals []silver.Value) {
	for i, m := range ms {
		a := &g.accs[i]
		if m.Agg == "count" {
			a.n++
			continue
		}
		v := vals[i]
		if v.Null {
			continue
		}
		a.n++
		switch m.Agg {
		case "sum", "avg":
			switch m.InputType.Kind {
			case silver.Decimal:
				a.dsum = a.dsum.Add(v.D)
			case silver.Float64:
				a.fsum += v.F
			default:
				a.isum += v.I
			}
		case "min", "max":
			if !a.hasMM || less(v, a.min, m.InputType) {
				a.min = v
			}
			if !a.hasMM || less(a.max, v, m.InputType) {
				a.max = v
			}
			a.hasMM = true
		case "count_distinct":
			if a.keys == nil {
				a.keys = map[string]struct{}{}
			}
			a.keys[keyText(v, m.InputType)] = struct{}{}
		case "quantiles":
			a.vals = append(a.vals, floatOf(v, m.InputType))
		}
	}
}

func less(a, b silver.Value, t silver.Type) bool {
	switch t.Kind {
	case silver.String:
		return a.S < b.S
	case silver.Float64:
		return a.F < b.F
	case silver.Decimal:
		return a.D.Less(b.D)
	case silver.Bool:
		return !a.B && b.B
	}
	return a.I < b.I
}

// keyText renders a distinct-count input as text (the __keys list and uniqExact input).
func keyText(v silver.Value, t silver.Type) string {
	switch t.Kind {
	case silver.String:
		return v.S
	case silver.Decimal:
		return v.D.ToString(int32(t.Scale))
	case silver.Float64:
		return strconv.FormatFloat(v.F, 'g', -1, 64)
	case silver.Bool:
		return strconv.FormatBool(v.B)
	}
	return strconv.FormatInt(v.I, 10)
}

// avgScaleExtra is how many decimal places an average of decimals adds to the input's.
const avgScaleExtra = 6

// avgDecimal is sum/n at scale+avgScaleExtra, rounded half away from zero.
func avgDecimal(sum decimal128.Num, n int64) decimal128.Num {
	num := sum.Mul(decimal128.GetScaleMultiplier(avgScaleExtra))
	neg := num.Sign() < 0
	if neg {
		num = num.Negate()
	}
	q, r := num.Div(decimal128.FromI64(n))
	if r.Mul(decimal128.FromI64(2)).GreaterEqual(decimal128.FromI64(n)) {
		q = q.Add(decimal128.FromI64(1))
	}
	if neg {
		q = q.Negate()
	}
	return q
}

// sortedKeys returns a group's distinct values in order (deterministic output).
func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// floatOf is a numeric input as float64 (quantiles are computed on doubles).
func floatOf(v silver.Value, t silver.Type) float64 {
	switch t.Kind {
	case silver.Float64:
		return v.F
	case silver.Decimal:
		return v.D.ToFloat64(int32(t.Scale))
	}
	return float64(v.I)
}

// nearestRank is the q-quantile of sorted values by nearest rank: the element at the
// 1-based position ceil(q·n), i.e. the smallest value v with at least q·n values <= v.
// Serving's view takes the same element of the merged sorted array (docs/serving.md).
func nearestRank(sorted []float64, q float64) float64 {
	n := len(sorted)
	k := int(math.Ceil(q * float64(n)))
	return sorted[min(max(k, 1), n)-1]
}
