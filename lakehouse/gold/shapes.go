package gold

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

// shape is how Gold writes one served aggregate (mart.Agg.Served: count_if as count,
// sum_if as sum, avg_if as avg): its value column, the hidden columns it keeps for
// serving, how a finished group writes them, and how two groups merge. Every place of
// this package that depends on the aggregate reads its shape, except the per-row fold
// (baseGroup.add), a hot loop kept as one switch. lakehouse/mart's descriptor says what
// the aggregate is for every layer; serving/ddl's shapes how ClickHouse keeps it.
type shape struct {
	// value is the measure's column.
	value func(ms MeasureSpec) outCol
	// hidden are the columns it keeps for serving, after every measure's value (docs/gold.md).
	hidden func(ms MeasureSpec) []outCol
	// write appends a finished group's value.
	write func(bl array.Builder, a *acc, ms MeasureSpec)
	// writeHidden appends a group's hidden columns; carries says the row is a carrier
	// (the lists live on carrier rows only), keys gives a distinct count's key texts.
	writeHidden func(next func() array.Builder, a *acc, ms MeasureSpec, carries bool, keys func() []string)
	// merge folds group b's accumulator into a's; nil: nothing beyond the count (a
	// distinct count is counted over the union of the ids instead).
	merge func(a, b *acc, ms MeasureSpec)
	// read sets a from row i of the group's Gold columns, so that a delta merges into it
	// (mergeGold); nil for an aggregate whose rows do not hold what merges (the lists
	// live on carrier rows only: deltaRuns does not merge a mart with one).
	read func(col func(string) arrow.Array, i int, a *acc, ms MeasureSpec)
}

// readSum sets a's sums from a sum column of type t (a NULL sum: no input).
func readSum(a *acc, v silver.Value, in silver.Type) {
	if v.Null {
		return
	}
	a.n = max(a.n, 1)
	switch in.Kind {
	case silver.Decimal:
		a.dsum = v.D
	case silver.Float64:
		a.fsum = v.F
	default:
		a.isum = v.I
	}
}

// readPair sets a's kept pair (min, max slots: min/max's range, max_by's by and value).
func readPair(a *acc, lo, hi silver.Value) {
	if hi.Null {
		return
	}
	a.min, a.max, a.hasMM, a.n = owned(lo), owned(hi), true, max(a.n, 1)
}

// mergeSums adds b's sums to a's (sum, avg).
func mergeSums(a, b *acc, _ MeasureSpec) {
	a.dsum = a.dsum.Add(b.dsum)
	a.isum += b.isum
	a.fsum += b.fsum
}

// mergeMinMax widens a's range by b's (min, max).
func mergeMinMax(a, b *acc, ms MeasureSpec) {
	if b.hasMM {
		if !a.hasMM || less(b.min, a.min, ms.InputType) {
			a.min = b.min
		}
		if !a.hasMM || less(a.max, b.max, ms.InputType) {
			a.max = b.max
		}
		a.hasMM = true
	}
}

// minMaxShape writes the smallest (max false) or largest input.
func minMaxShape(max bool) shape {
	return shape{
		value: func(ms MeasureSpec) outCol { return col(ms.Name, ms.InputType, false) },
		write: func(bl array.Builder, a *acc, ms MeasureSpec) {
			v := a.min
			if max {
				v = a.max
			}
			if !a.hasMM {
				v = silver.Value{Null: true}
			}
			appendValue(bl, v, ms.InputType)
		},
		merge: mergeMinMax,
		read: func(col func(string) arrow.Array, i int, a *acc, ms MeasureSpec) {
			v := silver.ValueAt(col(ms.Name), i, ms.InputType)
			readPair(a, v, v)
		},
	}
}

// byShape keeps the value at the largest (max_by) or smallest (min_by) by, and that by
// in a hidden column, so that groups merge exactly (acc.pick).
var byShape = shape{
	value:  func(ms MeasureSpec) outCol { return col(ms.Name, ms.InputType, false) },
	hidden: func(ms MeasureSpec) []outCol { return []outCol{col(mart.ByCol(ms.Name), ms.ByType, false)} },
	write: func(bl array.Builder, a *acc, ms MeasureSpec) {
		appendValue(bl, kept(a, a.max), ms.InputType)
	},
	read: func(col func(string) arrow.Array, i int, a *acc, ms MeasureSpec) {
		readPair(a, silver.ValueAt(col(mart.ByCol(ms.Name)), i, ms.ByType), silver.ValueAt(col(ms.Name), i, ms.InputType))
	},
	writeHidden: func(next func() array.Builder, a *acc, ms MeasureSpec, _ bool, _ func() []string) {
		appendValue(next(), kept(a, a.min), ms.ByType)
	},
	merge: func(a, b *acc, ms MeasureSpec) {
		if b.hasMM {
			a.pick(b.min, b.max, ms)
		}
	},
}

// kept is v, or NULL when the group kept no pair.
func kept(a *acc, v silver.Value) silver.Value {
	if !a.hasMM {
		return silver.Value{Null: true}
	}
	return v
}

var shapes = map[mart.Agg]shape{
	mart.Sum: {
		value: func(ms MeasureSpec) outCol { return col(ms.Name, sumType(ms.InputType), false) },
		write: func(bl array.Builder, a *acc, ms MeasureSpec) {
			if ms.Agg.Cond() {
				// No row matched (or every matched input was NULL): the sums are 0, and
				// so is a conditional sum (not NULL as a sum), as ClickHouse's sumIf.
				a.n = max(a.n, 1)
			}
			appendSum(bl, *a, ms.InputType)
		},
		merge: mergeSums,
		read: func(col func(string) arrow.Array, i int, a *acc, ms MeasureSpec) {
			readSum(a, silver.ValueAt(col(ms.Name), i, sumType(ms.InputType)), ms.InputType)
		},
	},
	mart.Count: {
		value: func(ms MeasureSpec) outCol { return col(ms.Name, longT, true) },
		write: func(bl array.Builder, a *acc, _ MeasureSpec) { bl.(*array.Int64Builder).Append(a.n) },
		read: func(col func(string) arrow.Array, i int, a *acc, ms MeasureSpec) {
			a.n = silver.ValueAt(col(ms.Name), i, silver.Type{Kind: silver.Int64}).I
		},
	},
	mart.CountDistinct: {
		value: func(ms MeasureSpec) outCol { return col(ms.Name, longT, true) },
		hidden: func(ms MeasureSpec) []outCol {
			return []outCol{{name: mart.KeysCol(ms.Name),
				ice:   &iceberg.ListType{Element: iceberg.PrimitiveTypes.String, ElementRequired: true},
				arrow: arrow.ListOfNonNullable(arrow.BinaryTypes.String)}}
		},
		write: func(bl array.Builder, a *acc, _ MeasureSpec) { bl.(*array.Int64Builder).Append(a.distinct) },
		writeHidden: func(next func() array.Builder, _ *acc, _ MeasureSpec, carries bool, keys func() []string) {
			lb := next().(*array.ListBuilder)
			if !carries {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			vb := lb.ValueBuilder().(*array.StringBuilder)
			// One by one: AppendValues reserves exactly, so repeated calls copy the
			// whole data buffer every time.
			for _, k := range keys() {
				vb.Append(k)
			}
		},
	},
	mart.Avg: {
		value: func(ms MeasureSpec) outCol { return col(ms.Name, avgType(ms.InputType), false) },
		hidden: func(ms MeasureSpec) []outCol {
			return []outCol{col(mart.SumCol(ms.Name), sumType(ms.InputType), false), col(mart.CountCol(ms.Name), longT, true)}
		},
		write: func(bl array.Builder, a *acc, ms MeasureSpec) {
			switch {
			case a.n == 0:
				bl.AppendNull()
			case ms.InputType.Kind == silver.Decimal:
				bl.(*array.Decimal128Builder).Append(avgDecimal(a.dsum, a.n))
			case ms.InputType.Kind == silver.Float64:
				bl.(*array.Float64Builder).Append(a.fsum / float64(a.n))
			default:
				bl.(*array.Float64Builder).Append(float64(a.isum) / float64(a.n))
			}
		},
		writeHidden: func(next func() array.Builder, a *acc, ms MeasureSpec, _ bool, _ func() []string) {
			appendSum(next(), *a, ms.InputType)
			next().(*array.Int64Builder).Append(a.n)
		},
		merge: mergeSums,
		read: func(col func(string) arrow.Array, i int, a *acc, ms MeasureSpec) {
			readSum(a, silver.ValueAt(col(mart.SumCol(ms.Name)), i, sumType(ms.InputType)), ms.InputType)
			a.n = silver.ValueAt(col(mart.CountCol(ms.Name)), i, silver.Type{Kind: silver.Int64}).I
		},
	},
	mart.Min:   minMaxShape(false),
	mart.Max:   minMaxShape(true),
	mart.MaxBy: byShape,
	mart.MinBy: byShape,
	mart.Quantiles: {
		value:  func(ms MeasureSpec) outCol { return doubleList(ms.Name) },
		hidden: func(ms MeasureSpec) []outCol { return []outCol{doubleList(mart.ValuesCol(ms.Name))} },
		write: func(bl array.Builder, a *acc, ms MeasureSpec) {
			lb := bl.(*array.ListBuilder)
			if len(a.vals) == 0 {
				lb.AppendNull()
				return
			}
			slices.Sort(a.vals) // the __values list is written sorted too
			lb.Append(true)
			vb := lb.ValueBuilder().(*array.Float64Builder)
			for _, q := range ms.Quantiles {
				vb.Append(nearestRank(a.vals, q))
			}
		},
		writeHidden: func(next func() array.Builder, a *acc, _ MeasureSpec, carries bool, _ func() []string) {
			lb := next().(*array.ListBuilder)
			if !carries {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			lb.ValueBuilder().(*array.Float64Builder).AppendValues(a.vals, nil)
		},
		merge: func(a, b *acc, _ MeasureSpec) { a.vals = append(a.vals, b.vals...) },
	},
}

// shapeOf is the shape of a measure's served aggregate; the spec is validated, so every
// measure has one (TestEveryAggregateHasAGoldShape).
func shapeOf(ms MeasureSpec) shape { return shapes[ms.Agg.Served()] }
