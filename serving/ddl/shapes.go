package ddl

import (
	"fmt"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
)

// shape is how ClickHouse keeps one served aggregate (serving.Measure.Agg, the aggregate
// a measure is served as: mart.Agg.Served). Every function of this package that depends
// on the aggregate reads its shape, so that the served tier of an aggregate is one entry
// of shapes (lakehouse/mart's descriptor says what Gold keeps of it).
type shape struct {
	// stored are its columns in <t>: SimpleAggregateFunction or AggregateFunction.
	stored func(m *serving.Mart, ms serving.Measure) []Column
	// wire are its Gold columns streamed into <t>__detail (an aggregating mart).
	wire func(ms serving.Measure) []Column
	// merge is its value over several rows of <t> (FinalExpr).
	merge func(m *serving.Mart, ms serving.Measure) string
	// finish is its finished value from one row's stored columns; nil when the value is
	// stored as is (a SimpleAggregateFunction: not Finished).
	finish func(ms serving.Measure) string
	// build selects its stored columns from the carrier rows of <t>__detail, under
	// GROUP BY GROUPING SETS (statesInsert).
	build func(m *serving.Mart, ms serving.Measure) []string
}

// simpleShape is the shape of an aggregate ClickHouse merges with the SimpleAggregateFunction
// fn (sum, min, max) and stores in valueType: count's Int64 is never NULL, the others'
// values are NULL over no input.
func simpleShape(fn string, nullable bool) shape {
	typ := func(ms serving.Measure) string {
		if nullable {
			return valueType(ms)
		}
		return ms.Type
	}
	q := serving.Q
	return shape{
		stored: func(_ *serving.Mart, ms serving.Measure) []Column {
			return []Column{{ms.Name, "SimpleAggregateFunction(" + fn + ", " + typ(ms) + ")"}}
		},
		wire:  func(ms serving.Measure) []Column { return []Column{{ms.Name, typ(ms)}} },
		merge: func(_ *serving.Mart, ms serving.Measure) string { return fn + "(" + q(ms.Name) + ")" },
		build: func(_ *serving.Mart, ms serving.Measure) []string {
			return []string{fn + "(" + q(ms.Name) + ") AS " + q(ms.Name)}
		},
	}
}

// byShape is the shape of max_by (fn argMax) and min_by (fn argMin): a state of the
// value at the extreme (by, value) pair, the tie rule of Gold's (mart.AggDesc.By). A
// NULL value or by is no input (the Null combinator skips the NULL first argument), so
// a state of no input finishes NULL.
func byShape(fn string) shape {
	q := serving.Q
	typ := func(ms serving.Measure) string {
		return "AggregateFunction(" + fn + ", " + valueType(ms) + ", Tuple(" + ms.ByType + ", " + ms.Type + "))"
	}
	return shape{
		stored: func(_ *serving.Mart, ms serving.Measure) []Column { return []Column{{StateColumn(ms), typ(ms)}} },
		wire: func(ms serving.Measure) []Column {
			return []Column{{ms.Name, valueType(ms)}, {mart.ByCol(ms.Name), "Nullable(" + ms.ByType + ")"}}
		},
		merge:  func(_ *serving.Mart, ms serving.Measure) string { return fn + "Merge(" + q(StateColumn(ms)) + ")" },
		finish: func(ms serving.Measure) string { return "finalizeAggregation(" + q(StateColumn(ms)) + ")" },
		build: func(_ *serving.Mart, ms serving.Measure) []string {
			v, by := q(ms.Name), q(mart.ByCol(ms.Name))
			return []string{fmt.Sprintf("CAST(%sState(if(isNull(%s), NULL, %s), (assumeNotNull(%s), assumeNotNull(%s))), %s) AS %s",
				fn, by, v, by, v, serving.QS(typ(ms)), q(StateColumn(ms)))}
		},
	}
}

var shapes = map[mart.Agg]shape{
	mart.Count: simpleShape("sum", false),
	mart.Sum:   simpleShape("sum", true),
	mart.Min:   simpleShape("min", true),
	mart.Max:   simpleShape("max", true),
	mart.Avg: {
		stored: func(_ *serving.Mart, ms serving.Measure) []Column {
			return []Column{{avgSumName(ms), "SimpleAggregateFunction(sum, " + ms.Type + ")"}, {avgCountName(ms), "SimpleAggregateFunction(sum, Int64)"}}
		},
		wire: func(ms serving.Measure) []Column {
			return []Column{{avgSumName(ms), ms.Type}, {avgCountName(ms), "Int64"}}
		},
		merge: func(_ *serving.Mart, ms serving.Measure) string {
			return avgExpr(ms, "sum("+serving.Q(avgSumName(ms))+")", "sum("+serving.Q(avgCountName(ms))+")")
		},
		finish: func(ms serving.Measure) string {
			return avgExpr(ms, serving.Q(avgSumName(ms)), serving.Q(avgCountName(ms)))
		},
		build: func(_ *serving.Mart, ms serving.Measure) []string {
			q := serving.Q
			return []string{"sum(" + q(avgSumName(ms)) + ") AS " + q(avgSumName(ms)), "sum(" + q(avgCountName(ms)) + ") AS " + q(avgCountName(ms))}
		},
	},
	mart.CountDistinct: {
		stored: func(m *serving.Mart, ms serving.Measure) []Column {
			return []Column{{StateColumn(ms), distinctType(m)}}
		},
		wire: func(ms serving.Measure) []Column { return []Column{{mart.KeysCol(ms.Name), "Array(String)"}} },
		merge: func(m *serving.Mart, ms serving.Measure) string {
			return "toInt64(" + distinctFn(m) + "Merge(" + serving.Q(StateColumn(ms)) + "))"
		},
		finish: func(ms serving.Measure) string {
			return "toInt64(finalizeAggregation(" + serving.Q(StateColumn(ms)) + "))"
		},
		build: func(m *serving.Mart, ms serving.Measure) []string {
			keys := serving.Q(mart.KeysCol(ms.Name))
			if m.Distinct == serving.DistinctBitmap {
				return []string{bitmapBuild(keys) + " AS " + serving.Q(StateColumn(ms))}
			}
			return []string{fmt.Sprintf("CAST(%sArrayState(%s), %s) AS %s",
				m.Distinct, keys, serving.QS(distinctType(m)), serving.Q(StateColumn(ms)))}
		},
	},
	mart.MaxBy: byShape("argMax"),
	mart.MinBy: byShape("argMin"),
	mart.Quantiles: {
		stored: func(_ *serving.Mart, ms serving.Measure) []Column {
			return []Column{{StateColumn(ms), "AggregateFunction(groupArray, Float64)"}}
		},
		wire: func(ms serving.Measure) []Column { return []Column{{mart.ValuesCol(ms.Name), "Array(Float64)"}} },
		merge: func(_ *serving.Mart, ms serving.Measure) string {
			return quantilesExpr(ms, "groupArrayMerge("+serving.Q(StateColumn(ms))+")")
		},
		finish: func(ms serving.Measure) string {
			return quantilesExpr(ms, "finalizeAggregation("+serving.Q(StateColumn(ms))+")")
		},
		build: func(_ *serving.Mart, ms serving.Measure) []string {
			return []string{fmt.Sprintf("CAST(groupArrayArrayState(%s), 'AggregateFunction(groupArray, Float64)') AS %s",
				serving.Q(mart.ValuesCol(ms.Name)), serving.Q(StateColumn(ms)))}
		},
	},
}

// distinctFn is the aggregate function of a count_distinct state (serving.Mart.Distinct).
func distinctFn(m *serving.Mart) string {
	if m.Distinct == serving.DistinctBitmap {
		return "groupBitmap"
	}
	return m.Distinct
}

// distinctType is the stored type of a count_distinct state: a bitmap of the keys' ids
// (keydict.go), or a uniqExact/uniq state of the keys.
func distinctType(m *serving.Mart) string {
	if m.Distinct == serving.DistinctBitmap {
		return bitmapType
	}
	return "AggregateFunction(" + m.Distinct + ", String)"
}

// shapeOf is the shape of a measure's served aggregate. serving.NewMart serves only the
// aggregates of shapes (TestEveryServedAggregateHasAShape); another one has no columns
// and merges to NULL, as before shapes existed.
func shapeOf(ms serving.Measure) shape {
	if s, ok := shapes[ms.Agg]; ok {
		return s
	}
	return shape{
		stored: func(*serving.Mart, serving.Measure) []Column { return nil },
		wire:   func(serving.Measure) []Column { return nil },
		merge:  func(*serving.Mart, serving.Measure) string { return "NULL" },
		build:  func(*serving.Mart, serving.Measure) []string { return nil },
	}
}
