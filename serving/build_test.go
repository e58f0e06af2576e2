package serving_test

import (
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
)

func typ(s string) silver.Type { t, _ := silver.ParseType(s); return t }

func buildSpec() gold.MartSpec {
	return gold.MartSpec{
		Name: "daily", Table: "gold.daily", SourceTable: "silver.orders", GrainColumn: "created_at", GrainUnit: "day", GrainAs: "report_date",
		Dims: []gold.Dim{{Name: "country", Type: typ("string")}, {Name: "placed", Type: typ("date")}},
		Measures: []gold.MeasureSpec{
			{Name: "revenue", Agg: mart.Sum, Column: "amount", InputType: typ("decimal(12,2)")},
			{Name: "orders", Agg: mart.Count},
			{Name: "paid", Agg: mart.CountIf, If: `status == "paid"`},
			{Name: "paid_revenue", Agg: mart.SumIf, Column: "amount", InputType: typ("decimal(12,2)"), If: `status == "paid"`},
			{Name: "avg_amount", Agg: mart.Avg, Column: "amount", InputType: typ("decimal(12,2)")},
			{Name: "first_at", Agg: mart.Min, Column: "created_at", InputType: typ("timestamp")},
			{Name: "customers", Agg: mart.CountDistinct, Column: "customer_id", InputType: typ("string")},
		},
	}
}

var target = serving.Target{Database: "analytics", Table: "daily", PartitionBy: "day", HotWindow: 24 * time.Hour, Distinct: "uniqExact"}

// TestNewMartTypesAreGolds: the model is complete from the spec alone, its types those
// of the Gold table the spec defines (written out here, not derived), conditional
// aggregates served as their plain ones.
func TestNewMartTypesAreGolds(t *testing.T) {
	m, err := serving.NewMart(buildSpec(), target)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Dimensions {
		got = append(got, d.Name+" "+d.Type)
	}
	for _, ms := range m.Measures {
		got = append(got, ms.Name+" "+string(ms.Agg)+" "+ms.Type)
	}
	want := []string{"country String", "placed Date32",
		"revenue sum Decimal(38, 2)", "orders count Int64", "paid count Int64", "paid_revenue sum Decimal(38, 2)",
		"avg_amount avg Decimal(38, 2)", "first_at min DateTime64(6, 'UTC')", "customers count_distinct "}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if m.Definition != buildSpec().Definition() || m.Definition == "" {
		t.Fatalf("definition %q", m.Definition)
	}
	if err := m.CheckSchema(buildSpec().Schema()); err != nil {
		t.Fatalf("own schema: %v", err)
	}
}

// TestCheckSchemaRefusesAnother: a Gold table built for another definition (a measure
// missing, a type changed) is refused, naming the column.
func TestCheckSchemaRefusesAnother(t *testing.T) {
	m, err := serving.NewMart(buildSpec(), target)
	if err != nil {
		t.Fatal(err)
	}
	fewer := buildSpec()
	fewer.Measures = fewer.Measures[:1]
	retyped := buildSpec()
	retyped.Measures[0].InputType = typ("decimal(12,4)")
	for name, tc := range map[string]struct {
		spec gold.MartSpec
		want string
	}{"missing": {fewer, "no column paid_revenue"}, "retyped": {retyped, "revenue is Decimal(38, 4) in the gold table"}} {
		err := m.CheckSchema(tc.spec.Schema())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	bad := target
	bad.PartitionBy = "week"
	if _, err := serving.NewMart(buildSpec(), bad); err == nil {
		t.Error("partition_by week accepted")
	}
}
