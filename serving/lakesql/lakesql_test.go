package lakesql

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/asof"
)

func TestRewriteLakeSQL(t *testing.T) {
	tables := map[string]Table{
		"silver.orders":            {Dir: "/w/silver.db/orders", Metadata: "/w/silver.db/orders/metadata/00002-a.metadata.json"},
		"silver.orders_quarantine": {Dir: "/w/it's", Metadata: `/w/it's/m\1.json`},
	}
	fn := tables["silver.orders"].TableFunction()
	q := tables["silver.orders_quarantine"].TableFunction()
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
		got, _, err := Rewrite(tc.in, tables, AsOf{})
		if err != nil || got != tc.want {
			t.Errorf("%q:\n got %q, %v\nwant %q", tc.in, got, err, tc.want)
		}
	}
	if want := `icebergLocal('/w/it\'s', SETTINGS iceberg_metadata_file_path = '/w/it\'s/m\\1.json')`; q != want {
		t.Errorf("quoting: %s, want %s", q, want)
	}
	_, used, _ := Rewrite("SELECT * FROM silver.orders a, silver.orders_quarantine b, silver.orders c", tables, AsOf{})
	if strings.Join(used, ",") != "silver.orders,silver.orders_quarantine" {
		t.Errorf("used %v", used)
	}
	for _, bad := range []string{"SELECT 'open", "SELECT /* open", "SELECT `open", strings.Repeat("x", MaxQueryLen+1)} {
		if _, _, err := Rewrite(bad, tables, AsOf{}); err == nil {
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
	tables := map[string]Table{"silver.orders": {Dir: "/d", Metadata: "/d/m.json"}}
	fn := tables["silver.orders"].TableFunction()
	f.Fuzz(func(t *testing.T, in string) {
		out, used, err := Rewrite(in, tables, AsOf{})
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

// TestRewriteAsOf: --as-of and the FOR ... AS OF clauses read a table through a subquery
// that sets iceberg_snapshot_id to the snapshot the resolver names (ClickHouse 26.7 takes
// the setting per subquery, not among a table function's settings); what would be
// ambiguous or contradictory is refused.
func TestRewriteAsOf(t *testing.T) {
	tables := map[string]Table{
		"silver.orders": {Dir: "/w/o", Metadata: "/w/o/m.json"},
		"bronze.orders": {Dir: "/w/b", Metadata: "/w/b/m.json"},
	}
	var asked []string
	resolve := func(name string, r asof.Ref) (int64, error) {
		asked = append(asked, name+" "+r.String())
		if r.IsTime() {
			return 7, nil
		}
		return r.ID + 1, nil
	}
	o, b := tables["silver.orders"].TableFunction(), tables["bronze.orders"].TableFunction()
	at := asof.Ref{At: time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)}
	id := asof.Ref{ID: 41}
	sub := func(fn string, id int) string {
		return fmt.Sprintf("(SELECT * FROM %s SETTINGS iceberg_snapshot_id = %d)", fn, id)
	}
	for _, tc := range []struct {
		in     string
		global *asof.Ref
		want   string
		asked  []string
	}{
		{in: "SELECT * FROM silver.orders FOR VERSION AS OF 5 o", want: "SELECT * FROM " + sub(o, 6) + " o", asked: []string{"silver.orders snapshot 5"}},
		{in: "SELECT 1 FROM `silver`.`orders`\n  for  timestamp as of '2026-12-04T10:00:00+01:00' AS o FORMAT TSV", want: "SELECT 1 FROM " + sub(o, 7) + " AS o FORMAT TSV",
			asked: []string{"silver.orders 2026-12-04T09:00:00Z"}},
		{in: "SELECT * FROM silver.orders FORMAT TSV", want: "SELECT * FROM " + o + " FORMAT TSV"},
		{in: "SELECT * FROM silver.orders a JOIN bronze.orders b USING (x)", global: &at,
			want: "SELECT * FROM " + sub(o, 7) + " a JOIN " + sub(b, 7) + " b USING (x)", asked: []string{"silver.orders 2026-12-04T09:00:00Z", "bronze.orders 2026-12-04T09:00:00Z"}},
		{in: "SELECT * FROM silver.orders a, silver.orders b", global: &id, want: "SELECT * FROM " + sub(o, 42) + " a, " + sub(o, 42) + " b",
			asked: []string{"silver.orders snapshot 41", "silver.orders snapshot 41"}},
		{in: "SELECT * FROM silver.orders, bronze.orders FOR VERSION AS OF 9", global: &id, want: "SELECT * FROM " + sub(o, 42) + ", " + sub(b, 10),
			asked: []string{"silver.orders snapshot 41", "bronze.orders snapshot 9"}},
	} {
		asked = nil
		got, _, err := Rewrite(tc.in, tables, AsOf{Global: tc.global, Resolve: resolve})
		if err != nil || got != tc.want || !slices.Equal(asked, tc.asked) {
			t.Errorf("%q:\n got %q, %v (resolved %q)\nwant %q (%q)", tc.in, got, err, asked, tc.want, tc.asked)
		}
	}
	for _, tc := range []struct {
		in     string
		global *asof.Ref
		opt    bool // resolve set
		err    string
	}{
		{in: "SELECT * FROM silver.orders FOR VERSION AS OF x", opt: true, err: "silver.orders: at byte 27: want FOR VERSION AS OF <snapshot id>"},
		{in: "SELECT * FROM silver.orders FOR VERSION AS OF 5x", opt: true, err: "want FOR VERSION AS OF"},
		{in: "SELECT * FROM silver.orders FOR VERSION AS OF '2026-12-04T09:00:00Z'", opt: true, err: "want FOR VERSION AS OF"},
		{in: "SELECT * FROM silver.orders FOR TIMESTAMP AS OF 5", opt: true, err: "want FOR VERSION AS OF"},
		{in: "SELECT * FROM silver.orders FOR TIMESTAMP AS OF '5'", opt: true, err: "want FOR VERSION AS OF"},
		{in: "SELECT * FROM silver.orders FOR TIMESTAMP AS OF 'yesterday'", opt: true, err: "want a snapshot id or an RFC 3339 time"},
		{in: "SELECT * FROM silver.orders FOR SYSTEM_TIME AS OF 'x'", opt: true, err: "want FOR VERSION AS OF"},
		{in: "SELECT * FROM silver.orders FOR VERSION AS OF 5", err: "past snapshots are not read here"},
		{in: "SELECT * FROM silver.orders a JOIN bronze.orders b USING (x)", global: &id, opt: true,
			err: "--as-of 41 names a snapshot of one table, and the query reads silver.orders and bronze.orders without a clause of their own"},
		{in: "SELECT * FROM silver.orders SETTINGS iceberg_snapshot_id = 3", global: &at, opt: true, err: "the query sets iceberg_snapshot_id or iceberg_timestamp_ms itself"},
		{in: "SELECT * FROM silver.orders FOR VERSION AS OF 5 SETTINGS ICEBERG_TIMESTAMP_MS = 3", opt: true, err: "the query sets iceberg_snapshot_id"},
	} {
		opt := AsOf{Global: tc.global}
		if tc.opt {
			opt.Resolve = resolve
		}
		if _, _, err := Rewrite(tc.in, tables, opt); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.err)
		}
	}
	if _, _, err := Rewrite("SELECT 1 FROM silver.orders SETTINGS iceberg_snapshot_id = 3", tables, AsOf{}); err != nil {
		t.Errorf("the setting alone, as before: %v", err)
	}
}
