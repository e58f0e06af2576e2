// Package gold computes declared KPI marts from Silver into gold.<mart>: a time grain,
// dimensions, measures and ROLLUP/CUBE/grouping-set levels, recomputed only for the grain
// partitions that Silver changes touched, and published only through a data-quality
// gateway whose critical failure leaves Gold as it was and opens the mart's circuit.
//
// The table layout is the contract with serving; docs/gold.md describes it.
package gold

import (
	"fmt"
	"slices"
	"strings"

	"goldbridge/lakehouse/silver"
)

// Dim is one dimension column of a mart.
type Dim struct {
	Name string
	Type silver.Type
}

// MeasureSpec is one aggregate of a mart.
type MeasureSpec struct {
	Name      string
	Agg       string // sum | count | count_distinct | avg | min | max
	Column    string
	InputType silver.Type
}

// CheckSpec is one data-quality gateway check.
type CheckSpec struct {
	Name      string
	Type      string // expr | not_null | unique_grain | row_count_anomaly | consistency
	Expr      string
	Columns   []string
	Severity  string // critical | warning
	Trailing  int
	Tolerance float64
}

// MartSpec is one mart as the gold package takes it.
type MartSpec struct {
	Name        string
	Table       string // gold.<mart>
	SourceTable string // silver.<entity>
	SourceKey   []string
	// SourceColumns are the Silver columns by name (the filter and grain may use any).
	SourceColumns map[string]silver.Type
	Filter        string
	GrainColumn   string
	GrainUnit     string // hour | day | month
	GrainAs       string
	Dims          []Dim
	Grouping      string // none | rollup | cube | sets
	GroupingSets  [][]string
	Measures      []MeasureSpec
	Checks        []CheckSpec
}

// Column names and summary keys of Gold tables.
const (
	ColGroupingLevel = "grouping_level"
	ColCalculatedAt  = "_calculated_at"
	ColRunID         = "_run_id"

	PropSilverSnapshot = "goldbridge.silver-snapshot-id"
	PropPartitions     = "goldbridge.partitions"
	PropRunID          = "goldbridge.run-id"
	PropWarnings       = "goldbridge.dq.warnings"
	PropFull           = "goldbridge.full"
	PropCircuit        = "goldbridge.circuit"
	PropCircuitReason  = "goldbridge.circuit.reason"
	PropCircuitSince   = "goldbridge.circuit.since"
)

// GroupingCol is the GROUPING flag column of a dimension.
func GroupingCol(dim string) string { return "grouping_" + dim }

// KeysCol, SumCol and CountCol name the hidden measure columns (docs/gold.md).
func KeysCol(m string) string  { return m + "__keys" }
func SumCol(m string) string   { return m + "__sum" }
func CountCol(m string) string { return m + "__count" }

// sets returns the grouping sets as index lists into Dims, finest first.
func (m MartSpec) sets() ([][]int, error) {
	n := len(m.Dims)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	switch m.Grouping {
	case "", "none":
		return [][]int{all}, nil
	case "rollup":
		var out [][]int
		for k := n; k >= 0; k-- {
			out = append(out, slices.Clone(all[:k]))
		}
		return out, nil
	case "cube":
		var out [][]int
		for mask := (1 << n) - 1; mask >= 0; mask-- {
			var s []int
			for i := range n {
				if mask&(1<<i) != 0 {
					s = append(s, i)
				}
			}
			out = append(out, s)
		}
		slices.SortStableFunc(out, func(a, b []int) int { return len(b) - len(a) })
		return out, nil
	case "sets":
		var out [][]int
		for _, set := range m.GroupingSets {
			var s []int
			for _, d := range set {
				i := slices.IndexFunc(m.Dims, func(x Dim) bool { return x.Name == d })
				if i < 0 {
					return nil, fmt.Errorf("grouping set dimension %q is not a dimension", d)
				}
				s = append(s, i)
			}
			slices.Sort(s)
			out = append(out, s)
		}
		slices.SortStableFunc(out, func(a, b []int) int { return len(b) - len(a) })
		return out, nil
	}
	return nil, fmt.Errorf("unknown grouping %q", m.Grouping)
}

// levelName is the readable grouping_level of a set: detail, by_<dims>, total.
func (m MartSpec) levelName(set []int) string {
	switch len(set) {
	case len(m.Dims):
		return "detail"
	case 0:
		return "total"
	}
	names := make([]string, len(set))
	for i, d := range set {
		names[i] = m.Dims[d].Name
	}
	return "by_" + strings.Join(names, "_")
}
