package sync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/gold"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/ddl"
	gbsync "goldbridge/sync"
)

// TestServedMergesAcrossDays: what a dashboard asks of several days, every aggregate's
// FinalExpr over the served rows of all the demo's days grouped by level and dimensions,
// equals ClickHouse's GROUPING SETS over the live Silver rows of those days — for the
// aggregates of groupingMart (states built by goldbridge) and with byMeasures (avg_if,
// max_by and min_by: states built by the server): sums and counts add, distinct counts
// and quantiles merge their states, averages their sums and counts, max_by and min_by
// their (by, value) pairs.
func TestServedMergesAcrossDays(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	oracleTable(t, lh, c, db)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	dims := []string{"country", "category"}
	levels := [][]string{dims, {"country"}, {}}
	for _, v := range []struct {
		by       bool
		distinct string
	}{{false, serving.DistinctExact}, {true, serving.DistinctExact}, {false, serving.DistinctBitmap}} {
		by := v.by
		spec := groupingMart(fmt.Sprintf("across_%v_%s", by, v.distinct), "rollup", nil)
		if by {
			spec.Measures = append(spec.Measures, byMeasures(spec.Measures[7].If)...)
		}
		if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
			t.Fatal(err)
		}
		tbl, err := lh.LoadTable(ctx, spec.Table)
		if err != nil {
			t.Fatal(err)
		}
		m := servedMart(db, spec, v.distinct)
		if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
			t.Fatal(err)
		}
		if days := scalar[uint64](t, c, fmt.Sprintf("SELECT uniqExact(report_date) FROM %s", ddl.Name(m, m.Table))); days < 3 {
			t.Fatalf("%d days served: nothing to merge across", days)
		}
		// One grain for all the days: the oracle's grain is a constant.
		want := oracleQueryRows(t, c, db, oracleQuery{distinct: "uniqExact", grain: "toDate('2000-01-01')", dims: dims, levels: levels, by: by})
		if got := mergedRows(t, c, m, "2000-01-01 00:00:00"); len(want) == 0 || !sameRows(got, want) {
			t.Fatalf("by=%v, %s: merged across days (%d rows) != GROUPING SETS over Silver (%d rows)\n%s", by, v.distinct, len(got), len(want), diffRows(got, want))
		}
	}
}

// mergedRows reads the served rows of <t> merged across all grains (FinalExpr) per level
// and dimensions, in servedRows' form with grain text day.
func mergedRows(t *testing.T, c *chconn.Client, m *serving.Mart, day string) []string {
	t.Helper()
	keys := []string{"grouping_level"}
	for _, d := range m.Dimensions {
		keys = append(keys, serving.Q(d.Name), serving.Q("grouping_"+d.Name))
	}
	return martRows(t, c, m, serving.QS(day), func(ms serving.Measure) string { return ddl.FinalExpr(m, ms) },
		ddl.Name(m, m.Table), "GROUP BY "+strings.Join(keys, ", "))
}
