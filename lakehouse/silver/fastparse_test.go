package silver

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// checkFastRFC3339 fails if fastRFC3339 accepts s and the general path (parseTime, over
// time.Parse) does not, or reads another instant.
func checkFastRFC3339(t testing.TB, s string) (accepted bool) {
	us, ok := fastRFC3339(s)
	if !ok {
		return false
	}
	want, err := parseTime("", s, time.RFC3339Nano)
	if err != nil {
		t.Fatalf("%q: fast path accepted what time.Parse refuses (%v)", s, err)
	}
	if us != want.UnixMicro() {
		t.Fatalf("%q: fast path %d µs, time.Parse %d", s, us, want.UnixMicro())
	}
	return true
}

// checkFastDecimal fails if fastDecimal accepts s and parseDecimal does not, or reads
// another value.
func checkFastDecimal(t testing.TB, s string, prec, scale int) (accepted bool) {
	u, ok := fastDecimal(s, prec, scale)
	if !ok {
		return false
	}
	want, err := parseDecimal(s, prec, scale)
	if err != nil {
		t.Fatalf("%q decimal(%d,%d): fast path accepted what parseDecimal refuses (%v)", s, prec, scale, err)
	}
	if want.HighBits() != u>>63 || int64(want.LowBits()) != u {
		t.Fatalf("%q decimal(%d,%d): fast path %d, parseDecimal %s", s, prec, scale, u, want.ToString(0))
	}
	return true
}

func TestFastRFC3339(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool // taken by the fast path (else the general parser decides)
	}{
		{"2026-03-02T00:00:00Z", true},
		{"2026-03-02T00:00:00.528Z", true},
		{"2026-03-02T23:59:59.999999999Z", true},
		{"2026-03-02T10:00:00+02:00", true},
		{"2026-03-02T10:00:00.5-07:30", true},
		{"2024-02-29T12:00:00Z", true},
		{"1969-12-31T23:59:59.9999995Z", true},
		{"0001-01-01T00:00:00Z", true},
		{"9999-12-31T23:59:59Z", true},
		{"2023-02-29T12:00:00Z", false}, // not a leap year
		{"2026-04-31T00:00:00Z", false}, // no such day
		{"2026-03-02T24:00:00Z", false}, // hour
		{"2026-03-02T00:60:00Z", false}, // minute
		{"2026-03-02T00:00:60Z", false}, // leap second
		{"2026-03-02T00:00:00+24:00", false},
		{"2026-03-02T00:00:00.Z", false},
		{"2026-03-02T00:00:00.1234567891Z", false}, // more than 9 digits: general parser
		{"2026-03-02T00:00:00,5Z", false},
		{"2026-03-02 00:00:00Z", true},
		{"2026-03-02T00:00:00", true},
		{"2026-03-02 00:00:00.25", true},
		{"2026-03-02 00:00:00+01:00", true},
		{"2026-03-02t00:00:00", false},
		{"2026-03-02T00:00:0", false},
		{"2026-03-02T00:00:00.", false},
		{"2026-03-02T00:00:00 ", false},
		{"2026-03-02T00:00:00z", false},
		{"2026-3-02T00:00:00Z", false},
		{"2026-03-02T00:00:00+0200", false},
		{"+026-03-02T00:00:00Z", false},
		{"", false},
	} {
		if got := checkFastRFC3339(t, tc.in); got != tc.fast {
			t.Errorf("%q: fast path %v, want %v", tc.in, got, tc.fast)
		}
	}
	// Random instants in every form the fast path takes agree with time.Parse.
	rng := rand.New(rand.NewPCG(1, 2))
	zones := []*time.Location{time.UTC, time.FixedZone("", 2*3600), time.FixedZone("", -(9*3600 + 30*60)), time.FixedZone("", 14*3600)}
	layouts := []string{time.RFC3339, time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000000Z07:00",
		"2006-01-02 15:04:05Z07:00", "2006-01-02T15:04:05", "2006-01-02 15:04:05.999999", "2006-01-02T15:04:05.000"}
	for range 100_000 {
		ts := time.Unix(rng.Int64N(253402300799+62135596800)-62135596800, rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
		s := ts.Format(layouts[rng.IntN(len(layouts))])
		if !checkFastRFC3339(t, s) {
			t.Fatalf("%q: not taken by the fast path", s)
		}
	}
}

func TestFastDecimal(t *testing.T) {
	for _, tc := range []struct {
		in          string
		prec, scale int
		fast        bool
	}{
		{"12.35", 18, 2, true},
		{"-12.3", 18, 2, true},
		{"+7", 18, 2, true},
		{"0", 18, 2, true},
		{"-0.00", 18, 2, true},
		{".5", 18, 2, true},
		{"5.", 18, 2, true},
		{"999999999999999999", 18, 0, true},
		{"9999999999999999.99", 18, 2, true},
		{"99999999999999999.9", 18, 2, false}, // 19 digits scaled: general parser
		{"12.345", 18, 2, false},              // rounds: general parser
		{"123.4", 4, 2, false},                // too many digits for decimal(4,2)
		{"99.99", 4, 2, true},
		{"1e3", 18, 2, false},
		{"1.2.3", 18, 2, false},
		{" 1", 18, 2, false},
		{"-", 18, 2, false},
		{".", 18, 2, false},
		{"", 18, 2, false},
		{"0x10", 18, 2, false},
	} {
		if got := checkFastDecimal(t, tc.in, tc.prec, tc.scale); got != tc.fast {
			t.Errorf("%q decimal(%d,%d): fast path %v, want %v", tc.in, tc.prec, tc.scale, got, tc.fast)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	taken := 0
	for range 100_000 {
		prec := 1 + rng.IntN(38)
		scale := rng.IntN(min(prec, 10) + 1)
		intDigits, fracDigits := rng.IntN(12), rng.IntN(scale+1)
		var b strings.Builder
		if rng.IntN(3) == 0 {
			b.WriteByte("-+"[rng.IntN(2)])
		}
		for range intDigits {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		if fracDigits > 0 || rng.IntN(4) == 0 {
			b.WriteByte('.')
		}
		for range fracDigits {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		if checkFastDecimal(t, b.String(), prec, scale) {
			taken++
		}
	}
	if taken < 50_000 {
		t.Fatalf("the fast path took %d of 100000 random literals", taken)
	}
}

func FuzzFastParse(f *testing.F) {
	for _, s := range []string{"2026-03-02T00:00:00.528Z", "2026-03-02T10:00:00+02:00", "12.35", "-0.5", "1e3"} {
		f.Add(s, 18, 2)
	}
	f.Fuzz(func(t *testing.T, s string, prec, scale int) {
		checkFastRFC3339(t, s)
		if prec < 1 || prec > 38 || scale < 0 || scale > prec {
			return
		}
		checkFastDecimal(t, s, prec, scale)
	})
}

// TestIntegralDecimalsAreIntegers is issue 37, item 4: a Parquet double 2.0 reaches
// Bronze as JSON 2 and typed as an int32, but the same value from a CSV ("2.0") or a
// JSON line (2.0) was refused. A whole number written with a zero fraction is now an
// integer however it arrives; a real fraction is refused with its text, and the digits
// are read exactly (no float on the way).
func TestIntegralDecimalsAreIntegers(t *testing.T) {
	cols := []ColumnSpec{{Name: "n", Type: Type{Kind: Int32}}, {Name: "big", Type: Type{Kind: Int64}}}
	ps, err := newParser(cols)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		payload string
		n, big  int64
		reason  string
	}{
		{`{"n":2,"big":1}`, 2, 1, ""},                                   // Parquet's 2.0 (RecordToJSON writes 2)
		{`{"n":"2.0","big":"-7.00"}`, 2, -7, ""},                        // CSV
		{`{"n":2.0,"big":9007199254740993.0}`, 2, 9007199254740993, ""}, // JSON lines; 2^53+1 exactly
		{`{"n":" 3.0 ","big":0}`, 3, 0, ""},
		{`{"n":"3.","big":0}`, 0, 0, `invalid_n: not an integer "3."`},
		{`{"n":"2.5","big":0}`, 0, 0, `invalid_n: not an integer "2.5"`},
		{`{"n":2.000001,"big":0}`, 0, 0, `invalid_n: not an integer "2.000001"`},
		{`{"n":"2147483648.0","big":0}`, 0, 0, "invalid_n: 2147483648 out of int32 range"},
		{`{"n":".0","big":0}`, 0, 0, `invalid_n: not an integer ".0"`},
		{`{"n":"1e3","big":0}`, 0, 0, `invalid_n: not an integer "1e3"`},
	} {
		row := make([]Value, len(cols))
		reason := ps.parse([]byte(tt.payload), row)
		if reason != tt.reason || reason == "" && (row[0].I != tt.n || row[1].I != tt.big) {
			t.Errorf("%s: reason %q, row %+v; want %q, %d %d", tt.payload, reason, row, tt.reason, tt.n, tt.big)
		}
	}
}
