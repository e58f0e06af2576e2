package main

import (
	"strings"
	"testing"
)

func TestRewriteLakeSQL(t *testing.T) {
	tables := map[string]lakeTable{
		"silver.orders":            {Dir: "/w/silver.db/orders", Metadata: "/w/silver.db/orders/metadata/00002-a.metadata.json"},
		"silver.orders_quarantine": {Dir: "/w/it's", Metadata: `/w/it's/m\1.json`},
	}
	fn := tables["silver.orders"].tableFunction()
	q := tables["silver.orders_quarantine"].tableFunction()
	for _, tc := range []struct{ in, want string }{
		{"SELECT count() FROM silver.orders", "SELECT count() FROM " + fn},
		{"SELECT error_reason, count() FROM silver.orders_quarantine GROUP BY 1", "SELECT error_reason, count() FROM " + q + " GROUP BY 1"},
		{"SELECT * FROM `silver`.`orders` o JOIN \"silver\".orders_quarantine q USING (id)", "SELECT * FROM " + fn + " o JOIN " + q + " q USING (id)"},
		{"SELECT 'silver.orders', x FROM silver.orders -- silver.orders\n", "SELECT 'silver.orders', x FROM " + fn + " -- silver.orders\n"},
		{"SELECT /* silver.orders */ 1", "SELECT /* silver.orders */ 1"},
		{"SELECT silver.orders.id FROM marts.kpi", "SELECT silver.orders.id FROM marts.kpi"}, // a column chain, not a table
		{"SELECT 'it''s silver.orders' FROM x.silver.orders", "SELECT 'it''s silver.orders' FROM x.silver.orders"},
		{"SELECT 1.5 FROM silver.ordersx", "SELECT 1.5 FROM silver.ordersx"},
		{"SELECT 'a\\'silver.orders'", "SELECT 'a\\'silver.orders'"},
	} {
		got, _, err := rewriteLakeSQL(tc.in, tables)
		if err != nil || got != tc.want {
			t.Errorf("%q:\n got %q, %v\nwant %q", tc.in, got, err, tc.want)
		}
	}
	if want := `icebergLocal('/w/it\'s', SETTINGS iceberg_metadata_file_path = '/w/it\'s/m\\1.json')`; q != want {
		t.Errorf("quoting: %s, want %s", q, want)
	}
	_, used, _ := rewriteLakeSQL("SELECT * FROM silver.orders a, silver.orders_quarantine b, silver.orders c", tables)
	if strings.Join(used, ",") != "silver.orders,silver.orders_quarantine" {
		t.Errorf("used %v", used)
	}
	for _, bad := range []string{"SELECT 'open", "SELECT /* open", "SELECT `open", strings.Repeat("x", maxQueryLen+1)} {
		if _, _, err := rewriteLakeSQL(bad, tables); err == nil {
			t.Errorf("%.20q: no error", bad)
		}
	}
}

// FuzzRewriteLakeSQL: any text either fails cleanly or is rewritten so that removing the
// table functions gives back the input with the table names (nothing else changes).
func FuzzRewriteLakeSQL(f *testing.F) {
	for _, s := range []string{"SELECT * FROM silver.orders", "SELECT 'x' -- c\n/* d */ `silver`.`orders`.a", "\"a\"\"b\".c", "1.e5silver.orders"} {
		f.Add(s)
	}
	tables := map[string]lakeTable{"silver.orders": {Dir: "/d", Metadata: "/d/m.json"}}
	fn := tables["silver.orders"].tableFunction()
	f.Fuzz(func(t *testing.T, in string) {
		out, used, err := rewriteLakeSQL(in, tables)
		if err != nil {
			return
		}
		if len(used) == 0 && out != in {
			t.Fatalf("nothing used but changed: %q -> %q", in, out)
		}
		if len(used) > 0 && !strings.Contains(out, fn) {
			t.Fatalf("used %v but no table function in %q", used, out)
		}
	})
}
