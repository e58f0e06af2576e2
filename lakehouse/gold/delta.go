package gold

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

// An increment that only added Silver rows is merged into the Gold partitions it touches
// rather than recomputed (issue 41): the new rows are aggregated alone (a delta pass),
// and every group of the partitions' Gold rows is merged with the delta's group of the
// same grain, level and dimensions, the way partial merges base groups (sums and counts
// add, minima and maxima compare, averages add their hidden sums and counts, max_by and
// min_by pick their pairs). It reads the delta's data files and the touched partitions'
// Gold files: its cost follows the delta, not the partitions' history.

// deltaRuns returns the run ids of the Silver commits in (from, to] when that change can
// be merged: every commit only added rows — an append (append mode's facts), or a
// commit that deleted nothing and replaced no version (an upsert of new keys only: its
// listed replaced grains are none) — and the mart keeps no list (a distinct count's keys
// or quantiles' values live on carrier rows only, so a coarser row could not be merged
// from a row of its own level). Commits without a run id (compaction, maintenance)
// change no row. ok is false when the change must be recomputed.
func (m MartSpec) deltaRuns(src *table.Table, from, to int64) (runs map[string]bool, ok bool) {
	if m.snapshot() || slices.ContainsFunc(m.Measures, func(ms MeasureSpec) bool { return ms.Agg.List() != mart.ListNone }) {
		return nil, false
	}
	md := src.Metadata()
	if md.SnapshotByID(from) == nil {
		return nil, false
	}
	runs = map[string]bool{}
	for s := md.SnapshotByID(to); s != nil && s.SnapshotID != from; {
		if s.Summary == nil {
			return nil, false
		}
		p := s.Summary.Properties
		if p[silver.PropReplay] == "true" {
			return nil, false
		}
		if id := p[silver.PropRunID]; id != "" {
			replaced, listed := p[silver.PropReplacedPrefix+m.GrainColumn]
			if !onlyAdded(s.Summary) && !(listed && replaced == "") {
				return nil, false
			}
			runs[id] = true
		}
		if s.ParentSnapshotID == nil {
			return nil, false // from is not an ancestor of to
		}
		s = md.SnapshotByID(*s.ParentSnapshotID)
	}
	return runs, len(runs) > 0
}

// onlyAdded reports whether a commit only added data files: an append, or a commit whose
// summary counts no deleted file or row and no delete file.
func onlyAdded(sum *table.Summary) bool {
	if sum.Operation == table.OpAppend {
		return true
	}
	for _, k := range []string{"deleted-data-files", "deleted-records", "added-delete-files", "added-equality-deletes",
		"added-position-deletes", "removed-delete-files", "added-dvs"} {
		if v := sum.Properties[k]; v != "" && v != "0" {
			return false
		}
	}
	return sum.Properties["added-records"] != ""
}

// deltaPass is the pass of a merged increment over parts: the rows runs wrote, NULL
// grains counted; a filter on the run id prunes the data files of earlier runs.
func (m MartSpec) deltaPass(src *table.Table, parts []int64, runs map[string]bool) pass {
	ps := m.passOf(src, parts)
	ps.runs, ps.readNulls = runs, true
	if partitionedByGrain(src, m) || sortedByGrain(src, m) {
		ps.filter = m.rangeFilter(ps.ranges, true)
	}
	ids := slices.Sorted(maps.Keys(runs))
	ps.filter = iceberg.NewAnd(ps.filter, iceberg.IsIn(iceberg.Reference(silver.ColRunID), ids...))
	return ps
}

// mergeGold merges a delta pass's groups into the Gold rows of its partitions, read back
// from gt (readGold); a group only one side has is kept as it is. The result is in rows'
// order.
func (p *partial) mergeGold(ctx context.Context, gt *table.Table, parts []int64, delta []*group) ([]*group, error) {
	old, err := p.readGold(ctx, gt, parts)
	if err != nil {
		return nil, fmt.Errorf("merge the delta into gold: %w", err)
	}
	index := make(map[string]*group, len(old))
	var kb []byte
	for _, g := range old {
		kb = p.groupKey(kb[:0], g)
		index[string(kb)] = g
	}
	out := old
	for _, d := range delta {
		kb = p.groupKey(kb[:0], d)
		o, ok := index[string(kb)]
		if !ok {
			out = append(out, d)
			continue
		}
		for i, ms := range p.m.Measures {
			o.accs[i].merge(&d.accs[i], ms)
		}
	}
	p.sortGroups(out)
	return out, nil
}

// groupKey appends the identity of g to b: its grain, level and dimension values.
func (p *partial) groupKey(b []byte, g *group) []byte {
	b = binary.AppendVarint(b, g.grain)
	b = binary.AppendVarint(b, int64(g.set))
	for i, d := range g.dims {
		if d.Null {
			b = append(b, 0)
			continue
		}
		t := keyText(d, p.m.Dims[i].Type)
		b = binary.AppendUvarint(append(b, 1), uint64(len(t)))
		b = append(b, t...)
	}
	return b
}

// readGold reads the Gold rows of parts back into groups: grain, level, dimensions and
// each measure's accumulator from its value and hidden columns (shape.read).
func (p *partial) readGold(ctx context.Context, gt *table.Table, parts []int64) ([]*group, error) {
	m := p.m
	levels := map[string]int{}
	for i, lv := range p.levels {
		levels[lv.Name] = i
	}
	_, recs, err := gt.Scan(table.WithRowFilter(m.grainIn(parts))).ToArrowRecords(ctx)
	if err != nil {
		return nil, err
	}
	var out []*group
	for rec, err := range recs {
		if err != nil {
			return nil, err
		}
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		level := col(mart.ColGroupingLevel)
		for i := range int(rec.NumRows()) {
			set, ok := levels[level.ValueStr(i)]
			if !ok {
				rec.Release()
				return nil, fmt.Errorf("gold row of level %q, which the mart does not compute", level.ValueStr(i))
			}
			g := &group{grain: silver.ValueAt(col(m.GrainAs), i, m.grainType()).I, set: set,
				dims: make([]silver.Value, len(m.Dims)), accs: make([]acc, len(m.Measures))}
			for d, dim := range m.Dims {
				g.dims[d] = owned(silver.ValueAt(col(dim.Name), i, dim.Type))
			}
			for k, ms := range m.Measures {
				shapeOf(ms).read(col, i, &g.accs[k], ms)
			}
			out = append(out, g)
		}
		rec.Release()
	}
	return out, nil
}

// owned is v with its string copied out of the Arrow buffer it points into.
func owned(v silver.Value) silver.Value {
	v.S = strings.Clone(v.S)
	return v
}
