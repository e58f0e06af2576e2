package silver

import (
	"reflect"
	"strings"
	"testing"
)

// flatCols are columns of every type the flat path types, with a default, required
// ones and an ignored field beside them.
func flatCols() []ColumnSpec {
	t := func(s string) Type { ty, _ := ParseType(s); return ty }
	cur := "USD"
	return []ColumnSpec{
		{Name: "id", Path: "$.id", Type: t("string"), Required: true},
		{Name: "amount", Path: "$.amount", Type: t("decimal(18,2)")},
		{Name: "currency", Path: "$.currency", Type: t("string"), Default: &cur},
		{Name: "n", Path: "n", Type: t("int64")},
		{Name: "small", Path: "$.small", Type: t("int32")},
		{Name: "f", Path: "$.f", Type: t("float64")},
		{Name: "ok", Path: "$.ok", Type: t("bool")},
		{Name: "day", Path: "$.day", Type: t("date")},
		{Name: "at", Path: "$.at", Type: t("timestamp"), Required: true},
		{Name: "epoch", Path: "$.epoch", Type: t("timestamp"), Format: "epoch_ms"},
	}
}

// parseBoth parses payload by the flat path and by the general path (fastjson's tree),
// each with a tally of undeclared fields, and fails t where they differ.
func parseBoth(t *testing.T, payload []byte) (flatTaken bool) {
	t.Helper()
	cols := flatCols()
	var outs [2]struct {
		reason string
		row    []Value
		tally  fieldTally
	}
	for i := range outs {
		ps, err := newParser(cols)
		if err != nil {
			t.Fatal(err)
		}
		if ps.flat == nil {
			t.Fatal("flat columns got no flat path")
		}
		ps.known["ignored"] = struct{}{}
		ps.tally = &outs[i].tally
		if i == 1 {
			ps.flat = nil
		} else if _, ok := ps.parseFlat(payload, make([]Value, len(cols))); ok {
			flatTaken = true
		}
		outs[i].row = make([]Value, len(cols))
		outs[i].reason = ps.parse(payload, outs[i].row)
	}
	f, g := outs[0], outs[1]
	if f.reason != g.reason {
		t.Fatalf("%q: reason %q by the flat path, %q by the general one", payload, f.reason, g.reason)
	}
	if f.reason == "" && !reflect.DeepEqual(f.row, g.row) {
		t.Fatalf("%q: row\n%v by the flat path,\n%v by the general one", payload, f.row, g.row)
	}
	if !reflect.DeepEqual(f.tally.fields, g.tally.fields) || f.tally.overflow != g.tally.overflow {
		t.Fatalf("%q: undeclared fields %v by the flat path, %v by the general one", payload, f.tally.fields, g.tally.fields)
	}
	return flatTaken
}

// flatSeeds are payloads with whether the flat path takes them itself.
var flatSeeds = []struct {
	payload string
	flat    bool
}{
	{`{"id":"o-1","amount":"10.50","n":7,"small":2,"f":1.5,"ok":true,"day":"2026-01-02","at":"2026-11-20T10:00:00Z","epoch":1700000000000}`, true},
	{` { "id" : "o-2" , "amount" : 10.5 , "at" : "2026-11-20 10:00:00" , "ok" : false } `, true},
	{`{"at":"2026-11-20T10:00:00Z","id":"backwards","currency":null,"ignored":{"a":[1,2,{"b":"c\"d"}]}}`, true},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","undeclared":[1,"x"]}`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","id":"twice"}`, false},
	{`{"id":"o\u0031","at":"2026-11-20T10:00:00Z"}`, false},
	{`{"i\u0064":"escaped key","at":"2026-11-20T10:00:00Z"}`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","f":nan,"n":-inf}`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","f":NaN}`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","n":"12.00","small":99999999999}`, true},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","amount":{"v":1}}`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","amount":[1]}`, false},
	{`{"id":12,"at":"2026-11-20T10:00:00Z","ok":"true","currency":true}`, true},
	{`{"id":"o","at":1700000000}`, true},
	{`{"id":"o"}`, true},
	{`{"at":"2026-11-20T10:00:00Z"}`, true},
	{`{"id":"o","at":"2026-11-20T10:00:00Z"} x`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z",}`, false},
	{`{"id":"o" "at":"2026-11-20T10:00:00Z"}`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","n":12abc}`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","n":-}`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","ignored":tru}`, false},
	{`{"id":"\xff","at":"2026-11-20T10:00:00Z"}`, false}, // an escape (a bad one) in a column's string
	{`{}`, true},
	{`{ }`, true},
	{`{"id":"o","at":"2026-11-20T10:00:00Z"`, false},
	{`{"id`, false},
	{"\f{}", false},
	{`[]`, false},
	{`"x"`, false},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","ignored":"a\\"}`, true},
	{`{"id":"o","at":"2026-11-20T10:00:00Z","ignored":"a\\\"b"}`, true},
	{"{\"id\":\"\xff\",\"at\":\"2026-11-20T10:00:00Z\"}", true}, // invalid UTF-8: the same reason
}

// TestFlatMatchesGeneral: on every seed the flat path gives the general path's reason,
// row and undeclared fields, and it takes the plain payloads itself.
func TestFlatMatchesGeneral(t *testing.T) {
	for _, s := range flatSeeds {
		if taken := parseBoth(t, []byte(s.payload)); taken != s.flat {
			t.Errorf("%s: taken by the flat path %v, want %v", s.payload, taken, s.flat)
		}
	}
	deep := func(n int) string {
		return `{"id":"o","at":"2026-11-20T10:00:00Z","ignored":` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}"
	}
	// The payload is depth 1: 299 arrays in it reach fastjson's 300, 300 exceed them.
	for n, want := range map[int]bool{298: true, 299: true, 300: false} {
		if taken := parseBoth(t, []byte(deep(n))); taken != want {
			t.Errorf("%d nested arrays: taken by the flat path %v, want %v", n, taken, want)
		}
	}
}

// FuzzFlatMatchesGeneral: the general path is the flat path's oracle on any payload.
func FuzzFlatMatchesGeneral(f *testing.F) {
	for _, s := range flatSeeds {
		f.Add([]byte(s.payload))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		parseBoth(t, payload)
	})
}

// TestPlainString compares plainString with a byte-by-byte reading of the same
// strings: every length to 40, with a quote, a backslash or a non-ASCII byte (or none)
// at every position, so that each falls in a whole word, across two, or in the tail.
func TestPlainString(t *testing.T) {
	naive := func(s string) (int, bool) {
		ascii := true
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '"':
				return i, ascii
			case '\\':
				return -1, false
			}
			ascii = ascii && s[i] < 0x80
		}
		return -1, false
	}
	for n := 1; n <= 40; n++ {
		for at := 1; at < n; at++ {
			for _, c := range []byte{'"', '\\', 0xc3, 'x'} {
				for _, closed := range []bool{false, true} {
					b := []byte(`"` + strings.Repeat("a", n-1))
					b[at] = c
					if closed {
						b = append(b, '"')
					}
					e, a := plainString(string(b))
					we, wa := naive(string(b))
					if e != we || a != wa {
						t.Fatalf("plainString(%q) = %d, %v; want %d, %v", b, e, a, we, wa)
					}
				}
			}
		}
	}
}
