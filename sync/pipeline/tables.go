package pipeline

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/silver"
)

// TableInfo is what a lake table's current metadata says about it, for `goldbridge
// tables` and for reading it by its snapshots.
type TableInfo struct {
	Name      string
	Snapshot  int64 // 0: no snapshot yet
	Committed time.Time
	Records   string // rows in data files (Iceberg summary total-records)
	Deletes   string // delete records (equality + position)
	Files     string // data files
	Watermark string // the upstream snapshot the table is processed up to ("bronze@<id>"), or ""
	// Undeclared is how many undeclared payload fields the last Silver run recorded
	// ("100+": with overflow), "" for a table without a Silver quality report.
	Undeclared string
	Table      *table.Table // as loaded
}

// watermarkProps name, per layer, the summary property holding the upstream snapshot.
var watermarkProps = []struct{ prop, layer string }{
	{silver.PropBronzeSnapshot, "bronze"},
	{gold.PropSilverSnapshot, "silver"},
}

// DescribeTables loads every table of the catalog and describes it.
func DescribeTables(ctx context.Context, lh *catalog.Lakehouse) ([]TableInfo, error) {
	names, err := lh.Tables(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]TableInfo, 0, len(names))
	for _, n := range names {
		tbl, err := lh.LoadTable(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, describeTable(n, tbl))
	}
	return out, nil
}

func describeTable(name string, tbl *table.Table) TableInfo {
	ti := TableInfo{Name: name, Records: "0", Deletes: "0", Files: "0", Table: tbl}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return ti
	}
	ti.Snapshot = snap.SnapshotID
	ti.Committed = time.UnixMilli(snap.TimestampMs).UTC()
	if snap.Summary != nil {
		p := snap.Summary.Properties
		ti.Records, ti.Files = orZero(p["total-records"]), orZero(p["total-data-files"])
		eq, _ := strconv.ParseInt(p["total-equality-deletes"], 10, 64)
		pos, _ := strconv.ParseInt(p["total-position-deletes"], 10, 64)
		ti.Deletes = strconv.FormatInt(eq+pos, 10)
	}
	// The newest commit that records a watermark (compactions and maintenance may not).
	if s := catalog.NewestWith(tbl, silver.PropBronzeSnapshot, gold.PropSilverSnapshot); s != nil {
		for _, w := range watermarkProps {
			if v := s.Summary.Properties[w.prop]; v != "" {
				ti.Watermark = w.layer + "@" + v
			}
		}
	}
	ti.Undeclared = undeclaredOf(tbl)
	return ti
}

// undeclaredOf reads the undeclared fields of the newest commit that records a Silver
// quality report (compactions do not): their number, "+" with overflow.
func undeclaredOf(tbl *table.Table) string {
	s := catalog.NewestWith(tbl, silver.PropQuality)
	if s == nil {
		return ""
	}
	var q silver.Quality
	if json.Unmarshal([]byte(s.Summary.Properties[silver.PropQuality]), &q) != nil {
		return "?"
	}
	n := strconv.Itoa(len(q.Undeclared))
	if q.UndeclaredOverflow > 0 {
		n += "+"
	}
	return n
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}
