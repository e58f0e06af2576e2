package mart

import (
	"fmt"
	"slices"
)

// Agg is the aggregate of a measure, as the config names it.
type Agg string

// The aggregates (docs/gold.md).
const (
	Sum           Agg = "sum"
	Count         Agg = "count"
	CountDistinct Agg = "count_distinct"
	Avg           Agg = "avg"
	Min           Agg = "min"
	Max           Agg = "max"
	Quantiles     Agg = "quantiles"
	CountIf       Agg = "count_if"
	SumIf         Agg = "sum_if"
	AvgIf         Agg = "avg_if"
	MaxBy         Agg = "max_by"
	MinBy         Agg = "min_by"
)

// Input is what an aggregate takes from a row.
type Input int

const (
	InputNone    Input = iota // no column (count counts rows)
	InputAny                  // a column of any type
	InputNumeric              // an int, float or decimal column
)

// Result is what an aggregate's finished value is, for every layer that types, serves or
// compares it: a new aggregate with one of these results needs no change there.
type Result int

const (
	ResultValue   Result = iota // a value of the measure's own column type, NULL over no input (sum, min, max)
	ResultCount                 // an Int64, never NULL: 0 over no input (count, count_distinct)
	ResultAverage               // a quotient: Decimal(38, S+6) over a decimal input, else a double; NULL over no input
	ResultList                  // a list of doubles, NULL (served as empty) over no input (quantiles)
)

// List is the hidden mergeable list a measure keeps on its carrier rows.
type List int

const (
	ListNone   List = iota
	ListKeys        // KeysCol: the distinct values as text (a uniqExact/uniq state)
	ListValues      // ValuesCol: the inputs as doubles (a groupArray state)
)

// AggDesc describes one aggregate for every layer: what it takes, what Gold writes,
// how ClickHouse keeps it and how check compares it.
type AggDesc struct {
	Agg   Agg
	Input Input
	List  List
	// Additive: the rows of a level sum to the coarser level's value (the consistency
	// check; the served rows are streamed as Gold has them).
	Additive bool
	// Simple is the ClickHouse SimpleAggregateFunction that merges the finished value
	// ("sum", "min", "max"); empty when the served value is finished from hidden
	// columns or a state.
	Simple string
	// Checked: check compares the sum of the value over a level's rows.
	Checked bool
	// Cond: the aggregate takes only the rows for which the measure's boolean if
	// expression is true. A conditional sum is 0, not NULL, when no input matched
	// (ClickHouse's sumIf over a non-Nullable column).
	Cond bool
	// As is the aggregate Gold computes (over the rows Cond keeps) and serving and
	// check treat the value as: count_if as count, sum_if as sum, with its Gold
	// columns; empty for the aggregate itself.
	As Agg
	// Result is what the finished value is (its type and NULL rule).
	Result Result
	// By: the aggregate takes a second column, by, and its value is the column's value on
	// the row with the largest (Extreme > 0) or smallest (Extreme < 0) by; of the rows
	// with that by, the largest or smallest value (ClickHouse's argMax(x, (by, x)) and
	// argMin(x, (by, x))). Rows where either is NULL are skipped; NULL over no row.
	// Gold keeps the by of the value in a hidden column (ByCol), so that groups merge.
	By      bool
	Extreme int
}

var aggs = []AggDesc{
	{Agg: Sum, Input: InputNumeric, Additive: true, Simple: "sum", Checked: true, Result: ResultValue},
	{Agg: Count, Input: InputNone, Additive: true, Simple: "sum", Checked: true, Result: ResultCount},
	{Agg: CountDistinct, Input: InputAny, List: ListKeys, Checked: true, Result: ResultCount},
	{Agg: Avg, Input: InputNumeric, Checked: true, Result: ResultAverage},
	{Agg: Min, Input: InputAny, Simple: "min", Checked: true, Result: ResultValue},
	{Agg: Max, Input: InputAny, Simple: "max", Checked: true, Result: ResultValue},
	{Agg: Quantiles, Input: InputNumeric, List: ListValues, Result: ResultList},
	{Agg: CountIf, Input: InputNone, Additive: true, Simple: "sum", Checked: true, Cond: true, As: Count, Result: ResultCount},
	{Agg: SumIf, Input: InputNumeric, Additive: true, Simple: "sum", Checked: true, Cond: true, As: Sum, Result: ResultValue},
	{Agg: AvgIf, Input: InputNumeric, Checked: true, Cond: true, As: Avg, Result: ResultAverage},
	{Agg: MaxBy, Input: InputAny, Result: ResultValue, By: true, Extreme: 1},
	{Agg: MinBy, Input: InputAny, Result: ResultValue, By: true, Extreme: -1},
}

// Aggs lists the aggregates in documentation order.
func Aggs() []Agg {
	out := make([]Agg, len(aggs))
	for i, d := range aggs {
		out[i] = d.Agg
	}
	return out
}

// Desc is the aggregate's descriptor; ok is false for an unknown aggregate.
func (a Agg) Desc() (AggDesc, bool) {
	i := slices.IndexFunc(aggs, func(d AggDesc) bool { return d.Agg == a })
	if i < 0 {
		return AggDesc{}, false
	}
	return aggs[i], true
}

// Valid reports whether a is a known aggregate.
func (a Agg) Valid() bool { _, ok := a.Desc(); return ok }

// Additive reports whether the rows of a level sum to the coarser level's value.
func (a Agg) Additive() bool { d, _ := a.Desc(); return d.Additive }

// Cond reports whether the aggregate takes an if expression (AggDesc.Cond).
func (a Agg) Cond() bool { d, _ := a.Desc(); return d.Cond }

// Served is the aggregate serving and check treat a's finished value as (AggDesc.As):
// a itself for every aggregate without a condition.
func (a Agg) Served() Agg {
	if d, _ := a.Desc(); d.As != "" {
		return d.As
	}
	return a
}

// List is the hidden list the aggregate keeps on carrier rows (ListNone: none).
func (a Agg) List() List { d, _ := a.Desc(); return d.List }

// ListCol names measure's hidden list column ("" when the aggregate keeps none).
func (a Agg) ListCol(measure string) string {
	switch a.List() {
	case ListKeys:
		return KeysCol(measure)
	case ListValues:
		return ValuesCol(measure)
	}
	return ""
}

// By reports whether the aggregate takes a by column (AggDesc.By).
func (a Agg) By() bool { d, _ := a.Desc(); return d.By }

// HiddenCols names the hidden Gold columns of a measure with aggregate a, in the order
// Gold writes them (docs/gold.md): avg's sum and count, a list, max_by's by.
func (a Agg) HiddenCols(measure string) []string {
	d, _ := a.Served().Desc()
	var out []string
	if d.Result == ResultAverage {
		out = append(out, SumCol(measure), CountCol(measure))
	}
	if l := a.ListCol(measure); l != "" {
		out = append(out, l)
	}
	if d.By {
		out = append(out, ByCol(measure))
	}
	return out
}

// Result is what the aggregate's finished value is (AggDesc.Result).
func (a Agg) Result() Result { d, _ := a.Desc(); return d.Result }

// Simple is the ClickHouse function that merges the finished values ("" for none).
func (a Agg) Simple() string { d, _ := a.Desc(); return d.Simple }

// CheckQuantile reports whether q is a valid quantile level: in (0, 1], where 1 is the
// largest value (nearest rank, docs/gold.md).
func CheckQuantile(q float64) error {
	if !(q > 0 && q <= 1) {
		return fmt.Errorf("quantile %v is not in (0, 1]", q)
	}
	return nil
}
