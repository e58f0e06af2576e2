package gold

import "goldbridge/lakehouse/silver"

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
