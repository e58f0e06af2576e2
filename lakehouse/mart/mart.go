// Package mart is the contract of a Gold mart that gold, serving and sync share: the
// names of its columns (the hidden ones included), its grouping levels and which rows
// carry the mergeable lists that a coarser level's exact distinct counts and quantiles
// are rebuilt from. docs/marts.md describes it; no other package spells these names.
package mart

import (
	"fmt"
	"slices"
	"strings"
)

// Column names every Gold mart has.
const (
	ColGroupingLevel = "grouping_level"
	ColCalculatedAt  = "_calculated_at"
	ColRunID         = "_run_id"
)

// Values of grouping_level for the finest (every dimension kept) and the coarsest level.
const (
	LevelDetail = "detail"
	LevelTotal  = "total"
)

// GroupingCol is the GROUPING flag column of a dimension: 0 kept, 1 rolled up.
func GroupingCol(dim string) string { return "grouping_" + dim }

// SumCol and CountCol name the hidden sum and count of an avg measure.
func SumCol(measure string) string   { return measure + "__sum" }
func CountCol(measure string) string { return measure + "__count" }

// KeysCol names the hidden distinct-key list of a count_distinct measure and ValuesCol
// the hidden value list of a quantiles measure; only rows of a carrier level hold them
// (Level.Carries).
func KeysCol(measure string) string   { return measure + "__keys" }
func ValuesCol(measure string) string { return measure + "__values" }

// ByCol names the hidden by column of a max_by or min_by measure: the by of its value.
func ByCol(measure string) string { return measure + "__by" }

// Level is one grouping level of a mart.
type Level struct {
	Keep []int  // indexes of the kept dimensions, ascending
	Name string // its grouping_level value
	// From is the index of the level whose rows hold the lists this level's rows are
	// merged from: the level itself when no computed level is finer (a carrier), else
	// the first carrier that keeps every dimension this one keeps.
	From int
}

// Carries reports whether level i (of the levels it was expanded with) is a carrier:
// its rows hold the distinct keys and quantile values.
func (l Level) Carries(i int) bool { return l.From == i }

// Mask is the level's grouping flags as bits: bit j set when dimension j is rolled up.
func (l Level) Mask(dims int) uint64 {
	m := uint64(1)<<dims - 1
	for _, d := range l.Keep {
		m &^= 1 << d
	}
	return m
}

// Groupings a mart may declare.
const (
	GroupingNone   = "none"
	GroupingRollup = "rollup"
	GroupingCube   = "cube"
	GroupingSets   = "sets"
)

// Levels expands a grouping over dims into its levels, finest first (by the number of
// kept dimensions, then as declared), without duplicates. sets (the kept dimension names
// of each set) is used for "sets" only.
func Levels(grouping string, dims []string, sets [][]string) ([]Level, error) {
	n := len(dims)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	var keeps [][]int
	switch grouping {
	case "", GroupingNone:
		keeps = [][]int{all}
	case GroupingRollup:
		for k := n; k >= 0; k-- {
			keeps = append(keeps, slices.Clone(all[:k]))
		}
	case GroupingCube:
		if n > 16 {
			return nil, fmt.Errorf("cube of %d dimensions: at most 16", n)
		}
		for mask := (1 << n) - 1; mask >= 0; mask-- {
			var s []int
			for i := range n {
				if mask&(1<<i) != 0 {
					s = append(s, i)
				}
			}
			keeps = append(keeps, s)
		}
	case GroupingSets:
		if len(sets) == 0 {
			return nil, fmt.Errorf("grouping sets: none declared")
		}
		for _, set := range sets {
			var s []int
			for _, d := range set {
				i := slices.Index(dims, d)
				if i < 0 {
					return nil, fmt.Errorf("grouping set dimension %q is not a dimension", d)
				}
				if !slices.Contains(s, i) {
					s = append(s, i)
				}
			}
			slices.Sort(s)
			keeps = append(keeps, s)
		}
	default:
		return nil, fmt.Errorf("unknown grouping %q", grouping)
	}
	slices.SortStableFunc(keeps, func(a, b []int) int { return len(b) - len(a) })
	var out []Level
	for _, k := range keeps {
		if slices.ContainsFunc(out, func(l Level) bool { return slices.Equal(l.Keep, k) }) {
			continue
		}
		out = append(out, Level{Keep: k, Name: LevelName(dims, k)})
	}
	for i := range out {
		out[i].From = i
		for j := range i {
			if out[j].Carries(j) && subset(out[i].Keep, out[j].Keep) {
				out[i].From = j
				break
			}
		}
	}
	return out, nil
}

// subset reports whether every element of a (sorted) is in b (sorted).
func subset(a, b []int) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			return false
		}
	}
	return true
}

// LevelName is the grouping_level value of the level keeping dims[keep...]: detail
// (every dimension, also when there are none), total (none) or by_<dim>[_<dim>...].
func LevelName(dims []string, keep []int) string {
	switch len(keep) {
	case len(dims):
		return LevelDetail
	case 0:
		return LevelTotal
	}
	names := make([]string, len(keep))
	for i, d := range keep {
		names[i] = dims[d]
	}
	return "by_" + strings.Join(names, "_")
}

// Carriers are the names of the carrier levels.
func Carriers(levels []Level) []string {
	var out []string
	for i, l := range levels {
		if l.Carries(i) {
			out = append(out, l.Name)
		}
	}
	return out
}
