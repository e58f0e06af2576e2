package gold

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/demo"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/mart"
)

// TestMartEvolution: after a change of the mart's definition, the next run rebuilds the
// Gold table, which then equals a fresh build of the new definition; with on_change
// fail it stops with ErrSpecChanged and leaves the table as it was.
func TestMartEvolution(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: landing, Events: 3000, Seed: 11, End: time.Date(2026, 5, 31, 0, 0, 0, 0, time.UTC), Days: 5}); err != nil {
		t.Fatal(err)
	}
	loadAndSilver(t, lh, landing)
	base := func(table string) MartSpec {
		m := kpiMart(table)
		m.Checks = nil
		return m
	}
	paid := MeasureSpec{Name: "paid", Agg: mart.SumIf, Column: "amount", InputType: typ("decimal(18,2)"), If: `status == "paid"`}
	for _, tc := range []struct {
		name   string
		change func(*MartSpec)
		prep   func(*MartSpec) // the old definition's difference from base (nil: none)
	}{
		{"add_dimension", func(m *MartSpec) { m.Dims = append(m.Dims, Dim{Name: "status", Type: typ("string")}) }, nil},
		{"remove_dimension", func(m *MartSpec) { m.Dims = m.Dims[:1] }, nil},
		{"add_measure", func(m *MartSpec) {
			m.Measures = append(m.Measures, MeasureSpec{Name: "max_amount", Agg: mart.Max, Column: "amount", InputType: typ("decimal(18,2)")})
		}, nil},
		{"rename_measure", func(m *MartSpec) { m.Measures[0].Name = "revenue" }, nil},
		{"grain_unit", func(m *MartSpec) { m.GrainUnit = "month" }, nil},
		{"grouping", func(m *MartSpec) { m.Grouping, m.GroupingSets = "sets", [][]string{{"country"}, {}} }, nil},
		{"filter", func(m *MartSpec) { m.Filter = `not is_deleted and status == "paid"` }, nil},
		// sum and sum_if have the same Gold columns: only the recorded definition differs.
		{"sum_to_sum_if", func(m *MartSpec) { m.Measures[0].Agg, m.Measures[0].If = mart.SumIf, `status == "paid"` }, nil},
		{"condition", func(m *MartSpec) { m.Measures[len(m.Measures)-1].If = `status == "shipped"` },
			func(m *MartSpec) { m.Measures = append(m.Measures, paid) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := base("gold.evolve_" + tc.name)
			if tc.prep != nil {
				tc.prep(&old)
			}
			if _, err := Run(ctx, lh, old, Options{}); err != nil {
				t.Fatal(err)
			}
			before := goldRows(t, lh, old.Table)
			cur := old
			cur.Dims, cur.Measures = slices.Clone(old.Dims), slices.Clone(old.Measures)
			tc.change(&cur)

			cur.OnChange = OnChangeFail
			if _, err := Run(ctx, lh, cur, Options{}); !errors.Is(err, ErrSpecChanged) {
				t.Fatalf("on_change fail: %v, want ErrSpecChanged", err)
			}
			if got := goldRows(t, lh, old.Table); !slices.Equal(got, before) {
				t.Fatal("on_change fail changed the table")
			}

			cur.OnChange = ""
			res, err := Run(ctx, lh, cur, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Full {
				t.Fatalf("the rebuild was not a full run: %+v", res)
			}
			fresh := cur
			fresh.Table = "gold.fresh_" + tc.name
			if _, err := Run(ctx, lh, fresh, Options{}); err != nil {
				t.Fatal(err)
			}
			got, want := goldRows(t, lh, cur.Table), goldRows(t, lh, fresh.Table)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("evolved table (%d rows) != fresh build (%d rows)\n%v\n%v", len(got), len(want), first(got, 3), first(want, 3))
			}
			// Converged: the next run changes nothing.
			if res, err := Run(ctx, lh, cur, Options{}); err != nil || res.SnapshotID != 0 {
				t.Fatalf("rerun: %+v %v", res, err)
			}
		})
	}
}

// olderTable loads a small Silver (demo seed) and creates the Gold table of kpiMart(ident)
// as an older goldbridge did: without the properties named in drop. It returns the
// mart (without checks), the properties the table was created with, and the table.
func olderTable(t *testing.T, seed uint64, ident string, drop ...string) (*catalog.Lakehouse, MartSpec, iceberg.Properties, *table.Table) {
	t.Helper()
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: landing, Events: 500, Seed: seed, End: time.Date(2026, 5, 31, 0, 0, 0, 0, time.UTC), Days: 3}); err != nil {
		t.Fatal(err)
	}
	loadAndSilver(t, lh, landing)
	m := kpiMart(ident)
	m.Checks = nil
	props := m.tableProperties()
	for _, k := range drop {
		delete(props, k)
	}
	created, _, err := lh.LoadOrCreateTable(ctx, m.Table, m.Schema(), m.partitionSpec(), props)
	if err != nil {
		t.Fatal(err)
	}
	return lh, m, props, created
}

// TestAdoptTableWithoutSpec: a table built before the definition was recorded is kept
// when its columns are the mart's (and the definition recorded at its next commit), and
// rebuilt when they are not.
func TestAdoptTableWithoutSpec(t *testing.T) {
	ctx := context.Background()
	lh, m, props, _ := olderTable(t, 12, "gold.adopt", PropSpec)
	if _, err := Run(ctx, lh, m, Options{}); err != nil {
		t.Fatal(err)
	}
	gt, err := lh.LoadTable(ctx, m.Table)
	if err != nil {
		t.Fatal(err)
	}
	if gt.Properties()[PropSpec] != m.Definition() {
		t.Fatalf("definition not recorded: %q", gt.Properties()[PropSpec])
	}
	// Same columns, no record, but a run after a change of the columns rebuilds.
	other := kpiMart("gold.adopt_other")
	if _, _, err := lh.LoadOrCreateTable(ctx, other.Table, m.Schema(), m.partitionSpec(), props); err != nil {
		t.Fatal(err)
	}
	other.Dims = other.Dims[:1]
	other.Checks = nil
	if _, err := Run(ctx, lh, other, Options{}); err != nil {
		t.Fatalf("rebuild of an unrecorded table with other columns: %v", err)
	}
}

// Gold's manifests keep column statistics only for its date and timestamp columns
// (metricsProperties), and a table created before that policy adopts it at its next
// commit, for the files written from then on.
func TestStatisticsOnlyForDateColumns(t *testing.T) {
	ctx := context.Background()
	m := kpiMart("gold.stats")
	lh, m, _, created := olderTable(t, 13, m.Table, slices.Collect(maps.Keys(m.metricsProperties()))...)
	var dates []int // field ids of the date and timestamp columns (the table's)
	for _, f := range created.Schema().Fields() {
		switch f.Type.(type) {
		case iceberg.DateType, iceberg.TimestampTzType:
			dates = append(dates, f.ID)
		}
	}
	if len(dates) < 2 || len(dates) == len(created.Schema().Fields()) {
		t.Fatalf("date and timestamp columns %v of %d: the test needs both kinds", dates, len(created.Schema().Fields()))
	}
	withStats := func() (lower, counts []int) {
		t.Helper()
		gt, err := lh.LoadTable(ctx, m.Table)
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := gt.Scan().PlanFiles(ctx)
		if err != nil || len(tasks) < 3 {
			t.Fatalf("plan gold: %d files, %v", len(tasks), err)
		}
		lo, vc := map[int]bool{}, map[int]bool{}
		for _, tk := range tasks {
			for id := range tk.File.LowerBoundValues() {
				lo[id] = true
			}
			for id := range tk.File.ValueCounts() {
				vc[id] = true
			}
		}
		return slices.Sorted(maps.Keys(lo)), slices.Sorted(maps.Keys(vc))
	}
	if _, err := Run(ctx, lh, m, Options{}); err != nil {
		t.Fatal(err)
	}
	if lower, _ := withStats(); len(lower) <= len(dates) {
		t.Fatalf("the files written before the upgrade have bounds for columns %v: the old default should cover more than %v", lower, dates)
	}
	gt, err := lh.LoadTable(ctx, m.Table)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range m.metricsProperties() {
		if gt.Properties()[k] != v {
			t.Fatalf("property %s = %q after the run, want %q", k, gt.Properties()[k], v)
		}
	}
	if _, err := Run(ctx, lh, m, Options{Full: true}); err != nil {
		t.Fatal(err)
	}
	if lower, counts := withStats(); !slices.Equal(lower, dates) || !slices.Equal(counts, dates) {
		t.Fatalf("statistics after the upgrade: bounds for %v, value counts for %v; want both for %v only", lower, counts, dates)
	}
}
