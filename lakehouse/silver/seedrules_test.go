package silver

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docRules reads the rules written out in docs/expressions.md's taxi table ({id: …} code
// spans), so that the page and the code cannot drift apart.
func docRules(t *testing.T, zones string) []RuleSpec {
	t.Helper()
	b, err := os.ReadFile("../../docs/expressions.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []RuleSpec
	for _, m := range regexp.MustCompile("`(\\{id: [^`]*\\})`").FindAllStringSubmatch(string(b), -1) {
		var r struct {
			ID, Kind, Column, Type, Expr, Reason string
			Lookup                               *struct {
				File    string
				On      map[string]string
				Columns yaml.Node // a list of names or a mapping new name: lookup column
			}
		}
		if err := yaml.Unmarshal([]byte(m[1]), &r); err != nil {
			t.Fatalf("%s: %v", m[1], err)
		}
		rs := RuleSpec{ID: r.ID, Kind: r.Kind, Column: r.Column, Type: r.Type, Expr: r.Expr, Reason: r.Reason}
		if r.Lookup != nil {
			lk := &LookupSpec{File: strings.Replace(r.Lookup.File, "zones.csv", zones, 1), On: r.Lookup.On}
			n := r.Lookup.Columns.Content
			for i := 0; i+1 < len(n) && r.Lookup.Columns.Kind == yaml.MappingNode; i += 2 {
				lk.As, lk.Columns = append(lk.As, n[i].Value), append(lk.Columns, n[i+1].Value)
			}
			rs.Lookup = lk
		}
		out = append(out, rs)
	}
	return out
}

// TestSeedRulesAsDocumented is issue 19's "Why" 7: the taxi registry as docs/expressions.md
// spells it compiles, and does what the seed's rules say on hand-made trips, the first
// failing rule naming the reason.
func TestSeedRulesAsDocumented(t *testing.T) {
	zones := filepath.Join(t.TempDir(), "zones.csv")
	if err := os.WriteFile(zones, []byte("LocationID,Borough,Zone\n1,EWR,Newark Airport\n2,Queens,Jamaica Bay\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rules := docRules(t, zones)
	var ids []string
	for _, r := range rules {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, ","); got != "F1,F2,F3,N1,N2,N3,N4,E1,E2,E3,E0" {
		t.Fatalf("documented rules %s", got)
	}
	ty := func(s string) Type { x, _ := ParseType(s); return x }
	cols := []ColumnSpec{
		{Name: "VendorID", Type: ty("int64")}, {Name: "tpep_pickup_datetime", Type: ty("timestamp")},
		{Name: "tpep_dropoff_datetime", Type: ty("timestamp")}, {Name: "passenger_count", Type: ty("float64")},
		{Name: "RatecodeID", Type: ty("float64")}, {Name: "PULocationID", Type: ty("int64")},
		{Name: "DOLocationID", Type: ty("int64")}, {Name: "fare_amount", Type: ty("float64")},
		{Name: "total_amount", Type: ty("float64")}, {Name: "congestion_surcharge", Type: ty("float64")},
		{Name: "Airport_fee", Type: ty("float64")},
	}
	rs, _, err := compileRules(rules, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := rs.cols // the declared columns as the rules retype them, then the rules' own
	const N = "<null>"
	for _, tc := range []struct {
		cells  []string // cols in order
		reason string
		want   map[string]string // column -> value after the rules
	}{
		{[]string{"1", "2024-03-01T10:00:00Z", "2024-03-01T10:30:30Z", N, N, "1", "7", "10", "15", N, "1.25"}, "",
			map[string]string{"passenger_count": "0", "RatecodeID": "99", "congestion_surcharge": "0", "Airport_fee": "1.25",
				"trip_duration_minutes": "30.5", "pickup_borough": "EWR", "pickup_zone": "Newark Airport",
				"dropoff_borough": N, "dropoff_zone": N}},
		{[]string{"1", "2023-12-31T10:00:00Z", N, "2", "1", "2", "1", "-3", "15", "2.5", N}, "F1:negative_fare", nil},
		{[]string{"1", "2023-12-31T10:00:00Z", N, "2", "1", "2", "1", "3", "1001", "2.5", N}, "F2:extreme_total", nil},
		{[]string{"1", "2025-01-01T00:00:00Z", N, "2", "1", "2", "1", "3", "15", "2.5", N}, "F3:out_of_range", nil},
		{[]string{"1", "2024-12-31T23:59:59Z", N, "2", "1", "2", "1", N, "15", "2.5", N}, "F1:negative_fare", nil},
		{[]string{"1", "2024-03-01T10:00:00Z", N, "2.5", N, "1", "7", "10", "15", N, "1.25"}, "N1:normalize_failed", nil},
		{[]string{"2", "2024-12-31T23:59:59Z", N, "2", "1", "2", "1", "0", "15", "2.5", N}, "",
			map[string]string{"passenger_count": "2", "trip_duration_minutes": N, "pickup_borough": "Queens",
				"dropoff_borough": "EWR", "dropoff_zone": "Newark Airport", "Airport_fee": "0"}},
	} {
		row := make([]Value, len(all))
		for i := range row {
			row[i] = Value{Null: true}
			if i < len(tc.cells) && tc.cells[i] != N {
				if row[i], err = convertString(&cols[i], tc.cells[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := rs.apply(row); got != tc.reason {
			t.Errorf("%v: reason %q, want %q", tc.cells, got, tc.reason)
			continue
		}
		for name, want := range tc.want {
			i := len(all)
			for j, c := range all {
				if c.Name == name {
					i = j
				}
			}
			if i == len(all) {
				t.Fatalf("no column %s in %v", name, all)
			}
			if got := ruleText(row[i], all[i].Type); got != want {
				t.Errorf("%v: %s = %s, want %s", tc.cells, name, got, want)
			}
		}
	}
}
