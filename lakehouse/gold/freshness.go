package gold

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// Freshness is what on-call needs to know about a mart's Gold table.
type Freshness struct {
	LastCalculated time.Time // commit time of the newest Gold snapshot
	NewestGrain    string    // the newest grain value in the table ("" when empty)
	Circuit        string    // open | closed
	CircuitReason  string
}

// ReadFreshness reads a Gold table's last calculation time, newest grain (from the
// manifests when they suffice) and circuit.
func ReadFreshness(ctx context.Context, lh *catalog.Lakehouse, ident string) (Freshness, error) {
	var f Freshness
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return f, fmt.Errorf("freshness %s: %w", ident, err)
	}
	f.Circuit = tbl.Properties().Get(PropCircuit, "closed")
	f.CircuitReason = tbl.Properties()[PropCircuitReason]
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return f, nil
	}
	f.LastCalculated = time.UnixMilli(snap.TimestampMs).UTC()
	grain := tbl.Schema().Field(0).Name
	if counts, ok, err := grainCounts(ctx, tbl, grain); err != nil {
		return f, fmt.Errorf("freshness %s: %w", ident, err)
	} else if ok {
		found := false
		var newest int64
		for g, n := range counts {
			if n > 0 && (!found || g > newest) {
				newest, found = g, true
			}
		}
		if found {
			if _, isDate := tbl.Schema().Field(0).Type.(iceberg.DateType); isDate {
				f.NewestGrain = time.Unix(newest*86400, 0).UTC().Format(time.DateOnly)
			} else {
				f.NewestGrain = time.UnixMicro(newest).UTC().Format(time.RFC3339)
			}
		}
		return f, nil
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields(grain)).ToArrowRecords(ctx)
	if err != nil {
		return f, fmt.Errorf("freshness %s: %w", ident, err)
	}
	var newest int64
	found := false
	var sample func(int64) string
	for rec, err := range recs {
		if err != nil {
			return f, fmt.Errorf("freshness %s: %w", ident, err)
		}
		col := rec.Column(0)
		switch col.(type) {
		case *array.Date32:
			sample = func(v int64) string { return time.Unix(v*86400, 0).UTC().Format(time.DateOnly) }
		case *array.Timestamp:
			sample = func(v int64) string { return time.UnixMicro(v).UTC().Format(time.RFC3339) }
		}
		for i := range col.Len() {
			if v := grainValue(col, i); !found || v > newest {
				newest, found = v, true
			}
		}
		rec.Release()
	}
	if found {
		f.NewestGrain = sample(newest)
	}
	return f, nil
}
