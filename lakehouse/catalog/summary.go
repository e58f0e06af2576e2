package catalog

import "github.com/apache/iceberg-go/table"

// NewestWith returns the newest snapshot of tbl's current lineage (the current snapshot,
// then its parents) whose summary has one of props, or nil. goldbridge's stages record
// their watermarks and reports in the summaries of their own commits; the commits of
// maintenance (compaction, a seal) carry none, so a reader walks back to the stage's.
// The walk stops at a parent the metadata no longer has (expired) and never loops.
func NewestWith(tbl *table.Table, props ...string) *table.Snapshot {
	md := tbl.Metadata()
	seen := 0
	for s := tbl.CurrentSnapshot(); s != nil && seen <= len(md.Snapshots()); seen++ {
		if s.Summary != nil {
			for _, p := range props {
				if _, ok := s.Summary.Properties[p]; ok {
					return s
				}
			}
		}
		if s.ParentSnapshotID == nil {
			return nil
		}
		s = md.SnapshotByID(*s.ParentSnapshotID)
	}
	return nil
}
