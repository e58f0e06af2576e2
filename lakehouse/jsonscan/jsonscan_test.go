package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSkipValue(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	tooDeep := "[" + deep + "]"
	for _, tc := range []struct {
		doc  string
		i    int
		want int
	}{
		{`"a\"b",`, 0, 6},
		{`{"a":[1,{"b":"}"}]} x`, 0, 19},
		{`[1,2`, 0, -1},
		{`"open`, 0, -1},
		{`12.5e3}`, 0, 6},
		{`true`, 0, 4},
		{`,`, 0, -1},
		{``, 0, -1},
		{`x`, 5, -1},
		{`x`, -1, -1},
		{deep, 0, len(deep)},
		{tooDeep, 0, -1},
		{`  {}`, 2, 4},
	} {
		if got := SkipValue(tc.doc, tc.i); got != tc.want {
			t.Errorf("SkipValue(%.40q, %d) = %d, want %d", tc.doc, tc.i, got, tc.want)
		}
		if got := SkipValue([]byte(tc.doc), tc.i); got != tc.want {
			t.Errorf("SkipValue([]byte(%.40q), %d) = %d, want %d", tc.doc, tc.i, got, tc.want)
		}
	}
	if got := SkipString(`x"`, 0); got != -1 {
		t.Errorf("SkipString at a non-quote = %d", got)
	}
	if got := SkipWS(" \t\r\nx", 0); got != 4 {
		t.Errorf("SkipWS = %d", got)
	}
}

// depth is the deepest nesting of a valid JSON document (encoding/json's view).
func depth(doc []byte) int {
	dec := json.NewDecoder(bytes.NewReader(doc))
	d, max := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return max
		}
		if delim, ok := tok.(json.Delim); ok {
			if delim == '{' || delim == '[' {
				d++
				max = maxInt(max, d)
			} else {
				d--
			}
		}
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// FuzzSkipValue: on any input the scanner neither panics nor reads out of bounds, the
// string and []byte forms agree, and on a valid JSON document (not nested deeper than
// MaxDepth) SkipValue ends exactly where encoding/json's value ends.
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `["x\"]",{"b":[null]}]`, `"\\"`, ` 12 `, `{"a":"b"`, `[[[[`, `}`, `tru`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		i := SkipWS(doc, 0)
		end := SkipValue(doc, i)
		if end2 := SkipValue(string(doc), i); end2 != end {
			t.Fatalf("string form %d, []byte form %d", end2, end)
		}
		if end != -1 && (end <= i || end > len(doc)) {
			t.Fatalf("end %d outside (%d, %d]", end, i, len(doc))
		}
		if !json.Valid(doc) {
			return
		}
		if d := depth(doc); d > MaxDepth {
			if end != -1 {
				t.Fatalf("nesting %d > %d accepted", d, MaxDepth)
			}
			return
		}
		if end < 0 || SkipWS(doc, end) != len(doc) {
			t.Fatalf("valid document %.80q: value ends at %d, want the end (%d) after whitespace", doc, end, len(doc))
		}
	})
}
