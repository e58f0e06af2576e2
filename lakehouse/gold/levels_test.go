package gold

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/mart"
)

// TestLevelsMatchNaiveGroupBy checks CUBE and explicit grouping sets (levels merged from
// the base groups, including sets without a detail level) with sum, count,
// count_distinct, avg, min and max against a naive GROUP BY over the live Silver rows,
// aggregated by one goroutine and by three (scanParallel: each its grains, absorbed).
func TestLevelsMatchNaiveGroupBy(t *testing.T) {
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) { testLevelsMatchNaiveGroupBy(t, workers) })
	}
}

func testLevelsMatchNaiveGroupBy(t *testing.T, workers int) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	randomOrders(t, landing, "1.jsonl", rng, 1, 400, base)
	loadAndSilver(t, lh, landing)
	orders := readOrders(t, lh)

	for _, tc := range []struct {
		name     string
		grouping string
		sets     [][]string
		levels   map[string][]int // the oracle's levels: name -> kept dimensions (country 0, category 1)
		carriers []string         // the levels whose rows hold the lists
	}{
		{"cube", "cube", nil, map[string][]int{"detail": {0, 1}, "by_country": {0}, "by_category": {1}, "total": {}}, []string{"detail"}},
		{"sets", "sets", [][]string{{"category"}, {"country"}, {}}, map[string][]int{"by_country": {0}, "by_category": {1}, "total": {}}, []string{"by_category", "by_country"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := kpiMart("gold.levels_" + tc.name)
			m.Grouping, m.GroupingSets = tc.grouping, tc.sets
			// Every level, also without the detail, sums to the total (no false alarm).
			m.Checks = []CheckSpec{{Name: "consistency", Type: "consistency", Severity: "critical"}}
			m.Measures = append(m.Measures,
				MeasureSpec{Name: "min_amount", Agg: "min", Column: "amount", InputType: typ("decimal(18,2)")},
				MeasureSpec{Name: "max_user", Agg: "max", Column: "user_id", InputType: typ("string")})
			if _, err := Run(ctx, lh, m, Options{scanWorkers: workers}); err != nil {
				t.Fatal(err)
			}
			// Oracle: every live row into every set's group.
			type agg struct {
				sum, min    float64
				n           int
				users       map[string]bool
				maxUser     string
				hasMin      bool
				amountCount int
			}
			want := map[string]*agg{}
			for _, o := range orders {
				if o.deleted || o.created.IsZero() {
					continue
				}
				for name, set := range tc.levels {
					dims := []string{"(null)", "(null)"}
					vals := []string{o.country, o.category}
					for _, d := range set {
						dims[d] = vals[d]
					}
					k := fmt.Sprintf("%s %s %s %s", o.created.Format(time.DateOnly), dims[0], dims[1], name)
					a := want[k]
					if a == nil {
						a = &agg{users: map[string]bool{}}
						want[k] = a
					}
					a.n++
					a.users[o.user] = true
					if o.user > a.maxUser {
						a.maxUser = o.user
					}
					if o.hasAmount {
						a.sum += o.amount
						a.amountCount++
						if !a.hasMin || o.amount < a.min {
							a.min, a.hasMin = o.amount, true
						}
					}
				}
			}
			var wantRows []string
			for k, a := range want {
				wantRows = append(wantRows, fmt.Sprintf("%s sum=%.2f n=%d users=%d min=%.2f max=%s", k, a.sum, a.n, len(a.users), a.min, a.maxUser))
			}
			gt, err := lh.LoadTable(ctx, m.Table)
			if err != nil {
				t.Fatal(err)
			}
			_, recs, err := gt.Scan().ToArrowRecords(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rec, err := range recs {
				if err != nil {
					t.Fatal(err)
				}
				c := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
				for i := range int(rec.NumRows()) {
					lvl := c(mart.ColGroupingLevel).(*array.String).Value(i)
					keys := c(mart.KeysCol("unique_customers")).(*array.List)
					if slices.Contains(tc.carriers, lvl) == keys.IsNull(i) {
						t.Errorf("__keys must be set on the rows of %v only (level %s)", tc.carriers, lvl)
					}
					got = append(got, fmt.Sprintf("%s %s %s %s sum=%.2f n=%d users=%d min=%.2f max=%s",
						c("report_date").ValueStr(i), c("country").ValueStr(i), c("category").ValueStr(i), lvl,
						c("total_revenue").(*array.Decimal128).Value(i).ToFloat64(2), c("total_orders").(*array.Int64).Value(i),
						c("unique_customers").(*array.Int64).Value(i), c("min_amount").(*array.Decimal128).Value(i).ToFloat64(2),
						c("max_user").(*array.String).Value(i)))
				}
				rec.Release()
			}
			slices.Sort(got)
			slices.Sort(wantRows)
			if len(got) == 0 || !slices.Equal(got, wantRows) {
				t.Fatalf("gold (%d rows) != naive group by (%d rows)\n%s\n---\n%s", len(got), len(wantRows),
					strings.Join(first(got, 5), "\n"), strings.Join(first(wantRows, 5), "\n"))
			}
		})
	}
}

// TestFilterMemo checks that the cached filter outcome equals the program's, also for
// NULL inputs (left out) and for a filter over many distinct values (past the cache).
func TestFilterMemo(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	rng := rand.New(rand.NewPCG(8, 9))
	randomOrders(t, landing, "1.jsonl", rng, 1, 300, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	loadAndSilver(t, lh, landing)
	orders := readOrders(t, lh)
	for i, f := range []string{`country != "US" and not is_deleted`, `amount > 10.5`} {
		m := kpiMart(fmt.Sprintf("gold.memo%d", i))
		m.Filter, m.Checks, m.Grouping = f, nil, "none"
		m.Dims = nil
		res, err := Run(ctx, lh, m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, o := range orders {
			if o.created.IsZero() {
				continue
			}
			switch i {
			case 0:
				if o.country != "(null)" && o.country != "US" && !o.deleted {
					want++
				}
			case 1:
				if o.hasAmount && o.amount > 10.5 {
					want++
				}
			}
		}
		if res.SilverRows != int64(want) {
			t.Errorf("filter %q kept %d rows, want %d", f, res.SilverRows, want)
		}
	}
}
