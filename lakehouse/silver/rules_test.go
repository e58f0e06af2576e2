package silver

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/expr-lang/expr/ast"
)

// ruleCols are the typed columns the rule tests run against (a cut of the orders example).
var ruleCols = []ColumnSpec{
	{Name: "order_id", Type: Type{Kind: String}},
	{Name: "amount", Type: Type{Kind: Decimal, Precision: 18, Scale: 2}},
	{Name: "country", Type: Type{Kind: String}},
	{Name: "status", Type: Type{Kind: String}},
	{Name: "qty", Type: Type{Kind: Int64}},
	{Name: "created_at", Type: Type{Kind: Timestamp}},
}

// F1 of examples/orders.yaml.
var ruleF1 = RuleSpec{ID: "F1", Kind: "filter", Expr: "amount >= 0", Reason: "negative_amount"}

var ruleNull = Value{Null: true}

// ruleRow builds a row of ruleCols (plus room for extra columns) from text cells; "<null>" is NULL.
func ruleRow(t testing.TB, extra int, cells ...string) []Value {
	t.Helper()
	row := make([]Value, len(ruleCols)+extra)
	for i := range row {
		row[i] = ruleNull
	}
	for i, s := range cells {
		if s == "<null>" {
			continue
		}
		v, err := convertString(&ruleCols[i], s)
		if err != nil {
			t.Fatal(err)
		}
		row[i] = v
	}
	return row
}

// ruleText renders a cell for comparisons; NULL is "<null>".
func ruleText(v Value, typ Type) string {
	if v.Null {
		return "<null>"
	}
	return string(appendLookupKey(nil, typ, v))
}

func mustCompile(t testing.TB, specs []RuleSpec, load LookupLoader) (*ruleSet, []ColumnSpec) {
	t.Helper()
	rs, extra, err := compileRules(specs, ruleCols, load)
	if err != nil {
		t.Fatal(err)
	}
	return rs, extra
}

func TestRuleFilterF1(t *testing.T) {
	rs, extra := mustCompile(t, []RuleSpec{ruleF1}, nil)
	if len(extra) != 0 {
		t.Fatalf("extra = %v", extra)
	}
	for _, tc := range []struct {
		amount, want string
	}{
		{"-1", "F1:negative_amount"},
		{"-0.01", "F1:negative_amount"},
		{"0", ""},
		{"10.50", ""},
		// SQL: NULL >= 0 is not true, so WHERE drops the row; here it is quarantined.
		{"<null>", "F1:negative_amount"},
	} {
		row := ruleRow(t, 0, "o1", tc.amount, "DE")
		if got := rs.apply(row); got != tc.want {
			t.Errorf("amount %s: apply = %q, want %q", tc.amount, got, tc.want)
		}
	}
}

func TestRuleFilterNullsAndTypes(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		amount  string
		country string
		want    string
	}{
		{"amount == nil || amount >= 0", "<null>", "DE", ""},
		{"(amount ?? 0) >= 0", "<null>", "DE", ""},
		{"(amount ?? 0) >= 0", "-2", "DE", "F2:r"},
		{"country in ['DE', 'FR']", "1", "DE", ""},
		{"country in ['DE', 'FR']", "1", "<null>", "F2:r"},
		{"amount > 10.25", "10.25", "DE", "F2:r"}, // decimals compare as float64
		{"amount > 10.25", "10.26", "DE", ""},
		{"created_at >= date('2024-01-01')", "1", "DE", "F2:r"}, // NULL created_at
		{"$env.amount >= 1", "1", "DE", ""},
		{"len(country) == 2", "1", "<null>", "F2:r"}, // runtime error on NULL
		{"country ?? false", "1", "DE", "F2:r"},      // not a bool at run time
		{"country ?? false", "1", "<null>", "F2:r"},  // false
	} {
		rs, _ := mustCompile(t, []RuleSpec{{ID: "F2", Kind: "filter", Expr: tc.expr, Reason: "r"}}, nil)
		if got := rs.apply(ruleRow(t, 0, "o1", tc.amount, tc.country)); got != tc.want {
			t.Errorf("%s (amount %s, country %s): apply = %q, want %q", tc.expr, tc.amount, tc.country, got, tc.want)
		}
	}
	// Timestamps are time.Time in UTC and date() literals are UTC midnight.
	rs, _ := mustCompile(t, []RuleSpec{{ID: "F3", Kind: "filter", Expr: "created_at >= date('2024-01-01') && created_at < date('2025-01-01')", Reason: "out_of_range"}}, nil)
	for ts, want := range map[string]string{
		"2024-01-01T00:00:00Z":        "",
		"2023-12-31T23:59:59.999999Z": "F3:out_of_range",
		"2024-12-31T23:59:59Z":        "",
		"2025-01-01T00:00:00Z":        "F3:out_of_range",
		"2024-01-01T00:30:00+01:00":   "F3:out_of_range",
	} {
		if got := rs.apply(ruleRow(t, 0, "o1", "1", "DE", "new", "1", ts)); got != want {
			t.Errorf("created_at %s: apply = %q, want %q", ts, got, want)
		}
	}
}

func TestRuleNormalize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rules   []RuleSpec
		country string
		want    string // country after the rules, or the quarantine reason
	}{
		{"upper", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "upper(country)"}}, "de", "DE"},
		{"trim", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "trim(country)"}}, "  de \t", "de"},
		{"trim then upper sees the trimmed value", []RuleSpec{
			{ID: "N1", Kind: "normalize", Column: "country", Expr: "trim(country)"},
			{ID: "N2", Kind: "normalize", Column: "country", Expr: "upper(country)"},
			{ID: "F1", Kind: "filter", Expr: "len(country) == 2", Reason: "bad_country"},
		}, " de ", "DE"},
		{"filter after normalize", []RuleSpec{
			{ID: "N1", Kind: "normalize", Column: "country", Expr: "trim(country)"},
			{ID: "F1", Kind: "filter", Expr: "len(country) == 2", Reason: "bad_country"},
		}, " deu ", "F1:bad_country"},
		// upper(NULL) is NULL, as in SQL: not a quarantine.
		{"upper of NULL", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "upper(country)"}}, "<null>", "<null>"},
		{"coalesce", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "country ?? 'ZZ'"}}, "<null>", "ZZ"},
		{"to NULL", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "country == '' ? nil : country"}}, "", "<null>"},
		{"not a string at run time", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "country == 'x' ? 1 : country", Reason: "bad_country"}}, "x", "N1:bad_country"},
		{"default reason", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "country == 'x' ? 1 : country"}}, "x", "N1:normalize_failed"},
		{"runtime error on non-NULL input", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "country + string(1 % (len(country) - 1))"}}, "x", "N1:division_by_zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, _ := mustCompile(t, tc.rules, nil)
			row := ruleRow(t, 0, "o1", "1", tc.country)
			got := rs.apply(row)
			if got == "" {
				got = ruleText(row[2], ruleCols[2].Type)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}

	// Numbers go back to the column's type.
	for _, tc := range []struct {
		col, expr, in, want string
	}{
		{"amount", "amount * 1.1", "10.00", "11.00"},
		{"amount", "amount / 3", "10.00", "3.33"},
		{"amount", "amount + 0.005", "1.00", "1.01"}, // half away from zero
		{"amount", "-amount - 0.005", "1.00", "-1.01"},
		{"amount", "amount ?? 0", "<null>", "0.00"},
		{"amount", "amount * 1e30", "1.00", "N1:normalize_failed"}, // does not fit decimal(18,2)
		{"qty", "qty * 2", "21", "42"},
		{"qty", "qty / 2", "42", "21"},                  // float, integral
		{"qty", "qty / 4", "42", "N1:normalize_failed"}, // float, not integral
		{"qty", "qty ?? 0", "<null>", "0"},
		{"qty", "qty * 10 ** 20", "5", "N1:normalize_failed"}, // float beyond int64
		{"created_at", "created_at.Add(duration('1h'))", "2024-03-01T10:00:00Z", "2024-03-01T11:00:00Z"},
		{"created_at", "'2024-05-06T07:08:09.5Z'", "2024-03-01T10:00:00Z", "2024-05-06T07:08:09.5Z"},
	} {
		i := map[string]int{"amount": 1, "qty": 4, "created_at": 5}[tc.col]
		cells := []string{"o1", "1", "DE", "new", "1", "2024-01-01T00:00:00Z"}
		cells[i] = tc.in
		rs, _ := mustCompile(t, []RuleSpec{{ID: "N1", Kind: "normalize", Column: tc.col, Expr: tc.expr}}, nil)
		row := ruleRow(t, 0, cells...)
		got := rs.apply(row)
		if got == "" {
			got = ruleText(row[i], ruleCols[i].Type)
		}
		if got != tc.want {
			t.Errorf("%s = %s on %s: got %q, want %q", tc.col, tc.expr, tc.in, got, tc.want)
		}
	}
}

func TestRuleDerive(t *testing.T) {
	for _, tc := range []struct {
		name, expr, typ string
		cells           []string
		want            string // the derived cell, or the quarantine reason
	}{
		{"amount * 2 to decimal", "amount * 2", "decimal(18,2)", []string{"o1", "10.25"}, "20.50"},
		{"amount * 2 of NULL", "amount * 2", "decimal(18,2)", []string{"o1", "<null>"}, "<null>"},
		{"rounding to scale", "amount / 3", "decimal(18,2)", []string{"o1", "-0.05"}, "-0.02"},
		{"integer to decimal", "qty * 100", "decimal(5,2)", []string{"o1", "1", "DE", "new", "7"}, "700.00"},
		{"integer does not fit", "qty * 100", "decimal(5,2)", []string{"o1", "1", "DE", "new", "70"}, "E1:derive_failed"},
		{"concat", "country + '-' + status", "string", []string{"o1", "1", "DE", "paid"}, "DE-paid"},
		{"concat of NULL", "country + '-' + status", "string", []string{"o1", "1", "DE", "<null>"}, "<null>"},
		{"string of NULL is NULL", "string(qty)", "string", []string{"o1", "1", "DE", "new", "<null>"}, "<null>"},
		{"comparison with NULL is NULL", "country == 'DE'", "bool", []string{"o1", "1", "<null>"}, "<null>"},
		{"branch not taken reads no NULL", "status == 'x' ? upper(country) : status", "string", []string{"o1", "1", "<null>", "new"}, "new"},
		{"branch taken reads NULL", "status == 'x' ? upper(country) : status", "string", []string{"o1", "1", "<null>", "x"}, "<null>"},
		{"nil-aware", "country == nil ? 'none' : country", "string", []string{"o1", "1", "<null>"}, "none"},
		{"short-circuit", "country == nil || country == 'DE'", "bool", []string{"o1", "1", "<null>"}, "true"},
		{"int32 range", "qty * 1000", "int32", []string{"o1", "1", "DE", "new", "3000000"}, "E1:derive_failed"},
		{"float", "qty / 8", "float64", []string{"o1", "1", "DE", "new", "3"}, "0.375"},
		{"bool", "amount > 100", "bool", []string{"o1", "150"}, "true"},
		{"date of a timestamp", "created_at", "date", []string{"o1", "1", "DE", "new", "1", "2024-03-01T23:30:00-02:00"}, "2024-03-02"},
		{"date before 1970", "created_at", "date", []string{"o1", "1", "DE", "new", "1", "1969-12-31T12:00:00Z"}, "1969-12-31"},
		{"duration in minutes", "(created_at - date('2024-03-01')).Minutes()", "float64", []string{"o1", "1", "DE", "new", "1", "2024-03-01T01:30:00Z"}, "90"},
		{"string parsed like payload text", "'12.345'", "decimal(18,2)", nil, "12.35"},
		{"string not a number", "country", "int64", []string{"o1", "1", "DE"}, "E1:derive_failed"},
		{"NaN", "qty / 0 - qty / 0", "float64", []string{"o1", "1", "DE", "new", "1"}, "E1:derive_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, extra := mustCompile(t, []RuleSpec{{ID: "E1", Kind: "derive", Column: "out", Type: tc.typ, Expr: tc.expr}}, nil)
			typ, _ := ParseType(tc.typ)
			if len(extra) != 1 || extra[0].Name != "out" || extra[0].Type != typ {
				t.Fatalf("extra = %+v", extra)
			}
			row := ruleRow(t, 1, tc.cells...)
			got := rs.apply(row)
			if got == "" {
				got = ruleText(row[len(ruleCols)], typ)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}

	// Later rules see derived columns, and a derived decimal as stored (rounded to scale).
	rs, extra := mustCompile(t, []RuleSpec{
		{ID: "E1", Kind: "derive", Column: "third", Type: "decimal(18,2)", Expr: "amount / 3"},
		{ID: "E2", Kind: "derive", Column: "label", Type: "string", Expr: "string(third)"},
		{ID: "F1", Kind: "filter", Expr: "third < 10", Reason: "too_big"},
	}, nil)
	if len(extra) != 2 || extra[0].Name != "third" || extra[1].Name != "label" {
		t.Fatalf("extra = %+v", extra)
	}
	row := ruleRow(t, 2, "o1", "1")
	if got := rs.apply(row); got != "" {
		t.Fatalf("apply = %q", got)
	}
	if got := row[len(ruleCols)+1].S; got != "0.33" {
		t.Errorf("label = %q, want 0.33", got)
	}
	if got := rs.apply(ruleRow(t, 2, "o1", "30")); got != "F1:too_big" {
		t.Errorf("apply = %q, want F1:too_big", got)
	}
}

func writeRuleFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRuleLookupCSV(t *testing.T) {
	regions := writeRuleFile(t, "regions.csv", "\ufeffcode, region ,zone\nDE,EMEA,eu-central\nFR,EMEA,eu-west\nUS,AMER,\n")
	rs, extra := mustCompile(t, []RuleSpec{
		{ID: "N1", Kind: "normalize", Column: "country", Expr: "upper(country)"},
		{ID: "E1", Kind: "lookup", Reason: "region of the country", Lookup: &LookupSpec{File: regions, On: map[string]string{"country": "code"}, Columns: []string{"region", "zone"}}},
		{ID: "E2", Kind: "derive", Column: "region_or_unknown", Type: "string", Expr: "region ?? 'unknown'"},
	}, nil)
	want := []ColumnSpec{{Name: "region", Type: Type{Kind: String}}, {Name: "zone", Type: Type{Kind: String}}, {Name: "region_or_unknown", Type: Type{Kind: String}}}
	if len(extra) != len(want) {
		t.Fatalf("extra = %+v", extra)
	}
	for i := range want {
		if extra[i] != want[i] {
			t.Fatalf("extra[%d] = %+v, want %+v", i, extra[i], want[i])
		}
	}
	for _, tc := range []struct {
		country, region, zone, derived string
	}{
		{"de", "EMEA", "eu-central", "EMEA"},
		{"FR", "EMEA", "eu-west", "EMEA"},
		{"US", "AMER", "", "AMER"},                // empty cell: empty string
		{"XX", "<null>", "<null>", "unknown"},     // no match: LEFT JOIN, not a quarantine
		{"<null>", "<null>", "<null>", "unknown"}, // NULL never matches
		{"DE\x1fx", "<null>", "<null>", "unknown"},
	} {
		row := ruleRow(t, 3, "o1", "1", tc.country)
		if got := rs.apply(row); got != "" {
			t.Fatalf("%s: apply = %q", tc.country, got)
		}
		n := len(ruleCols)
		got := []string{ruleText(row[n], extra[0].Type), ruleText(row[n+1], extra[1].Type), ruleText(row[n+2], extra[2].Type)}
		if got[0] != tc.region || got[1] != tc.zone || got[2] != tc.derived {
			t.Errorf("%q: got %q, want [%s %s %s]", tc.country, got, tc.region, tc.zone, tc.derived)
		}
	}
}

func TestRuleLookupTypedKeys(t *testing.T) {
	// Two key columns, one typed: key text is typed like the local column, so " 7" and
	// "7.0"-free integer text match qty 7, and "1.5" matches the decimal 1.50.
	ref := writeRuleFile(t, "ref.csv", "q,amt,name\n 7,1.5,seven\n8,2,eight\nx,1,bad-int\n")
	rs, _ := mustCompile(t, []RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{
		File: ref, On: map[string]string{"qty": "q", "amount": "amt"}, Columns: []string{"name"},
	}}}, nil)
	for _, tc := range []struct{ amount, qty, want string }{
		{"1.50", "7", "seven"},
		{"2", "8", "eight"},
		{"2.01", "8", "<null>"},
		{"1", "<null>", "<null>"},
	} {
		row := ruleRow(t, 1, "o1", tc.amount, "DE", "new", tc.qty)
		if r := rs.apply(row); r != "" {
			t.Fatal(r)
		}
		if got := ruleText(row[len(ruleCols)], Type{Kind: String}); got != tc.want {
			t.Errorf("amount %s qty %s: got %q, want %q", tc.amount, tc.qty, got, tc.want)
		}
	}

	// A loader (another entity's Silver table) is called for entity lookups.
	var asked LookupSpec
	rs, _ = mustCompile(t, []RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{
		Entity: "customers", On: map[string]string{"order_id": "id"}, Columns: []string{"tier"},
	}}}, func(l LookupSpec) (LookupTable, string, error) {
		asked = l
		return LookupTable{"o1": {"gold"}}, "v1", nil
	})
	if asked.Entity != "customers" {
		t.Fatalf("loader got %+v", asked)
	}
	row := ruleRow(t, 1, "o1")
	rs.apply(row)
	if row[len(ruleCols)].S != "gold" {
		t.Errorf("tier = %+v", row[len(ruleCols)])
	}
}

func TestRuleCSVLookupErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", "empty file"},
		{"missing key column", "id,region\nDE,EMEA\n", `no column "code"`},
		{"missing value column", "code,zone\nDE,EMEA\n", `no column "region"`},
		{"duplicate key", "code,region\nDE,EMEA\nDE,APAC\n", "line 3: key \"DE\" appears twice"},
		{"ragged", "code,region\nDE\n", "wrong number of fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeRuleFile(t, "ref.csv", tc.content)
			_, err := LoadCSVLookup(LookupSpec{File: p, On: map[string]string{"country": "code"}, Columns: []string{"region"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// The same row twice is harmless.
	p := writeRuleFile(t, "ref.csv", "code,region\nDE,EMEA\nDE,EMEA\n")
	lt, err := LoadCSVLookup(LookupSpec{File: p, On: map[string]string{"country": "code"}, Columns: []string{"region"}})
	if err != nil || len(lt) != 1 {
		t.Fatalf("got %v, %v", lt, err)
	}
}

func TestRuleCompileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.csv")
	for _, tc := range []struct {
		name  string
		rules []RuleSpec
		want  []string
	}{
		{"unknown column", []RuleSpec{ruleF1, {ID: "F2", Kind: "filter", Expr: "amout >= 0", Reason: "x"}}, []string{"rule F2", "unknown name amout"}},
		{"name in another case", []RuleSpec{{ID: "F1", Kind: "filter", Expr: "Amount >= 0 && AMOUNT < 9", Reason: "x"}}, []string{"rule F1", "unknown name A", "(names are case-sensitive: did you mean amount?)"}},
		{"non-bool filter", []RuleSpec{{ID: "F1", Kind: "filter", Expr: "amount + 1", Reason: "x"}}, []string{"rule F1", "expected bool"}},
		{"syntax", []RuleSpec{{ID: "F1", Kind: "filter", Expr: "amount >=", Reason: "x"}}, []string{"rule F1", "unexpected token"}},
		{"empty expr", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country"}}, []string{"rule N1", "missing expr"}},
		{"unknown kind", []RuleSpec{{ID: "X1", Kind: "map", Expr: "1"}}, []string{"rule X1", "unknown kind"}},
		{"missing id", []RuleSpec{{Kind: "filter", Expr: "true"}}, []string{"rules[0]: missing id"}},
		{"duplicate id", []RuleSpec{ruleF1, ruleF1}, []string{"rule F1: duplicate id"}},
		{"normalize unknown column", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "nope", Expr: "1"}}, []string{"rule N1", `unknown column "nope"`}},
		{"normalize type", []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "amount * 2"}}, []string{"rule N1", "yields float64, column country is string"}},
		{"derive type", []RuleSpec{{ID: "E1", Kind: "derive", Column: "d", Type: "date", Expr: "qty"}}, []string{"rule E1", "yields int, column d is date"}},
		{"derive duration", []RuleSpec{{ID: "E1", Kind: "derive", Column: "d", Type: "int64", Expr: "created_at - created_at"}}, []string{"rule E1", "duration"}},
		{"derive bad type", []RuleSpec{{ID: "E1", Kind: "derive", Column: "d", Type: "decimal(50,2)", Expr: "1"}}, []string{"rule E1", "unknown type"}},
		{"derive existing column", []RuleSpec{{ID: "E1", Kind: "derive", Column: "amount", Type: "int64", Expr: "1"}}, []string{"rule E1", `column "amount" already exists`}},
		{"derive used before defined", []RuleSpec{{ID: "F1", Kind: "filter", Expr: "d > 0", Reason: "x"}, {ID: "E1", Kind: "derive", Column: "d", Type: "int64", Expr: "1"}}, []string{"rule F1", "unknown name d"}},
		{"now is disabled", []RuleSpec{{ID: "F1", Kind: "filter", Expr: "created_at < now()", Reason: "x"}}, []string{"rule F1", "now"}},
		{"lookup missing file", []RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{File: missing, On: map[string]string{"country": "code"}, Columns: []string{"region"}}}}, []string{"rule E1", "missing.csv"}},
		{"lookup unknown column", []RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{File: missing, On: map[string]string{"land": "code"}, Columns: []string{"region"}}}}, []string{"rule E1", `unknown column "land"`}},
		{"lookup without loader", []RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{Entity: "customers", On: map[string]string{"country": "code"}, Columns: []string{"region"}}}}, []string{"rule E1", "no loader"}},
		{"lookup without spec", []RuleSpec{{ID: "E1", Kind: "lookup"}}, []string{"rule E1", "missing lookup"}},
		{"lookup column clash", []RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{Entity: "c", On: map[string]string{"country": "code"}, Columns: []string{"status"}}}}, []string{"rule E1", `column "status" already exists`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := compileRules(tc.rules, ruleCols, func(LookupSpec) (LookupTable, string, error) { return LookupTable{}, "", nil })
			if tc.name == "lookup without loader" {
				_, _, err = compileRules(tc.rules, ruleCols, nil)
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// A loader returning a malformed table is an error, not a panic later.
	_, _, err := compileRules([]RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{Entity: "c", On: map[string]string{"country": "code"}, Columns: []string{"a", "b"}}}},
		ruleCols, func(LookupSpec) (LookupTable, string, error) { return LookupTable{"DE": {"x"}}, "", nil })
	if err == nil || !strings.Contains(err.Error(), "rule E1") || !strings.Contains(err.Error(), "1 values, want 2") {
		t.Errorf("err = %v", err)
	}
	_, _, err = compileRules([]RuleSpec{{ID: "E1", Kind: "lookup", Lookup: &LookupSpec{Entity: "c", On: map[string]string{"country": "code", "qty": "q"}, Columns: []string{"a"}}}},
		ruleCols, func(LookupSpec) (LookupTable, string, error) { return LookupTable{"DE": {"x"}}, "", nil })
	if err == nil || !strings.Contains(err.Error(), "rule E1") || !strings.Contains(err.Error(), "does not have 2 parts") {
		t.Errorf("err = %v", err)
	}
}

func TestRulesMarkdown(t *testing.T) {
	spec := EntitySpec{Name: "orders", Rules: []RuleSpec{
		ruleF1,
		{ID: "F2", Kind: "filter", Expr: "status == 'test' || amount > 1000", Reason: "test_or_huge"},
		{ID: "N1", Kind: "normalize", Column: "country", Expr: "upper(trim(country))", Reason: "iso_country"},
		{ID: "E1", Kind: "derive", Column: "amount_x2", Type: "decimal(18,2)", Expr: "amount * 2"},
		{ID: "E2", Kind: "lookup", Reason: "region of the country", Lookup: &LookupSpec{File: "ref/regions.csv", On: map[string]string{"country": "code"}, Columns: []string{"region", "zone"}}},
		{ID: "E3", Kind: "lookup", Lookup: &LookupSpec{Entity: "customers", On: map[string]string{"user_id": "id", "country": "country"}, Columns: []string{"tier"}}},
	}}
	got := RulesMarkdown(spec)
	golden := "" +
		"| id  | kind      | column                    | expression / lookup                                                        | reason                |\n" +
		"| --- | --------- | ------------------------- | -------------------------------------------------------------------------- | --------------------- |\n" +
		"| F1  | filter    |                           | `amount >= 0`                                                              | negative_amount       |\n" +
		"| F2  | filter    |                           | `status == 'test' \\|\\| amount > 1000`                                      | test_or_huge          |\n" +
		"| N1  | normalize | country                   | `upper(trim(country))`                                                     | iso_country           |\n" +
		"| E1  | derive    | amount_x2 (decimal(18,2)) | `amount * 2`                                                               |                       |\n" +
		"| E2  | lookup    | region, zone              | LEFT JOIN file `ref/regions.csv` ON `country` = `code`                     | region of the country |\n" +
		"| E3  | lookup    | tier                      | LEFT JOIN entity `customers` ON `country` = `country` AND `user_id` = `id` |                       |\n"
	if got != golden {
		t.Errorf("RulesMarkdown:\n%s\nwant:\n%s", got, golden)
	}

	// The registry of examples/orders.yaml.
	got = RulesMarkdown(EntitySpec{Name: "orders", Rules: []RuleSpec{ruleF1}})
	golden = "" +
		"| id  | kind   | column | expression / lookup | reason          |\n" +
		"| --- | ------ | ------ | ------------------- | --------------- |\n" +
		"| F1  | filter |        | `amount >= 0`       | negative_amount |\n"
	if got != golden {
		t.Errorf("RulesMarkdown(orders):\n%s\nwant:\n%s", got, golden)
	}
}

func TestRuleSetClone(t *testing.T) {
	rs, _ := mustCompile(t, []RuleSpec{ruleF1, {ID: "N1", Kind: "normalize", Column: "country", Expr: "upper(country)"}}, nil)
	c := rs.clone()
	a, b := ruleRow(t, 0, "o1", "1", "de"), ruleRow(t, 0, "o2", "-1", "fr")
	if rs.apply(a) != "" || c.apply(b) != "F1:negative_amount" || a[2].S != "DE" {
		t.Fatalf("clone: %v %v", a, b)
	}
}

// FuzzRuleExpr checks that no expression, valid or not, panics when compiled or applied,
// and that the direct evaluation gives what the VM alone gives.
func FuzzRuleExpr(f *testing.F) {
	for _, s := range []string{
		"amount >= 0", "upper(country)", "qty % 0", "country[10]", "1..1000000000",
		"created_at.Add(duration(country))", "int(country)", "amount / 0", "[1,2][qty]",
		"map(1..qty, # * amount)", "nil", "{'a': 1}", "$env", "date(country)", "qty * 10 ** 300",
	} {
		f.Add(s)
	}
	rows := [][]string{
		{"o1", "1.5", "de", "new", "3", "2024-01-01T00:00:00Z"},
		{"o2", "<null>", "<null>", "<null>", "<null>", "<null>"},
		{"o3", "-99999999.99", "", "x", "-9223372036854775808", "1969-01-01T00:00:00Z"},
	}
	f.Fuzz(func(t *testing.T, src string) {
		for _, r := range []RuleSpec{
			{ID: "F1", Kind: "filter", Expr: src, Reason: "x"},
			{ID: "N1", Kind: "normalize", Column: "country", Expr: src},
			{ID: "N1", Kind: "normalize", Column: "amount", Expr: src},
			{ID: "E1", Kind: "derive", Column: "d", Type: "decimal(10,3)", Expr: src},
			{ID: "E1", Kind: "derive", Column: "d", Type: "date", Expr: src},
			{ID: "E1", Kind: "derive", Column: "d", Type: "int32", Expr: src},
		} {
			rs, extra, err := compileRules([]RuleSpec{r}, ruleCols, nil)
			if err != nil {
				if !strings.Contains(err.Error(), "rule "+r.ID) {
					t.Fatalf("error without the rule id: %v", err)
				}
				continue
			}
			vm := vmOnly(rs)
			for _, cells := range rows {
				a, b := ruleRow(t, len(extra), cells...), ruleRow(t, len(extra), cells...)
				if got, want := rs.apply(a), vm.apply(b); got != want || fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("%s: %q %v, on the VM alone %q %v", src, got, a, want, b)
				}
			}
		}
	})
}

// BenchmarkApplyRules runs F1 and one normalize rule over 1M rows per op.
func BenchmarkApplyRules(b *testing.B) {
	const rows = 1_000_000
	rs, _ := mustCompile(b, []RuleSpec{ruleF1, {ID: "N1", Kind: "normalize", Column: "country", Expr: "upper(country)"}}, nil)
	countries := []string{"de", "FR", "us", "<null>", "gb", "NL", "es"}
	pool := make([][]Value, 4096)
	for i := range pool {
		cents := i*7919%20000 - 1000 // ~5% negative
		pool[i] = ruleRow(b, 0, "o", strconv.Itoa(cents)+"e-2", countries[i%len(countries)], "new", "1", "2024-01-01T00:00:00Z")
	}
	row := make([]Value, len(ruleCols))
	var ms0, ms1 runtime.MemStats
	b.ReportAllocs()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	quarantined := 0
	for b.Loop() {
		for i := range rows {
			copy(row, pool[i&4095])
			if rs.apply(row) != "" {
				quarantined++
			}
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	n := float64(b.N) * rows
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/row")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/row")
	b.ReportMetric(float64(quarantined)/n, "quarantined/row")
}

// TestConstDatesFolded: date() over string literals is folded into its time when the
// rule is compiled (no call left in the program), with the value a row would get: the
// F3 filter of TestRuleFilter gives the same answers folded and not (a date() over a
// column is not folded); a date() that fails stays a call and fails at run time.
func TestConstDatesFolded(t *testing.T) {
	calls := func(n ast.Node) (dates int) {
		ast.Find(n, func(n ast.Node) bool {
			switch c := n.(type) {
			case *ast.CallNode:
				if id, ok := c.Callee.(*ast.IdentifierNode); ok && id.Value == "date" {
					dates++
				}
			case *ast.BuiltinNode:
				if c.Name == "date" {
					dates++
				}
			}
			return false
		})
		return dates
	}
	expr := "created_at >= date('2024-01-01') && created_at < date('2025-01-01 00:00:00', '2006-01-02 15:04:05')"
	rs, _ := mustCompile(t, []RuleSpec{{ID: "F3", Kind: "filter", Expr: expr, Reason: "out_of_range"}}, nil)
	if n := calls(rs.rules[0].prog.Node()); n != 0 {
		t.Errorf("%d date() calls left after folding", n)
	}
	for ts, want := range map[string]string{
		"2024-01-01T00:00:00Z": "", "2023-12-31T23:59:59.999999Z": "F3:out_of_range",
		"2024-12-31T23:59:59Z": "", "2025-01-01T00:00:00Z": "F3:out_of_range",
	} {
		if got := rs.apply(ruleRow(t, 0, "o1", "1", "DE", "new", "1", ts)); got != want {
			t.Errorf("created_at %s: %q, want %q", ts, got, want)
		}
	}
	rs, _ = mustCompile(t, []RuleSpec{{ID: "F4", Kind: "filter", Expr: "date(country) > date('2024-01-01') || date('not a date') != nil", Reason: "r"}}, nil)
	if n := calls(rs.rules[0].prog.Node()); n != 2 {
		t.Errorf("%d date() calls left, want 2: over a column, and the one that fails", n)
	}
}
