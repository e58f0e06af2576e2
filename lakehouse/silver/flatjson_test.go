package silver

import (
	"fmt"
	"math/rand/v2"
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
// each with a tally of undeclared fields, twice (the second time the tally has seen
// the payload's fields), and fails t where they differ; flatTaken: the flat path took
// the first.
func parseBoth(t *testing.T, payload []byte) (flatTaken bool) {
	t.Helper()
	cols := flatCols()
	var outs [2]struct {
		reason [2]string
		row    [2][]Value
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
		}
		for round := range 2 {
			outs[i].row[round] = make([]Value, len(cols))
			outs[i].reason[round] = ps.parse(payload, outs[i].row[round])
			if i == 0 && round == 0 {
				flatTaken = ps.flat.taken == 1
			}
		}
	}
	f, g := outs[0], outs[1]
	for round := range 2 {
		if f.reason[round] != g.reason[round] {
			t.Fatalf("%q: reason %q by the flat path, %q by the general one", payload, f.reason[round], g.reason[round])
		}
		if f.reason[round] == "" && !reflect.DeepEqual(f.row[round], g.row[round]) {
			t.Fatalf("%q: row\n%v by the flat path,\n%v by the general one", payload, f.row[round], g.row[round])
		}
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

// TestFlatTallyMatchesGeneral parses one stream of payloads with undeclared fields (120
// names, past the tally's bound of 100; some twice in a payload; some payloads bad) by
// a parser with the flat path and by one without: every reason and row, and the tally
// at the end, must be the same, and the flat path must take the payloads whose fields
// the tally has seen.
func TestFlatTallyMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cols := flatCols()
	var ps [2]*parser
	var tallies [2]fieldTally
	for i := range ps {
		p, err := newParser(cols)
		if err != nil {
			t.Fatal(err)
		}
		p.known["ignored"] = struct{}{}
		p.tally = &tallies[i]
		ps[i] = p
	}
	ps[1].flat = nil
	const n = 5000
	for j := range n {
		var b strings.Builder
		fmt.Fprintf(&b, `{"id":"o%d","at":"2026-11-20T10:00:00Z"`, j)
		for range rng.IntN(4) {
			name := fmt.Sprintf("u%d", rng.IntN(min(120, 1+j/20))) // new names come slowly
			fmt.Fprintf(&b, `,%q:%s`, name, []string{`1`, `"x"`, `[1,{"a":null}]`, `{ "b" : 2 }`, `tru`}[rng.IntN(5)])
		}
		if rng.IntN(3) == 0 {
			b.WriteString(`,"ignored":"y"`)
		}
		b.WriteString("}")
		payload := []byte(b.String())
		var reasons [2]string
		var rows [2][]Value
		for i, p := range ps {
			rows[i] = make([]Value, len(cols))
			reasons[i] = p.parse(payload, rows[i])
		}
		if reasons[0] != reasons[1] || reasons[0] == "" && !reflect.DeepEqual(rows[0], rows[1]) {
			t.Fatalf("%s: %q %v by the flat path, %q %v by the general one", payload, reasons[0], rows[0], reasons[1], rows[1])
		}
	}
	if !reflect.DeepEqual(tallies[0].fields, tallies[1].fields) || tallies[0].overflow != tallies[1].overflow {
		t.Fatalf("tally by the flat path %v (+%d past the bound), by the general one %v (+%d)",
			tallies[0].fields, tallies[0].overflow, tallies[1].fields, tallies[1].overflow)
	}
	if tallies[0].overflow == 0 || len(tallies[0].fields) != MaxUndeclaredFields {
		t.Errorf("the stream did not reach the bound: %d fields, %d past it", len(tallies[0].fields), tallies[0].overflow)
	}
	if taken := ps[0].flat.taken; taken < n/2 {
		t.Errorf("the flat path took %d of %d payloads", taken, n)
	}
}
