package silver

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// The fuzz targets of Silver's parsers and rule evaluation. Their seed corpora are in
// testdata/fuzz; `make test` runs each for a few seconds. A panic, a hang or a result that
// disagrees with the oracle is a failure.

// FuzzParseDecimal checks parseDecimal against shopspring/decimal (rounded half away from
// zero to the scale), and the fast path against parseDecimal.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"12.5", "-0.004", "1e2", "1e100000000000000", "0e5000", "9999999999999999.99", ".5", "5.", "-1.5e-3"} {
		f.Add(s, uint8(18), uint8(2))
	}
	f.Fuzz(func(t *testing.T, s string, p, sc uint8) {
		prec := 1 + int(p)%38
		scale := int(sc) % (prec + 1)
		checkFastDecimal(t, s, prec, scale)
		d, err := parseDecimal(s, prec, scale)
		if err != nil && !strings.Contains(err.Error(), "does not fit") {
			return
		}
		want, oerr := decimal.NewFromString(s)
		if oerr != nil {
			if err == nil {
				t.Fatalf("%q: parseDecimal accepted what the oracle refuses (%v)", s, oerr)
			}
			return
		}
		rounded := want.Round(int32(scale))
		unscaled := rounded.Shift(int32(scale)).Abs().Truncate(0).String()
		fits := rounded.IsZero() || len(unscaled) <= prec
		if err != nil {
			if fits {
				t.Fatalf("%q decimal(%d,%d): %v, oracle %s", s, prec, scale, err, rounded.StringFixed(int32(scale)))
			}
			return
		}
		if !fits {
			t.Fatalf("%q decimal(%d,%d): accepted %s, oracle says it does not fit", s, prec, scale, d.ToString(int32(scale)))
		}
		if got, exp := d.ToString(int32(scale)), rounded.StringFixed(int32(scale)); got != exp && !(rounded.Sign() == 0 && strings.TrimPrefix(got, "-") == exp) {
			t.Fatalf("%q decimal(%d,%d) = %s, oracle %s", s, prec, scale, got, exp)
		}
	})
}

// FuzzParseTimestamp checks that the timestamp and date parsers never panic or return a
// time outside years 0001-9999, and that the RFC 3339 fast path agrees with time.Parse.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-11-20T10:00:00Z", "2026-11-20 10:00:00", "2026-11-20T10:00:00.123456789+05:30", "1e300", "-62135596800", "NaN", "1700000000.5"} {
		f.Add(s, uint8(0))
	}
	formats := []string{"", "epoch_s", "epoch_ms", "epoch_us", "2006-01-02 15:04", time.RFC1123}
	f.Fuzz(func(t *testing.T, s string, fi uint8) {
		format := formats[int(fi)%len(formats)]
		checkFastRFC3339(t, s)
		for _, kind := range []Kind{Timestamp, Date} {
			c := ColumnSpec{Name: "ts", Type: Type{Kind: kind}, Format: format}
			v, err := convertString(&c, s)
			if err != nil {
				continue
			}
			us := v.I
			if kind == Date {
				us *= 86400e6
			}
			if us < minEpochMicros || us >= endEpochMicros {
				t.Fatalf("%q (kind %d, %q) = %d µs, outside years 0001-9999", s, kind, format, us)
			}
		}
	})
}

// FuzzParsePayload feeds payloads to the orders parser: no panic, a reason or a row whose
// required columns are set.
func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{
		`{"order_id":"o1","user_id":"u1","amount":"10.50","updated_at":"2026-11-20T10:00:00Z"}`,
		`{"order_id":"BOOM","user_id":"u","amount":"1e100000000000000","updated_at":"2026-11-20T10:00:00Z"}`,
		`{"order_id":1,"user_id":true,"amount":1e3,"updated_at":null}`,
		`[[[[[[[[[[]]]]]]]]]]`, `{"a":`, "\ufeff{}", "",
	} {
		f.Add([]byte(s))
	}
	spec := ordersSpec()
	f.Fuzz(func(t *testing.T, payload []byte) {
		ps, err := newParser(spec.Columns)
		if err != nil {
			t.Fatal(err)
		}
		row := make([]Value, len(spec.Columns))
		if reason := ps.parse(payload, row); reason != "" {
			return
		}
		for i, c := range spec.Columns {
			if c.Required && row[i].Null {
				t.Fatalf("%q: required %s is NULL without a reason", payload, c.Name)
			}
		}
	})
}

// FuzzRuleEval compiles a fuzzed expression as a filter and as a derive over the rule test
// columns, and applies it to a fuzzed row: compile errors are fine, a panic or a hang is
// not, and the direct evaluation (rules_direct.go) gives what the VM alone gives.
func FuzzRuleEval(f *testing.F) {
	for _, s := range []string{"amount >= 0", `upper(country) == "DE"`, "repeat(country, qty)", "qty / 0 > 1",
		"let r = 1..1000; all(r, all(r, true))", `len(split(status, "")) > 2`, "1..qty", "amount * 1e300 > 0"} {
		f.Add(s, "DE", int64(3))
	}
	f.Fuzz(func(t *testing.T, expr, country string, qty int64) {
		for _, sp := range []RuleSpec{
			{ID: "F1", Kind: "filter", Expr: expr},
			{ID: "D1", Kind: "derive", Column: "d", Type: "string", Expr: expr},
		} {
			rs, _, err := compileRules([]RuleSpec{sp}, ruleCols, nil)
			if err != nil {
				continue
			}
			row := make([]Value, len(ruleCols)+1)
			for i := range row {
				row[i] = ruleNull
			}
			row[0], row[2], row[4] = Value{S: "o1"}, Value{S: country}, Value{I: qty}
			b := slices.Clone(row)
			if got, want := rs.apply(row), vmOnly(rs).apply(b); got != want || fmt.Sprint(row) != fmt.Sprint(b) {
				t.Fatalf("%s: %q %v, on the VM alone %q %v", expr, got, row, want, b)
			}
		}
	})
}
