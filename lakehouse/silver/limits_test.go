package silver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"goldbridge/lakehouse/lakehousetest"
)

func TestParseDecimalLimits(t *testing.T) {
	tests := []struct {
		in, want string // want "" = an error whose text holds errHas
		errHas   string
	}{
		{"1e100000000000000", "", "exponent"}, // the BOOM record of issue 17: 100 PB of zeros before
		{"1e2000000000", "", "exponent"},
		{"1e9223372036854775807", "", "exponent"},  // shift overflowed int before
		{"1e99999999999999999999", "", "exponent"}, // beyond int64
		{"1e-100000000000000", "", "exponent"},
		{"1e4096", "", "does not fit"},
		{"0e4096", "0.00", ""}, // zero fits whatever its exponent
		{"0.0000e4000", "0.00", ""},
		{"1e-4096", "0.00", ""},
		{"1e15", "1000000000000000.00", ""},
		{"1e16", "", "does not fit"},
		{"12.345e1", "123.45", ""},
		{strings.Repeat("1", MaxDecimalText+1), "", "exceeds the limit"},
		{"0." + strings.Repeat("0", MaxDecimalText-3) + "5", "0.00", ""},
	}
	for _, tt := range tests {
		d, err := parseDecimal(tt.in, 18, 2)
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("%s: err %v, want one with %q", clip(tt.in), err, tt.errHas)
			}
			continue
		}
		if err != nil || d.ToString(2) != tt.want {
			t.Errorf("%s = %s (%v), want %s", clip(tt.in), d.ToString(2), err, tt.want)
		}
	}
}

func TestParseTimeLimits(t *testing.T) {
	for _, tc := range []struct {
		format, in string
		ok         bool
	}{
		{"epoch_s", "1e300", false}, // int64 conversion of the float was undefined before
		{"epoch_ms", "-1e30", false},
		{"epoch_s", "NaN", false},
		{"epoch_s", "Inf", false},
		{"epoch_s", "253402300799", true},  // 9999-12-31T23:59:59Z
		{"epoch_s", "253402300800", false}, // year 10000
		{"epoch_s", "-62135596800", true},  // 0001-01-01
		{"", "2026-11-20T10:00:00Z", true},
		{"", strings.Repeat(" ", 10) + "2026-11-20T10:00:00Z", true},
		{"", "2026-11-20T10:00:00Z" + strings.Repeat("0", MaxTimeText), false},
		{"2006-01-02", "2026-11-20" + strings.Repeat("x", MaxTimeText), false},
	} {
		_, err := parseTime(tc.format, tc.in, "2006-01-02T15:04:05.999999999Z07:00")
		if (err == nil) != tc.ok {
			t.Errorf("%s %s: err %v, want ok=%v", tc.format, clip(tc.in), err, tc.ok)
		}
	}
}

func TestParsePayloadLimits(t *testing.T) {
	ps, err := newParser(ordersSpec().Columns)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]Value, len(ordersSpec().Columns))
	deep := `{"order_id":"o","user_id":"u","updated_at":"2026-11-20T10:00:00Z","x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`
	huge := `{"order_id":"o","user_id":"u","updated_at":"2026-11-20T10:00:00Z","x":"` + strings.Repeat("a", MaxPayloadBytes) + `"}`
	for in, want := range map[string]string{
		deep: "invalid_json: nested deeper than 300 levels",
		huge: "payload_too_large",
		`{"order_id":"BOOM","user_id":"u","amount":"1e100000000000000","updated_at":"2026-11-20T10:00:00Z"}`: "invalid_amount: decimal exponent",
		`{"order_id":"n","user_id":"u","amount":1e100000000000000,"updated_at":"2026-11-20T10:00:00Z"}`:      "invalid_amount: decimal exponent",
	} {
		if got := ps.parse([]byte(in), row); !strings.HasPrefix(got, want) {
			t.Errorf("%s: reason %q, want %q…", clip(in), got, want)
		}
	}
}

// TestPoisonRecordIsQuarantined: one record whose decimal asks for 10^17 zeros is a
// quarantine row with a reason, and the rest of the batch lands (issue 17: it killed
// Silver with an out-of-memory error on every run).
func TestPoisonRecordIsQuarantined(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	lines := []string{
		`{"order_id":"o1","user_id":"u","amount":"10.50","updated_at":"2026-11-20T10:00:00Z"}`,
		`{"order_id":"BOOM","user_id":"u","amount":"1e100000000000000","updated_at":"2026-11-20T10:00:00Z"}`,
		`{"order_id":"o2","user_id":"u","amount":"1e2","updated_at":"2026-11-20T10:00:00Z"}`,
	}
	for i := range 20 { // "20 rows of 1e2000000000 took 102 s and 5.9 GB"
		lines = append(lines, `{"order_id":"B`+strings.Repeat("x", i)+`","user_id":"u","amount":"1e2000000000","updated_at":"2026-11-20T10:00:00Z"}`)
	}
	if err := os.WriteFile(filepath.Join(landing, "1.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ingest(t, lh, landing)
	res, err := Run(ctx, lh, ordersSpec(), "bronze.orders", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Current != 2 || res.Quarantined != 21 || res.Read != 23 {
		t.Fatalf("counts = %+v, want 2 current, 21 quarantined", res.Counts)
	}
	got := silverRows(t, lh)
	if !strings.Contains(got["o1"], "|10.50|") || !strings.Contains(got["o2"], "|100.00|") || len(got) != 2 {
		t.Fatalf("silver rows = %v", got)
	}
	q, err := lh.LoadTable(ctx, "silver.orders_quarantine")
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := q.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		reasons := rec.Column(rec.Schema().FieldIndices(QColReason)[0]).(*array.String)
		for i := range reasons.Len() {
			n++
			if !strings.HasPrefix(reasons.Value(i), "invalid_amount: decimal exponent") {
				t.Errorf("quarantine reason %q", reasons.Value(i))
			}
		}
		rec.Release()
	}
	if n != 21 {
		t.Fatalf("%d quarantine rows, want 21", n)
	}
}

func TestRuleCompileLimits(t *testing.T) {
	for expr, want := range map[string]string{
		"let r = 1..1000; all(r, all(r, # > 0))":                   "inside another loop",
		"let r = 1..1000; sum(map(r, sum(r))) > 0":                 "inside another loop",
		`any(1..10, {len(split(country, "")) > #})`:                "inside another loop",
		"amount > 0 && " + strings.Repeat("qty + ", 800) + "1 > 0": "exceeds the limit",
		strings.Repeat("qty+", 600) + "1 > 0":                      "",
	} {
		_, _, err := compileRules([]RuleSpec{{ID: "F9", Kind: "filter", Expr: expr}}, ruleCols, nil)
		if want == "" {
			if err == nil {
				t.Errorf("%s: compiled", clip(expr))
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", clip(expr), err, want)
		}
	}
	// One loop is fine.
	if _, _, err := compileRules([]RuleSpec{{ID: "F9", Kind: "filter", Expr: `all(split(country, ","), len(#) == 2)`}}, ruleCols, nil); err != nil {
		t.Fatal(err)
	}
}

// TestRuleRepeatIsBounded: repeat() of a long column value 10^6 times quarantines the row
// without allocating the product (expr's builtin allocated it and then gave up).
func TestRuleRepeatIsBounded(t *testing.T) {
	rs, _ := mustCompile(t, []RuleSpec{{ID: "N1", Kind: "normalize", Column: "country", Expr: "repeat(country, qty)"}}, nil)
	row := ruleRow(t, 0, "o1", "1.00", strings.Repeat("x", 2000), "new", "1000000", "2026-01-01T00:00:00Z")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := rs.apply(row)
	runtime.ReadMemStats(&after)
	if got != "N1:memory_budget_exceeded" {
		t.Fatalf("reason %q", got)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("repeat allocated %d MB", grew>>20)
	}
	row = ruleRow(t, 0, "o1", "1.00", "ab", "new", "3", "2026-01-01T00:00:00Z")
	if got := rs.apply(row); got != "" || row[2].S != "ababab" {
		t.Fatalf("repeat(ab, 3) = %q (%s)", row[2].S, got)
	}
}

// TestQuarantineGate: a run that quarantines more than FailQuarantinePct of its rows
// commits nothing (no Silver, quarantine or watermark change) and names the top reasons;
// below the gate it commits as before (issue 17: 100% quarantined exited 0 with a WARN).
func TestQuarantineGate(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf(`{"order_id":"o%d","user_id":"u","amount":"x%d","updated_at":"2026-11-20T10:00:00Z"}`, i, i))
	}
	lines = append(lines, `{"user_id":"u","updated_at":"2026-11-20T10:00:00Z"}`)
	if err := os.WriteFile(filepath.Join(landing, "1.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ingest(t, lh, landing)
	spec := ordersSpec()
	spec.FailQuarantinePct = 50
	for range 2 { // the same verdict every time: nothing moved
		_, err := Run(ctx, lh, spec, "bronze.orders", Options{})
		if !errors.Is(err, ErrQuarantineGate) {
			t.Fatalf("err %v, want the quarantine gate", err)
		}
		for _, want := range []string{"11 of 11 bronze rows quarantined (100.00%)", "invalid_amount (10)", "missing_order_id (1)", "nothing committed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		}
		for _, ident := range []string{"silver.orders", "silver.orders_quarantine"} {
			tbl, err := lh.LoadTable(ctx, ident)
			if err != nil {
				t.Fatal(err)
			}
			if s := tbl.CurrentSnapshot(); s != nil {
				t.Fatalf("%s committed snapshot %d", ident, s.SnapshotID)
			}
		}
	}
	// Above the share: the same rows commit, quarantined with their reasons.
	spec.FailQuarantinePct = 100
	res, err := Run(ctx, lh, spec, "bronze.orders", Options{})
	if err != nil || res.Quarantined != 11 || res.QuarantineSnapshotID == 0 {
		t.Fatalf("with the gate at 100%%: %+v (%v)", res.Counts, err)
	}
}
