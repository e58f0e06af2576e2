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
	min   silver.Value // max_by, min_by: the by of the value kept (acc.pick)
	max   silver.Value // max_by, min_by: the value kept
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
		return decimalFloat(v.D, t.Scale)
	}
	return float64(v.I)
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// decimalFloat is the float64 nearest to the decimal d·10^-scale, as ClickHouse's
// toFloat64 gives it: one correctly rounded division when the unscaled value and 10^scale
// are exact doubles (arrow's ToFloat64 multiplies by 10^-scale, which is off by an ulp
// for values such as 291.53), else through the decimal text.
func decimalFloat(d decimal128.Num, scale int) float64 {
	hi, lo := d.HighBits(), d.LowBits()
	if scale < len(pow10) && (hi == 0 && lo < 1<<53 || hi == -1 && lo > math.MaxUint64-1<<53) {
		return float64(int64(lo)) / pow10[scale]
	}
	f, err := strconv.ParseFloat(d.ToString(int32(scale)), 64)
	if err != nil {
		return d.ToFloat64(int32(scale))
	}
	return f
}

// nearestRank is the q-quantile of sorted values by nearest rank: the element at the
// 1-based position ceil(q·n), i.e. the smallest value v with at least q·n values <= v.
// Serving's view takes the same element of the merged sorted array (docs/serving.md).
func nearestRank(sorted []float64, q float64) float64 {
	n := len(sorted)
	k := int(math.Ceil(q * float64(n)))
	return sorted[min(max(k, 1), n)-1]
}
