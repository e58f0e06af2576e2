package ddl_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"goldbridge/serving"
	"goldbridge/serving/chtest"
	"goldbridge/serving/ddl"
)

var update = flag.Bool("update", false, "rewrite testdata/*.sql")

func TestMain(m *testing.M) { chtest.Main(m) }

func kpi(db, cluster string, aggregating bool) *serving.Mart {
	m := &serving.Mart{
		Name: "daily_revenue_kpi", Database: db, Table: "daily_revenue_kpi", Cluster: cluster,
		Grain:      serving.Grain{As: "report_date", Unit: "day"},
		Dimensions: []serving.Dim{{Name: "country", Type: "String"}, {Name: "category", Type: "String"}},
		Grouping:   "rollup",
		Measures: []serving.Measure{
			{Name: "revenue", Agg: "sum", Type: "Decimal(38, 2)"},
			{Name: "orders", Agg: "count", Type: "Int64"},
		},
		PartitionBy: "day", HotWindow: 90 * 24 * time.Hour, TTL: 120 * 24 * time.Hour, Distinct: "uniqExact",
	}
	if aggregating {
		m.Measures = append(m.Measures,
			serving.Measure{Name: "customers", Agg: "count_distinct"},
			serving.Measure{Name: "avg_order", Agg: "avg", Type: "Decimal(38, 2)"},
			serving.Measure{Name: "max_order", Agg: "max", Type: "Decimal(38, 2)"},
			serving.Measure{Name: "p_order", Agg: "quantiles", Quantiles: []float64{0.5, 0.9}})
	}
	return m
}

func TestGolden(t *testing.T) {
	for name, m := range map[string]*serving.Mart{
		"summing":             kpi("marts", "", false),
		"aggregating":         kpi("marts", "", true),
		"aggregating_cluster": kpi("marts", "prod", true),
	} {
		t.Run(name, func(t *testing.T) {
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(ddl.Statements(m), ";\n\n") + ";\n"
			if m.Aggregating() {
				states, err := ddl.BuildStates(m, "20260501")
				if err != nil {
					t.Fatal(err)
				}
				got += "\n-- states of partition 20260501\n" + strings.Join(states, ";\n") + ";\n"
			}
			path := filepath.Join("testdata", name+".sql")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("DDL differs from %s (run go test -update):\n%s", path, got)
			}
		})
	}
}

func TestValidateRejectsBadIdentifiers(t *testing.T) {
	m := kpi("marts", "", false)
	m.Dimensions[0].Name = "country`; DROP TABLE x"
	if err := m.Validate(); err == nil {
		t.Fatal("bad identifier accepted")
	}
}

// TestEnsureLive runs the generated DDL on the local ClickHouse, then checks drift
// handling: a new measure is added with ALTER, a changed type stops with --rebuild.
func TestEnsureLive(t *testing.T) {
	ctx := context.Background()
	conn := chtest.Conn(t)
	db := chtest.Database(t)
	for _, agg := range []bool{false, true} {
		m := kpi(db, "", agg)
		m.Table = map[bool]string{true: "agg", false: "sum"}[agg]
		if _, err := ddl.Ensure(ctx, conn, m); err != nil {
			t.Fatal(err)
		}
		if safe, unsafe, err := ddl.Diff(ctx, conn, m); err != nil || len(safe)+len(unsafe) > 0 {
			t.Fatalf("fresh tables drift: %v %v %v", safe, unsafe, err)
		}
		m.Measures = append(m.Measures, serving.Measure{Name: "refunds", Agg: "sum", Type: "Int64"})
		added, err := ddl.Ensure(ctx, conn, m)
		if err != nil || len(added) == 0 {
			t.Fatalf("new measure: added %v err %v", added, err)
		}
		m.Measures[0].Type = "Decimal(38, 4)"
		_, err = ddl.Ensure(ctx, conn, m)
		if !errors.Is(err, ddl.ErrDrift) || !strings.Contains(err.Error(), "goldbridge sync --rebuild daily_revenue_kpi") {
			t.Fatalf("type change: %v", err)
		}
	}
}
