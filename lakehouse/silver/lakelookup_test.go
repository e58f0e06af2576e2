package silver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// lakeLookupSpecs are a customers entity and an orders entity enriched with each
// customer's current tier through a lookup against silver.customers.
func lakeLookupSpecs(onChange string) (customers, orders EntitySpec) {
	str, ts := Type{Kind: String}, Type{Kind: Timestamp}
	col := func(name string, t Type) ColumnSpec { return ColumnSpec{Name: name, Path: "$." + name, Type: t} }
	customers = EntitySpec{
		Name: "customers", Table: "silver.customers", QuarantineTable: "silver.customers_quarantine",
		Mode: ModeUpsert, Key: []string{"customer_id"}, UpdatedAt: "updated_at", Op: "op", Buckets: 2,
		Columns: []ColumnSpec{col("customer_id", str), col("tier", str), col("updated_at", ts), col("op", str)},
	}
	orders = EntitySpec{
		Name: "orders", Table: "silver.orders", QuarantineTable: "silver.orders_quarantine",
		Mode: ModeUpsert, Key: []string{"order_id"}, UpdatedAt: "updated_at", Buckets: 2,
		Columns: []ColumnSpec{col("order_id", str), col("customer_id", str), col("updated_at", ts)},
		Rules: []RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{
			Entity: "customers", Table: "silver.customers", On: map[string]string{"customer_id": "customer_id"},
			Columns: []string{"tier"}, As: []string{"customer_tier"}, OnChange: onChange,
		}}},
	}
	return customers, orders
}

// lakeLookupWorld lands events for both entities and keeps the oracle: the current tier
// of every customer not deleted, and the customer of every order.
type lakeLookupWorld struct {
	t        *testing.T
	lh       *catalog.Lakehouse
	dir      string
	n        int
	tiers    map[string]string
	ordersOf map[string]string
}

func (w *lakeLookupWorld) land(entity string, lines ...string) {
	w.t.Helper()
	w.n++
	d := filepath.Join(w.dir, entity)
	if err := os.MkdirAll(d, 0o700); err != nil {
		w.t.Fatal(err)
	}
	writeLanding(w.t, d, fmt.Sprintf("%03d.jsonl", w.n), lines...)
	ingestInto(w.t, w.lh, "bronze."+entity, d)
}

func (w *lakeLookupWorld) customer(id, tier, op string) string {
	w.n++
	if op == "d" {
		delete(w.tiers, id)
	} else {
		w.tiers[id] = tier
	}
	return fmt.Sprintf(`{"customer_id":%q,"tier":%q,"op":%q,"updated_at":"2026-01-01T00:00:%02dZ"}`, id, tier, op, w.n)
}

func (w *lakeLookupWorld) order(id, customer string) string {
	w.ordersOf[id] = customer
	return fmt.Sprintf(`{"order_id":%q,"customer_id":%q,"updated_at":"2026-01-01T00:00:00Z"}`, id, customer)
}

// check compares silver.orders with the oracle: each order carries its customer's
// current tier, or NULL.
func (w *lakeLookupWorld) check(step string) {
	w.t.Helper()
	want := map[string]string{}
	for o, c := range w.ordersOf {
		tier, ok := w.tiers[c]
		if !ok {
			tier = "NULL"
		}
		want[o] = c + "|" + tier
	}
	got := readStrings(w.t, w.lh, "silver.orders", "order_id", "customer_id", "customer_tier")
	if !maps.Equal(got, want) {
		w.t.Fatalf("%s: silver.orders\n got %v\nwant %v", step, got, want)
	}
}

// readStrings reads string columns of a table as first column -> the others joined by "|".
func readStrings(t *testing.T, lh *catalog.Lakehouse, ident string, cols ...string) map[string]string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for r := range int(rec.NumRows()) {
			parts := make([]string, len(cols))
			for i, c := range cols {
				parts[i] = render(ValueAt(rec.Column(rec.Schema().FieldIndices(c)[0]), r, Type{Kind: String}), Type{Kind: String})
			}
			out[parts[0]] = strings.Join(parts[1:], "|")
		}
		rec.Release()
	}
	return out
}

func (w *lakeLookupWorld) run(spec EntitySpec) Result {
	w.t.Helper()
	res, err := Run(context.Background(), w.lh, spec, "bronze."+spec.Name, Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

// TestLakeLookupFollowsItsSource is issue 42's lake-table lookup: orders enriched from
// silver.customers, whose rows change between runs. After every run each order carries
// its customer's current tier (the oracle); the version a commit used is recorded in it;
// a change no stored row feels is not a rebuild, one that some row feels is (replay), or
// fails with nothing committed (on_change: fail) until `replay` runs.
func TestLakeLookupFollowsItsSource(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	w := &lakeLookupWorld{t: t, lh: lh, dir: t.TempDir(), tiers: map[string]string{}, ordersOf: map[string]string{}}
	customers, orders := lakeLookupSpecs("")

	w.land("customers", w.customer("c1", "gold", "c"), w.customer("c2", "silver", "c"))
	w.land("orders", w.order("o1", "c1"), w.order("o2", "c2"), w.order("o3", "c3"))
	w.run(customers)
	if res := w.run(orders); res.Replay || res.Inserted != 3 {
		t.Fatalf("first run %+v", res)
	}
	w.check("first run")
	ctbl, err := lh.LoadTable(ctx, "silver.customers")
	if err != nil {
		t.Fatal(err)
	}
	otbl, err := lh.LoadTable(ctx, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	wantVersion := fmt.Sprintf("entity customers silver.customers@%d", ctbl.CurrentSnapshot().SnapshotID)
	if got := otbl.CurrentSnapshot().Summary.Properties[PropLookupPrefix+"E1"]; got != wantVersion {
		t.Fatalf("recorded lookup version %q, want %q", got, wantVersion)
	}

	// c4 is new, and no order names it: the next order run is an increment.
	w.land("customers", w.customer("c4", "bronze", "c"))
	w.run(customers)
	w.land("orders", w.order("o4", "c1"))
	if res := w.run(orders); res.Replay || res.Inserted != 1 || res.Read != 1 {
		t.Fatalf("a change no row feels: %+v", res)
	}
	w.check("new customer no order names")

	// c3 arrives: o3, enriched with NULL, now has a tier. No new order: the run rebuilds.
	w.land("customers", w.customer("c3", "gold", "c"))
	w.run(customers)
	if res := w.run(orders); !res.Replay {
		t.Fatalf("a change a row feels: %+v", res)
	}
	w.check("customer an order names arrives")

	// c2 is deleted and c1 changes tier, with on_change: fail: nothing is committed.
	w.land("customers", w.customer("c2", "", "d"), w.customer("c1", "platinum", "u"))
	w.run(customers)
	_, strict := lakeLookupSpecs(LookupFail)
	before, err := lh.LoadTable(ctx, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	w.land("orders", w.order("o5", "c4"))
	_, err = Run(ctx, lh, strict, "bronze.orders", Options{})
	if !errors.Is(err, ErrLookupChanged) || !strings.Contains(err.Error(), "3 stored rows enriched differently") || !strings.Contains(err.Error(), "goldbridge replay orders") {
		t.Fatalf("on_change fail: %v", err)
	}
	after, err := lh.LoadTable(ctx, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	if after.CurrentSnapshot().SnapshotID != before.CurrentSnapshot().SnapshotID {
		t.Fatal("on_change fail committed")
	}
	if _, err := Replay(ctx, lh, strict, "bronze.orders", Options{}); err != nil {
		t.Fatal(err)
	}
	w.check("replay after on_change fail")
	if res := w.run(strict); res.Read != 0 {
		t.Fatalf("after replay, nothing is left to do: %+v", res)
	}
}

// TestCSVLookupChange: a CSV lookup's version is its content. A change no stored row
// feels is an increment; a change some row feels rebuilds Silver, so no row keeps the
// old value; with a later rule reading the lookup's column, any change rebuilds.
func TestCSVLookupChange(t *testing.T) {
	for _, derived := range []bool{false, true} {
		t.Run(fmt.Sprintf("derived=%v", derived), func(t *testing.T) {
			lh := lakehousetest.Open(t)
			w := &lakeLookupWorld{t: t, lh: lh, dir: t.TempDir(), tiers: map[string]string{}, ordersOf: map[string]string{}}
			csv := filepath.Join(t.TempDir(), "tiers.csv")
			write := func(rows map[string]string) {
				var b strings.Builder
				b.WriteString("customer_id,tier\n")
				for _, id := range slices.Sorted(maps.Keys(rows)) {
					fmt.Fprintf(&b, "%s,%s\n", id, rows[id])
				}
				if err := os.WriteFile(csv, []byte(b.String()), 0o600); err != nil {
					t.Fatal(err)
				}
				w.tiers = maps.Clone(rows)
			}
			_, orders := lakeLookupSpecs("")
			orders.Rules[0].Lookup.Entity, orders.Rules[0].Lookup.Table, orders.Rules[0].Lookup.File = "", "", csv
			if derived {
				orders.Rules = append(orders.Rules, RuleSpec{ID: "E2", Kind: "derive", Column: "tier_len", Type: "int64", Expr: "len(customer_tier ?? '')"})
			}
			write(map[string]string{"c1": "gold", "c2": "silver"})
			w.land("orders", w.order("o1", "c1"), w.order("o2", "c2"))
			w.run(orders)
			w.check("first run")

			write(map[string]string{"c1": "gold", "c2": "silver", "c9": "bronze"}) // no order names c9
			w.land("orders", w.order("o3", "c1"))
			if res := w.run(orders); res.Replay != derived || res.Read != 1 && !derived {
				t.Fatalf("a change no row feels (derived %v): %+v", derived, res)
			}
			w.check("unfelt change")

			write(map[string]string{"c1": "platinum", "c2": "silver"})
			if res := w.run(orders); !res.Replay {
				t.Fatalf("a change rows feel: %+v", res)
			}
			w.check("felt change")
			if res := w.run(orders); res.Replay || res.Read != 0 {
				t.Fatalf("nothing changed: %+v", res)
			}
		})
	}
}

// TestLookupChangeWithTwoKeyColumns: a lookup on two columns declared in another order
// than their names sort in (the key's order): a change no stored row feels is still
// seen as such (the stored rows' key columns are read by name, not by position).
func TestLookupChangeWithTwoKeyColumns(t *testing.T) {
	lh := lakehousetest.Open(t)
	w := &lakeLookupWorld{t: t, lh: lh, dir: t.TempDir()}
	str, ts := Type{Kind: String}, Type{Kind: Timestamp}
	col := func(name string, t Type) ColumnSpec { return ColumnSpec{Name: name, Path: "$." + name, Type: t} }
	csv := filepath.Join(t.TempDir(), "zones.csv")
	write := func(body string) {
		if err := os.WriteFile(csv, []byte("zregion,acountry,zone\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec := EntitySpec{
		Name: "orders", Table: "silver.orders", QuarantineTable: "silver.orders_quarantine",
		Mode: ModeUpsert, Key: []string{"order_id"}, UpdatedAt: "updated_at", Buckets: 2,
		Columns: []ColumnSpec{col("order_id", str), col("zregion", str), col("acountry", str), col("updated_at", ts)},
		Rules: []RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{
			File: csv, On: map[string]string{"zregion": "zregion", "acountry": "acountry"}, Columns: []string{"zone"},
		}}},
	}
	write("eu,de,z1\neu,fr,z2\n")
	w.land("orders", `{"order_id":"o1","zregion":"eu","acountry":"de","updated_at":"2026-01-01T00:00:00Z"}`)
	w.run(spec)
	if got := readStrings(t, lh, "silver.orders", "order_id", "zone"); got["o1"] != "z1" {
		t.Fatalf("enriched %v", got)
	}
	write("eu,de,z1\neu,fr,z9\n") // only fr changed: no stored row names it
	if res := w.run(spec); res.Replay {
		t.Fatalf("a change no row feels rebuilt Silver: %+v", res)
	}
	write("eu,de,z7\neu,fr,z9\n")
	if res := w.run(spec); !res.Replay {
		t.Fatalf("a change a row feels: %+v", res)
	}
	if got := readStrings(t, lh, "silver.orders", "order_id", "zone"); got["o1"] != "z7" {
		t.Fatalf("after the change %v", got)
	}
}
