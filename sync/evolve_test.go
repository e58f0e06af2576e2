package sync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/ddl"
	gbsync "goldbridge/sync"
)

// finalText reads <t>_final, one tab-separated line per row, sorted.
func finalText(t *testing.T, c *chconn.Client, m *serving.Mart) []string {
	t.Helper()
	out := chtest.Strings(t, c.Conn(), fmt.Sprintf("SELECT formatRow('TabSeparated', *) FROM %s.%s", serving.Q(m.Database), serving.Q(m.Table+ddl.ViewSuffix)))
	slices.Sort(out)
	return out
}

// TestMartEvolutionServed: after a change of the mart's definition, gold rebuilds the
// Gold table and the next sync the ClickHouse tables (a drifted <t> is rebuilt from
// Gold); <t>_final then equals a fresh push of the new Gold table, and check is clean.
func TestMartEvolutionServed(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	for _, tc := range []struct {
		name   string
		change func(*gold.MartSpec)
	}{
		{"add_dimension", func(m *gold.MartSpec) {
			m.Dims = append(m.Dims, gold.Dim{Name: "status", Type: silverType("string")})
		}},
		{"add_measure", func(m *gold.MartSpec) {
			m.Measures = append(m.Measures, gold.MeasureSpec{Name: "min_amount", Agg: mart.Min, Column: "amount", InputType: silverType("decimal(18,2)")})
		}},
		{"rename_measure", func(m *gold.MartSpec) { m.Measures[0].Name = "total_revenue" }},
		{"grain_unit", func(m *gold.MartSpec) { m.GrainUnit = "month" }},
		{"grouping", func(m *gold.MartSpec) { m.Grouping, m.GroupingSets = "sets", [][]string{{"country"}, {}} }},
		// Same Gold and ClickHouse columns, other values: Gold is rebuilt, every partition pushed.
		{"condition", func(m *gold.MartSpec) {
			i := slices.IndexFunc(m.Measures, func(ms gold.MeasureSpec) bool { return ms.Agg == mart.SumIf })
			m.Measures[i].If = `status == "shipped"`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := groupingMart("evo_"+tc.name, "rollup", nil)
			if _, err := gold.Run(ctx, lh, old, gold.Options{}); err != nil {
				t.Fatal(err)
			}
			push := func(spec gold.MartSpec, table string, opt gbsync.Options) (*serving.Mart, error) {
				tbl, err := lh.LoadTable(ctx, spec.Table)
				if err != nil {
					t.Fatal(err)
				}
				m := servedMart(db, spec, "uniqExact")
				m.Table, m.PartitionBy = table, "month"
				if err := m.CheckSchema(tbl.Schema()); err != nil {
					t.Fatal(err)
				}
				opt.Now = clock
				_, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, opt)
				if err == nil {
					if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
						t.Fatalf("check %s: %v %v", table, drifts, err)
					}
				}
				return m, err
			}
			if _, err := push(old, "evo_"+tc.name, gbsync.Options{}); err != nil {
				t.Fatal(err)
			}
			cur := old
			cur.Dims, cur.Measures = slices.Clone(old.Dims), slices.Clone(old.Measures)
			tc.change(&cur)
			if _, err := gold.Run(ctx, lh, cur, gold.Options{}); err != nil {
				t.Fatal(err)
			}
			evolved, err := push(cur, "evo_"+tc.name, gbsync.Options{})
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := push(cur, "fresh_"+tc.name, gbsync.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, want := finalText(t, c, evolved), finalText(t, c, fresh)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("evolved _final (%d rows) != fresh (%d rows)\n%s", len(got), len(want), diffRows(got, want))
			}
		})
	}
}

// TestSyncRefusesStaleGold: a sync (or check) of a mart whose definition changed since
// its Gold table was built, in a way that keeps every column (a filter) or not (one
// more measure), fails naming what changed and the command that rebuilds Gold, instead
// of serving the old definition's rows as the new one's; after that gold it serves.
func TestSyncRefusesStaleGold(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	old := groupingMart("stale", "rollup", nil)
	if _, err := gold.Run(ctx, lh, old, gold.Options{}); err != nil {
		t.Fatal(err)
	}
	filtered := groupingMart("stale", "rollup", nil)
	filtered.Filter = `not is_deleted and status != "created"`
	wider := groupingMart("stale", "rollup", nil)
	wider.Measures = append(slices.Clone(wider.Measures), gold.MeasureSpec{Name: "orders2", Agg: mart.Count})
	for name, tc := range map[string]struct {
		spec gold.MartSpec
		want string
	}{"filter": {filtered, "(filter changed)"}, "measure": {wider, "(measures changed)"}} {
		tbl, err := lh.LoadTable(ctx, old.Table)
		if err != nil {
			t.Fatal(err)
		}
		m := servedMart(db, tc.spec, "uniqExact")
		_, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "goldbridge gold --marts stale") {
			t.Errorf("%s: sync: %v, want %q", name, err, tc.want)
		}
		if _, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err == nil {
			t.Errorf("%s: check accepted a stale gold table", name)
		}
	}
	if _, err := gold.Run(ctx, lh, filtered, gold.Options{}); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, old.Table)
	if err != nil {
		t.Fatal(err)
	}
	m := servedMart(db, filtered, "uniqExact")
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatalf("sync after gold: %v", err)
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check after gold: %v %v", drifts, err)
	}
}
