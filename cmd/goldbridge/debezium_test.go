package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"go.yaml.in/yaml/v3"

	"goldbridge/demo"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving/chlocal"
)

// docsDebeziumConfig is the pipeline of docs/silver.md, "Debezium change events": the
// first yaml block of that section, as written.
func docsDebeziumConfig(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "silver.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## Debezium change events")
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(sec)
	if !ok || m == nil {
		t.Fatal("docs/silver.md: no yaml block in \"Debezium change events\"")
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(m[1]), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDebeziumDocsConfig runs the Debezium pipeline of docs/silver.md through the CLI, as
// written (only the embedded ClickHouse gets private ports), on a stream the PostgreSQL
// connector would write (demo.GenerateDebezium), in the envelope with precise decimals
// and, with the documented one-line change decimal_handling: string, in the flattened
// form: one landing file per ingest+silver in a shuffled order (out-of-order files),
// then gold and run. Silver and the customers_by_tier mart (count and sum of the live
// customers per tier) must equal an oracle computed from the source history; run exits
// 0 although orders has received nothing ("no data yet"); replay gives Silver again.
func TestDebeziumDocsConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: the embedded stack with a local ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name    string
		opt     demo.DebeziumOptions
		decimal string
	}{
		{"envelope_precise", demo.DebeziumOptions{Connector: "postgresql", Precise: true, Toast: true}, ""},
		{"flattened_string", demo.DebeziumOptions{Connector: "postgresql", Flattened: true, Toast: true}, "string"},
	} {
		t.Run(v.name, func(t *testing.T) {
			cfg := docsDebeziumConfig(t)
			ports := testPorts(t, 2)
			cfg["clickhouse"].(map[string]any)["local"] = map[string]any{"tcp_port": ports[0], "http_port": ports[1]}
			if v.decimal != "" {
				dbz := cfg["entities"].(map[string]any)["customers"].(map[string]any)["silver"].(map[string]any)["debezium"].(map[string]any)
				dbz["decimal_handling"] = v.decimal
			}
			out, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			e := &forgetEnv{t: t, bin: buildGoldbridge(t), state: filepath.Join(dir, "state"), cfg: filepath.Join(dir, "pipeline.yaml")}
			writeFile(t, e.cfg, string(out))

			o := v.opt
			o.Customers, o.Txs, o.Files, o.Seed = 150, 60, 4, 21
			st := demo.GenerateDebezium(o)
			files := slices.Clone(st.Files)
			rand.New(rand.NewPCG(21, 2)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
			landing := filepath.Join(e.state, "landing", "customers")
			for _, d := range []string{landing, filepath.Join(e.state, "landing", "orders")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range files {
				path := filepath.Join(landing, f.Name)
				writeFile(t, path, strings.Join(f.Lines, "\n")+"\n")
				old := time.Now().Add(-time.Minute) // settled: ingest need not wait for it
				if err := os.Chtimes(path, old, old); err != nil {
					t.Fatal(err)
				}
				e.run("ingest")
				if got := e.run("silver"); !strings.Contains(got, " 0 quarantined + ") {
					t.Errorf("%s: %s", f.Name, got)
				}
			}
			e.run("gold")
			res := e.run("run")
			if !strings.Contains(res, "sync orders_daily: no data yet") || !strings.Contains(res, "sync customers_by_tier: pushed 1 partitions") {
				t.Errorf("run:\n%s", res)
			}
			live, tiers := debeziumOracle(st.History)
			lh := lakehousetest.OpenDir(t, e.state)
			if got := silverCustomers(t, lh); !maps2Equal(got, live) {
				t.Errorf("silver: %d live customers, oracle %d\n got  %v\n want %v", len(got), len(live), got, live)
			}
			if got := goldTiers(t, lh); !maps2Equal(got, tiers) {
				t.Errorf("customers_by_tier:\n got  %v\n want %v", got, tiers)
			}
			// The served copy, as dashboards read it.
			served := map[string]string{}
			for _, l := range nonEmptyLines(e.stdout("clickhouse", "query", "SELECT ifNull(tier, 'NULL'), customers, toString(balance) FROM marts.customers_by_tier_final "+
				"WHERE grouping_level = 'detail' AND snapshot_date = (SELECT max(snapshot_date) FROM marts.customers_by_tier_final) FORMAT TSV")) {
				f := strings.Split(l, "\t")
				if len(f) != 3 {
					t.Fatalf("served row %q", l)
				}
				served[f[0]] = f[1] + " " + f[2]
			}
			if !maps2Equal(served, tiers) {
				t.Errorf("customers_by_tier_final:\n got  %v\n want %v", served, tiers)
			}
			e.run("replay", "customers")
			if got := silverCustomers(t, lh); !maps2Equal(got, live) {
				t.Errorf("silver after replay: %d live customers, oracle %d", len(got), len(live))
			}
		})
	}
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// debeziumOracle applies the source history: the live customers (id -> tier and
// balance) and, per tier, their count and balance sum.
func debeziumOracle(h []demo.Change) (live, tiers map[string]string) {
	last := map[int64]demo.Change{}
	for _, ch := range h {
		last[ch.Row.ID] = ch
	}
	live = map[string]string{}
	type agg struct{ n, cents int64 }
	per := map[string]*agg{}
	for id, ch := range last {
		if ch.Op == 'd' {
			continue
		}
		tier := ch.Row.Tier
		if tier == "" {
			tier = "NULL"
		}
		live[fmt.Sprint(id)] = fmt.Sprintf("%s %s", tier, cents(ch.Row.Balance))
		if per[tier] == nil {
			per[tier] = &agg{}
		}
		per[tier].n++
		per[tier].cents += ch.Row.Balance
	}
	tiers = map[string]string{}
	for t, a := range per {
		tiers[t] = fmt.Sprintf("%d %s", a.n, cents(a.cents))
	}
	return live, tiers
}

func cents(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

// silverCustomers reads the live rows of silver.customers: id -> tier and balance.
func silverCustomers(t *testing.T, lh *catalog.Lakehouse) map[string]string {
	t.Helper()
	out := map[string]string{}
	scanTable(t, lh, "silver.customers", func(rec arrow.RecordBatch, r int) {
		col := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
		if col(silver.ColIsDeleted).(*array.Boolean).Value(r) {
			return
		}
		tier := "NULL"
		if tc := col("tier"); !tc.IsNull(r) {
			tier = tc.(*array.String).Value(r)
		}
		bal := col("balance").(*array.Decimal128).Value(r).ToString(2)
		out[fmt.Sprint(col("id").(*array.Int64).Value(r))] = tier + " " + bal
	})
	return out
}

// goldTiers reads the detail rows of gold.customers_by_tier's newest partition: tier ->
// customers and balance.
func goldTiers(t *testing.T, lh *catalog.Lakehouse) map[string]string {
	t.Helper()
	type row struct {
		day         int32
		tier, value string
	}
	var rows []row
	scanTable(t, lh, "gold.customers_by_tier", func(rec arrow.RecordBatch, r int) {
		col := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
		if col("grouping_level").(*array.String).Value(r) != "detail" {
			return
		}
		tier := "NULL"
		if tc := col("tier"); !tc.IsNull(r) {
			tier = tc.(*array.String).Value(r)
		}
		bal := col("balance").(*array.Decimal128).Value(r).ToString(2)
		rows = append(rows, row{int32(col("snapshot_date").(*array.Date32).Value(r)), tier, fmt.Sprintf("%d %s", col("customers").(*array.Int64).Value(r), bal)})
	})
	var newest int32
	for _, r := range rows {
		newest = max(newest, r.day)
	}
	out := map[string]string{}
	for _, r := range rows {
		if r.day == newest {
			out[r.tier] = r.value
		}
	}
	return out
}

func scanTable(t *testing.T, lh *catalog.Lakehouse, ident string, fn func(rec arrow.RecordBatch, r int)) {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for r := range int(rec.NumRows()) {
			fn(rec, r)
		}
		rec.Release()
	}
}
