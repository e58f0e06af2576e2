package gold

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/iceberg-go/table"
	"github.com/cespare/xxhash/v2"

	"goldbridge/lakehouse/silver"
)

// PartitionOf returns the Gold partition (as GrainString) that a Silver row whose grain
// column holds v feeds; "" for a null grain or a snapshot-mode mart.
func (m MartSpec) PartitionOf(v silver.Value) string {
	if v.Null || m.snapshot() {
		return ""
	}
	return m.GrainString(m.grainOf(v, m.SourceColumns[m.GrainColumn]))
}

// IsSnapshot reports whether the mart appends a periodic snapshot (ModeSnapshot): its
// past periods are states that cannot be recomputed.
func (m MartSpec) IsSnapshot() bool { return m.snapshot() }

// ChangedGrains compares the mart's source rows in two snapshots of its Silver table
// src, grain by grain, on every source column (an order-independent sum of row hashes
// and a row count per grain), and returns the grains that differ, sorted: the only Gold
// partitions a computation from snapshot to can make different from one from snapshot
// from. Rows without a grain value feed no partition and are not compared. A forget
// recomputes only these (Options.Grains).
func (m MartSpec) ChangedGrains(ctx context.Context, src *table.Table, from, to int64) ([]int64, error) {
	a, err := m.grainPrints(ctx, src, from)
	if err != nil {
		return nil, fmt.Errorf("silver snapshot %d: %w", from, err)
	}
	b, err := m.grainPrints(ctx, src, to)
	if err != nil {
		return nil, fmt.Errorf("silver snapshot %d: %w", to, err)
	}
	var out []int64
	for g, p := range a {
		if b[g] != p {
			out = append(out, g)
		}
	}
	for g := range b {
		if _, ok := a[g]; !ok {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out, nil
}

// grainPrint is the fingerprint of one grain's Silver rows.
type grainPrint struct {
	rows int64
	sum  uint64
}

// grainPrints fingerprints the rows of snapshot snap of src per grain.
func (m MartSpec) grainPrints(ctx context.Context, src *table.Table, snap int64) (map[int64]grainPrint, error) {
	names := slices.Sorted(maps.Keys(m.SourceColumns))
	_, recs, err := src.Scan(table.WithSnapshotID(snap), table.WithSelectedFields(names...)).ToArrowRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int64]grainPrint{}
	grainT := m.SourceColumns[m.GrainColumn]
	var buf []byte
	for rec, err := range recs {
		if err != nil {
			return nil, err
		}
		sch := rec.Schema()
		gi := sch.FieldIndices(m.GrainColumn)
		if len(gi) != 1 {
			rec.Release()
			return nil, fmt.Errorf("no grain column %s", m.GrainColumn)
		}
		grain := rec.Column(gi[0])
		for r := range int(rec.NumRows()) {
			v := silver.ValueAt(grain, r, grainT)
			if v.Null {
				continue
			}
			buf = buf[:0]
			for c, f := range sch.Fields() {
				buf = append(append(append(buf, f.Name...), '='), rec.Column(c).ValueStr(r)...)
				buf = append(buf, 0x1f)
			}
			g := m.grainOf(v, grainT)
			p := out[g]
			p.rows++
			p.sum += xxhash.Sum64(buf)
			out[g] = p
		}
		rec.Release()
	}
	return out, nil
}
