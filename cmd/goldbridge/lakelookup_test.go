package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"goldbridge/lakehouse/catalog"
)

// lakeLookupConfig is a pipeline whose orders are enriched with their shopper's tier
// from silver.shoppers (a lookup against another entity), and a mart of orders per tier.
// "shoppers" sorts after "orders": the silver stage must run it first anyway.
func lakeLookupConfig(shopperRules string) string {
	return `version: 1
lakehouse:
  catalog: {type: sql}
  warehouse: file://${STATE_DIR}/warehouse
sources:
  shop_orders:   {type: file, system: shop, path: "${STATE_DIR}/landing/orders", format: jsonl, settle: 0s}
  shop_shoppers: {type: file, system: shop, path: "${STATE_DIR}/landing/shoppers", format: jsonl, settle: 0s}
entities:
  shoppers:
    sources: [shop_shoppers]
    silver:
      mode: upsert
      key: [shopper_id]
      updated_at: updated_at
      op: op
      columns:
        - {name: shopper_id, type: string, required: true}
        - {name: tier,       type: string}
        - {name: updated_at, type: timestamp, required: true}
        - {name: op,         type: string}
` + shopperRules + `
  orders:
    sources: [shop_orders]
    silver:
      mode: upsert
      key: [order_id]
      updated_at: created_at
      columns:
        - {name: order_id,   type: string, required: true}
        - {name: shopper_id, type: string}
        - {name: amount,     type: int64}
        - {name: created_at, type: timestamp, required: true}
      rules:
        - {id: E1, kind: lookup, lookup: {entity: shoppers, on: {shopper_id: shopper_id}, columns: {shopper_tier: tier}}}
marts:
  orders_by_tier:
    source: orders
    grain: {column: created_at, unit: day, as: order_date}
    dimensions: [shopper_tier]
    measures: [{name: orders, agg: count}, {name: revenue, agg: sum, column: amount}]
`
}

// TestLakeLookupThroughTheCLI is issue 42 item 3 as a user runs it: validate accepts a
// lookup against another entity and refuses lookups that form a cycle or that copy an
// encrypted personal-data field (pii), naming the path;
// the silver stage builds shoppers before orders, and after every run (new shoppers, a changed tier,
// a deleted shopper, new orders) each Gold total per day and tier equals an oracle that
// gives every order its shopper's current tier.
func TestLakeLookupThroughTheCLI(t *testing.T) {
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "shop.yaml")
	write := func(shopperRules string) {
		if err := os.WriteFile(cfg, []byte(lakeLookupConfig(shopperRules)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gb := func(args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"-c", cfg, "--state-dir", state, "--log-level", "warn"}, args...)...)
		if code != exitOK {
			t.Fatalf("goldbridge %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, tail(errs, 3000))
		}
		return out
	}
	write("      rules:\n        - {id: E9, kind: lookup, lookup: {entity: orders, on: {shopper_id: shopper_id}, columns: [amount]}}")
	want := "entities.shoppers.silver.rules[0].lookup.entity: lookups form a cycle: shoppers -> orders -> shoppers"
	if code, _, errs := runCLI(t, "-c", cfg, "--state-dir", state, "validate"); code != exitUsage || !strings.Contains(errs, want) {
		t.Fatalf("validate a cycle: exit %d, want %d and %q in\n%s", code, exitUsage, want, errs)
	}
	// A lookup must not copy crypto-shredded personal data out of forget's reach.
	if err := os.WriteFile(cfg, []byte(strings.Replace(lakeLookupConfig(""), "    sources: [shop_shoppers]\n",
		"    sources: [shop_shoppers]\n    pii: {subject: $.shopper_id, fields: [$.tier]}\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	want = `entities.orders.silver.rules[0].lookup.columns.shopper_tier: column "tier" of entity shoppers is encrypted personal data`
	if code, _, errs := runCLI(t, "-c", cfg, "--state-dir", state, "validate"); code != exitUsage || !strings.Contains(errs, want) {
		t.Fatalf("validate a lookup of a pii field: exit %d, want %d and %q in\n%s", code, exitUsage, want, errs)
	}
	write("")
	gb("validate")

	tiers := map[string]string{}     // the oracle: each live shopper's tier
	orders := map[string][2]string{} // order -> day, shopper
	amounts := map[string]int64{}
	n := 0
	land := func(entity string, lines ...string) {
		n++
		dir := filepath.Join(state, "landing", entity)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.jsonl", n)), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	shopper := func(id, tier, op string) string {
		n++
		if op == "d" {
			delete(tiers, id)
		} else {
			tiers[id] = tier
		}
		return fmt.Sprintf(`{"shopper_id":%q,"tier":%q,"op":%q,"updated_at":"2026-01-01T00:%02d:00Z"}`, id, tier, op, n%60)
	}
	order := func(id, day, shopper string, amount int64) string {
		orders[id], amounts[id] = [2]string{day, shopper}, amount
		return fmt.Sprintf(`{"order_id":%q,"shopper_id":%q,"amount":%d,"created_at":"2026-01-%sT10:00:00Z"}`, id, shopper, amount, day)
	}
	build := func() { // the stages of run before sync (the test serves nothing)
		t.Helper()
		for _, stage := range []string{"ingest", "silver", "gold"} {
			gb(stage)
		}
	}
	check := func(step string) {
		t.Helper()
		want := map[string]string{}
		for id, o := range orders {
			tier, ok := tiers[o[1]]
			if !ok {
				tier = "NULL"
			}
			k := "2026-01-" + o[0] + " " + tier
			var c, s int64
			if v, ok := want[k]; ok {
				fmt.Sscanf(v, "%d %d", &c, &s)
			}
			want[k] = fmt.Sprintf("%d %d", c+1, s+amounts[id])
		}
		lh, err := catalog.Open(context.Background(), catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"), Warehouse: "file://" + filepath.Join(state, "warehouse")})
		if err != nil {
			t.Fatal(err)
		}
		defer lh.Close()
		got := map[string]string{}
		for _, r := range tableRows(t, lh, "gold.orders_by_tier") {
			f := map[string]string{}
			for _, kv := range strings.Split(r, "|") {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			if f["grouping_level"] != "" && f["grouping_level"] != "detail" {
				continue
			}
			tier := f["shopper_tier"]
			if tier == "(null)" {
				tier = "NULL"
			}
			got[f["order_date"]+" "+tier] = f["orders"] + " " + f["revenue"]
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: gold.orders_by_tier\n got %v\nwant %v", step, got, want)
		}
	}

	land("shoppers", shopper("s1", "gold", "c"), shopper("s2", "silver", "c"), shopper("s3", "bronze", "c"))
	var lines []string
	for i := range 30 {
		lines = append(lines, order("o"+strconv.Itoa(i), fmt.Sprintf("%02d", 1+i%3), "s"+strconv.Itoa(1+i%4), int64(10+i)))
	}
	land("orders", lines...)
	build()
	check("first run") // s4 is not known yet: its orders have no tier

	land("shoppers", shopper("s4", "gold", "c"), shopper("s2", "platinum", "u"), shopper("s3", "", "d"))
	build()
	check("shoppers changed, no new order")

	land("shoppers", shopper("s5", "bronze", "c")) // no order names s5
	land("orders", order("o30", "03", "s1", 5), order("o31", "04", "s5", 7))
	build()
	check("new orders, a new shopper")

	build()
	check("nothing new")

	// A forget of a shopper names the entity that holds copies of its columns; the next
	// run of orders rebuilds it without them.
	if out := gb("forget", "shoppers", "--where", "shopper_id = s1", "--confirm"); !strings.Contains(out, "note: orders look up shoppers") {
		t.Fatalf("forget does not name the entity that looks shoppers up:\n%s", out)
	}
	delete(tiers, "s1")
	build()
	check("after forgetting a shopper")
	if keys := slices.Collect(maps.Keys(tiers)); len(keys) != 3 {
		t.Fatalf("oracle: %v", keys)
	}
}
