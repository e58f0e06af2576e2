package gold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// passesFixture lands orders on three days (one, one and two orders) and two without a
// grain value, and builds Silver (sorted on the grain with sorted).
func passesFixture(t *testing.T, sorted bool) (*catalog.Lakehouse, func(name string, lines ...string)) {
	t.Helper()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	var sortBy []string
	if sorted {
		sortBy = []string{"created_at"}
	}
	land := func(name string, lines ...string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(landing, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		loadAndSilver(t, lh, landing, sortBy...)
	}
	land("1.jsonl", passRow("o1", `"2026-01-01T10:00:00Z"`), passRow("o2", `"2026-01-02T10:00:00Z"`), passRow("o3", "null"),
		passRow("o4", "null"), passRow("o5", `"2026-01-03T10:00:00Z"`), passRow("o6", `"2026-01-03T11:00:00Z"`))
	return lh, land
}

func passRow(id, created string) string {
	return fmt.Sprintf(`{"order_id":%q,"user_id":"u%s","amount":10.00,"country":"US","category":"x","created_at":%s,"updated_at":"2026-01-05T10:00:00Z","op":"u"}`, id, id, created)
}

// A full build in passes (one per day here) equals the one-pass build, and the Silver
// rows without a grain are counted once, whether each pass reads every file (bucketed
// Silver) or its days' row groups (sorted Silver, where the first pass also reads the
// rows without a grain).
func TestPassesCountNullGrainsOnce(t *testing.T) {
	ctx := context.Background()
	for _, sorted := range []bool{false, true} {
		t.Run(fmt.Sprint("sorted=", sorted), func(t *testing.T) {
			lh, land := passesFixture(t, sorted)
			one, passes := kpiMart("gold.one"), kpiMart("gold.passes")
			one.PassRows, passes.PassRows = -1, 1
			for _, m := range []*MartSpec{&one, &passes} {
				m.Checks = append(m.Checks, CheckSpec{Name: "grain_present", Type: "null_grain", Severity: "warning"})
			}
			r1, err := Run(ctx, lh, one, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rp, err := Run(ctx, lh, passes, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r1.Passes != 1 || rp.Passes != 3 {
				t.Fatalf("passes: one %d, grouped %d; want 1 and 3", r1.Passes, rp.Passes)
			}
			for _, r := range []Result{r1, rp} {
				w := r.Report.Warnings()
				if r.SilverRows != 4 || r.NullGrainRows != 2 || len(w) != 1 || w[0].Count != 2 {
					t.Fatalf("%d passes: silver rows %d, null grain %d, warnings %+v; want 4, 2 and one of 2", r.Passes, r.SilverRows, r.NullGrainRows, w)
				}
			}
			if !slices.Equal(r1.Partitions, rp.Partitions) || r1.Rows != rp.Rows {
				t.Fatalf("partitions %v (%d rows) vs %v (%d rows)", r1.Partitions, r1.Rows, rp.Partitions, rp.Rows)
			}
			if a, b := goldRows(t, lh, one.Table), goldRows(t, lh, passes.Table); len(a) == 0 || !slices.Equal(a, b) {
				t.Fatalf("one pass %v\npasses   %v", a, b)
			}

			// An incremental run touching two days (a new one and the first) runs in two
			// passes, and counts what the one-pass run counts. Each pass checks its own
			// partitions: a day of the other pass is not an empty day to the row-count
			// check (any day 99% off its trailing day fails it).
			for _, m := range []*MartSpec{&one, &passes} {
				m.Checks = append(m.Checks, CheckSpec{Name: "rows", Type: "row_count_anomaly", Severity: "warning", Trailing: 1, Tolerance: 0.99})
			}
			land("2.jsonl", passRow("o8", `"2026-01-04T10:00:00Z"`), passRow("o9", "null"), passRow("o10", `"2026-01-01T12:00:00Z"`))
			r1, err = Run(ctx, lh, one, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rp, err = Run(ctx, lh, passes, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r1.Full || rp.Full || r1.Passes != 1 || rp.Passes != 2 || r1.SilverRows != 3 || rp.SilverRows != 3 ||
				rp.NullGrainRows != r1.NullGrainRows || !slices.Equal(rp.Partitions, []string{"2026-01-01", "2026-01-04"}) || !slices.Equal(r1.Partitions, rp.Partitions) {
				t.Fatalf("incremental: one pass %+v\npasses %+v\nwant 1 and 2 passes over 3 rows of 2026-01-01 and -04", r1, rp)
			}
			if w1, wp := r1.Report.Warnings(), rp.Report.Warnings(); len(wp) != len(w1) || len(wp) > 1 || len(wp) == 1 && wp[0].Check != "grain_present" {
				t.Fatalf("incremental warnings: one pass %+v, passes %+v", w1, wp)
			}
			if a, b := goldRows(t, lh, one.Table), goldRows(t, lh, passes.Table); !slices.Equal(a, b) {
				t.Fatalf("incremental: one pass %v\npasses   %v", a, b)
			}
		})
	}
}

// A critical check that fails in the last pass only publishes nothing: Gold keeps its
// rows, the earlier passes' files are deleted, and the report counts what one pass
// counts. A run interrupted between passes leaves Gold as it was, and the next run
// converges.
func TestPassesPublishAllOrNothing(t *testing.T) {
	ctx := context.Background()
	lh, land := passesFixture(t, true)
	m := kpiMart("gold.kpi")
	m.PassRows = 1
	if _, err := Run(ctx, lh, m, Options{}); err != nil {
		t.Fatal(err)
	}
	before := goldRows(t, lh, m.Table)
	land("2.jsonl", passRow("o7", `"2026-01-03T12:00:00Z"`))

	// Interrupted after the first pass's files are written.
	_, err := Run(ctx, lh, m, Options{Full: true, afterPass: func(int) error { return ErrInjected }})
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("want the injected fault, got %v", err)
	}
	if got := goldRows(t, lh, m.Table); !slices.Equal(got, before) {
		t.Fatalf("an interrupted run changed Gold:\n%v\n%v", got, before)
	}
	assertNoUnreferencedData(t, lh, m.Table)

	// Only the third day has 3 orders: its rows fail the check, in the last pass.
	strict := m
	strict.Checks = append(slices.Clone(m.Checks), CheckSpec{Name: "small_days", Type: "expr", Expr: "total_orders < 3", Severity: "critical"})
	res, err := Run(ctx, lh, strict, Options{Full: true})
	if !errors.Is(err, ErrCircuitOpen) || res.Passes != 3 {
		t.Fatalf("want ErrCircuitOpen after 3 passes, got %v (%d passes)", err, res.Passes)
	}
	if f := res.Report.Failures; len(f) != 1 || f[0].Check != "small_days" || f[0].Count != 3 {
		// The day's detail, by_country and total rows (rollup of country, category).
		t.Fatalf("failures %+v, want small_days on 3 rows", f)
	}
	if got := goldRows(t, lh, m.Table); !slices.Equal(got, before) {
		t.Fatalf("a failed check published rows:\n%v\n%v", got, before)
	}
	assertNoUnreferencedData(t, lh, m.Table)

	// The next run (the circuit closes) converges to the one-pass build.
	if _, err := Run(ctx, lh, m, Options{}); err != nil {
		t.Fatal(err)
	}
	one := kpiMart("gold.one")
	one.PassRows = -1
	if _, err := Run(ctx, lh, one, Options{}); err != nil {
		t.Fatal(err)
	}
	if a, b := goldRows(t, lh, m.Table), goldRows(t, lh, one.Table); !slices.Equal(a, b) || slices.Equal(a, before) {
		t.Fatalf("after the rerun\n%v\none pass\n%v", a, b)
	}
}

func assertNoUnreferencedData(t *testing.T, lh *catalog.Lakehouse, ident string) {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	orphans, err := tbl.PlanOrphanFiles(context.Background(), table.WithFilesOlderThan(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range orphans.Files() {
		if filepath.Ext(f) == ".parquet" {
			t.Errorf("unreferenced data file %s", f)
		}
	}
}

func TestMergeRanges(t *testing.T) {
	for _, c := range []struct{ in, want [][2]int64 }{
		{nil, nil},
		{[][2]int64{{5, 6}, {1, 2}, {2, 3}}, [][2]int64{{1, 3}, {5, 6}}},
		{[][2]int64{{1, 10}, {2, 3}, {10, 11}, {12, 13}}, [][2]int64{{1, 11}, {12, 13}}},
	} {
		if got := mergeRanges(slices.Clone(c.in)); !slices.Equal(got, c.want) && (len(got) != 0 || len(c.want) != 0) {
			t.Errorf("mergeRanges(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
