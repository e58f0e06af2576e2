package plan

import (
	"slices"
	"testing"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/maintain"
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
