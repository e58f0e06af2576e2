package gold

import (
	"math"
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
	// count_distinct: the distinct values' ids (rank order after partial.finish; on the
	// base groups only) and their number.
	ids      []uint32
	distinct int64
	vals     []float64 // quantiles: every non-NULL input
}

// group is one output row: grain, level (index into the sets), dimension values, measures.
type group struct {
	grain int64
	set   int
	dims  []silver.Value
	accs  []acc
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
