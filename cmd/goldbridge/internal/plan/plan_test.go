package plan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/maintain"
	"goldbridge/lakehouse/mart"
)

// TestPlanOfTheExamples: the plan of each example config names what the config says —
// every entity's tables and sources, every mart's Gold table, the entities it reads
// and its serving model — and gives each of the pipeline's tables the maintenance layer
// its config section names (a quarantine table is Silver's).
func TestPlanOfTheExamples(t *testing.T) {
	for _, name := range []string{"orders", "taxi", "events"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := config.Load("../../../../examples/"+name+".yaml", t.TempDir(), CheckRules)
			if err != nil {
				t.Fatal(err)
			}
			p := New(cfg)
			if len(p.Entities()) != len(cfg.Entities) || !slices.IsSorted(p.Entities()) || len(p.Marts()) != len(cfg.Marts) {
				t.Fatalf("entities %v, marts %v", p.Entities(), p.Marts())
			}
			for _, e := range p.Entities() {
				got, err := p.Entity(e)
				if err != nil {
					t.Fatal(err)
				}
				ec := cfg.Entities[e]
				if got.Bronze != ec.Bronze.Table || got.Silver.Table != ec.Silver.Table || got.Silver.Name != e {
					t.Errorf("entity %s: %+v", e, got)
				}
				layers := map[string]string{ec.Bronze.Table: maintain.LayerBronze, ec.Silver.Table: maintain.LayerSilver, ec.Silver.QuarantineTable: maintain.LayerSilver}
				for tbl, want := range layers {
					if l := TableLayer(cfg, tbl); l != want {
						t.Errorf("layer of %s: %q, want %q", tbl, l, want)
					}
				}
			}
			for _, m := range p.Marts() {
				got, err := p.Mart(m)
				if err != nil {
					t.Fatal(err)
				}
				mc := cfg.Marts[m]
				if got.Gold.Table != mc.Table || got.Reads[0] != mc.Source || len(got.Reads) != 1+len(mc.Joins) || got.Serving != mc.Serving.IsEnabled() {
					t.Errorf("mart %s: %+v", m, got)
				}
				if TableLayer(cfg, mc.Table) != maintain.LayerGold {
					t.Errorf("layer of %s: %q", mc.Table, TableLayer(cfg, mc.Table))
				}
				if s, err := p.Served(m); err != nil || s.Name != m {
					t.Errorf("served %s: %v %v", m, s, err)
				}
			}
			if TableLayer(cfg, "silver.nothing") != "" {
				t.Error("a table of no entity has a layer")
			}
		})
	}
}

// TestPlanOfAByMeasure: a max_by measure of the config reaches Gold's spec with its by
// column and type, and the served model with the types of Gold's value and by columns.
func TestPlanOfAByMeasure(t *testing.T) {
	src, err := os.ReadFile("../../../../examples/events.yaml")
	if err != nil {
		t.Fatal(err)
	}
	from := "      - {name: revenue,     agg: sum, column: amount}"
	yaml := strings.Replace(string(src), from, from+"\n      - {name: last_amount, agg: max_by, column: amount, by: event_time}", 1)
	path := filepath.Join(t.TempDir(), "events.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, t.TempDir(), CheckRules)
	if err != nil {
		t.Fatal(err)
	}
	name := New(cfg).Marts()[0]
	spec, err := MartSpec(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Measures[len(spec.Measures)-1]
	if ms.Name != "last_amount" || ms.Agg != mart.MaxBy || ms.By != "event_time" || ms.ByType.String() != "timestamp" || ms.InputType.String() != "decimal(12,2)" {
		t.Fatalf("gold measure %+v", ms)
	}
	served, err := Served(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	if sm := served.Measures[len(served.Measures)-1]; sm.Type != "Decimal(38, 2)" || sm.ByType != "DateTime64(6, 'UTC')" {
		t.Fatalf("served measure %+v", sm)
	}
}
