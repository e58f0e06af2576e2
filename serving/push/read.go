package push

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
)

// GoldGrain is one Gold partition (grain value) as a push reads it: its rows, and each
// row's aggregate states of the measures asked, as a push builds them (ClientStates).
type GoldGrain struct {
	// Recs are the grain's rows: the columns asked, in order, then the measures' lists.
	// They are released when the iteration moves on.
	Recs   []arrow.RecordBatch
	states rowStates
}

// State is the serialized state of the s-th measure asked of the grain's i-th row
// (counting the rows of Recs in order): uniqExact(String) for a count_distinct (a
// varuint count, then the keys' SipHash-128), groupArray(Float64) for quantiles (a
// varuint count, then the values). Valid until the iteration moves on.
func (g GoldGrain) State(s, i int) []byte {
	return g.states.bufs[s][g.states.offs[s][i]:g.states.offs[s][i+1]]
}

// ReadGrains yields the Gold rows of the sorted partitions parts one grain at a time,
// in grain order, read as a push reads them (goldGroups), with the states a push with
// ClientStates builds for each measure of measures (each a count_distinct or
// quantiles measure of m). fields must hold grouping_level, the dimensions and their
// grouping flags when measures is not empty.
func ReadGrains(ctx context.Context, m *serving.Mart, tbl *table.Table, parts []Partition, fields []string, measures []serving.Measure) (iter.Seq2[GoldGrain, error], error) {
	all := slices.Clone(fields)
	specs := make([]stateSpec, len(measures))
	for i, ms := range measures {
		if ms.Agg.List() == mart.ListNone {
			return nil, fmt.Errorf("mart %s: measure %s keeps no state", m.Name, ms.Name)
		}
		specs[i] = stateSpec{field: len(all), distinct: ms.Agg.List() == mart.ListKeys}
		all = append(all, ms.Agg.ListCol(ms.Name))
	}
	groups, err := goldGroups(ctx, m, tbl, parts, all)
	if err != nil {
		return nil, err
	}
	var gs *grainStates
	if len(specs) > 0 {
		if gs, err = newGrainStates(m, all, specs); err != nil {
			return nil, err
		}
	}
	return func(yield func(GoldGrain, error) bool) {
		for recs, err := range groups {
			if err != nil {
				yield(GoldGrain{}, err)
				return
			}
			g := GoldGrain{Recs: recs}
			if gs != nil {
				if err := gs.compute(recs); err != nil {
					yield(GoldGrain{}, fmt.Errorf("mart %s states: %w", m.Name, err))
					return
				}
				g.states = rowStates{bufs: gs.bufs, offs: gs.offs}
			}
			if !yield(g, nil) {
				return
			}
		}
	}, nil
}
