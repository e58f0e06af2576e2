package silver

import (
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"goldbridge/lakehouse/jsonscan"
)

// The schema-directed path of parse (issue 41). A payload of an entity whose columns
// all read top-level fields is scanned once, left to right, without building
// fastjson's tree (which copies the payload, then allocates a value per field, then
// is searched key by key for each column): each key is matched against the column
// expected next (payloads of one source keep their field order), else looked up by
// name; the value of a column is kept as the span fastjson would give it, and skipped
// otherwise. It accepts only what it is sure of: a payload that is not valid JSON by
// fastjson's grammar, a key or a column's string with an escape, a column twice, a
// column holding an object or array, or an undeclared field the tally has not seen
// yet (it keeps the first value's text) all go to the general path, which gives them
// the reason (or value) they always had. Where it accepts, the row is the general path's, value for
// value (FuzzFlatMatchesGeneral). Measured side by side (docs/silver.md, "Parsing
// rules"): a parse worker 0.94 -> 0.56 µs a row (BenchmarkSilverParse, one core); a
// replay of 10M orders events 16.4-17.4 -> 14.5-15.5 s, of 2M taxi trips 5-15% faster.

// flatKind is the JSON kind of a column's value found by the flat scan.
type flatKind uint8

const (
	flatNull flatKind = iota + 1 // 0: not found
	flatString
	flatASCII // a string of ASCII bytes only: valid UTF-8 without a check
	flatNumber
	flatTrue
	flatFalse
)

// flatField is the value of column i found in the current payload (gen: which one).
type flatField struct {
	gen  uint32
	kind flatKind
	raw  string // a string's bytes (no escapes) or a number's text, inside the payload
}

// flatScanner is the state of the flat path, set up by newParser when every column
// reads a top-level field of its own.
type flatScanner struct {
	names  []string       // column i's field
	byName map[string]int // field -> column
	found  []flatField
	gen    uint32
	// The column order of the last payload: first, and after column i follow[i]
	// (initially the declared order). Payloads of one source keep their field order,
	// which need not be the declared one (a Parquet landing's payloads have their keys
	// sorted): the key expected next is compared before the name is looked up.
	first  int
	follow []int
	// The undeclared fields of the current payload that the tally has already seen
	// (their index in it), and the occurrences past its bound: counted when the
	// payload is the flat path's (noteFlat).
	seen  []int
	over  int64
	taken int64 // payloads the flat path took (tests)
}

func newFlatScanner(paths [][]string) *flatScanner {
	fs := &flatScanner{names: make([]string, len(paths)), byName: make(map[string]int, len(paths)), found: make([]flatField, len(paths)),
		follow: make([]int, len(paths))}
	for i, p := range paths {
		fs.follow[i] = i + 1
		if len(p) != 1 || strings.IndexByte(p[0], '\\') >= 0 {
			return nil
		}
		if _, dup := fs.byName[p[0]]; dup {
			return nil
		}
		fs.names[i], fs.byName[p[0]] = p[0], i
	}
	return fs
}

// parseFlat is parse's flat path: ok false sends the payload to the general path.
func (ps *parser) parseFlat(payload []byte, row []Value) (reason string, ok bool) {
	fs := ps.flat
	fs.gen++
	if fs.gen == 0 { // wrapped: stale generations could match
		clear(fs.found)
		fs.gen = 1
	}
	fs.seen, fs.over = fs.seen[:0], 0
	if !ps.scanFlat(unsafeString(payload)) {
		return "", false
	}
	fs.taken++
	ps.noteFlat()
	for i := range ps.cols {
		c, f := &ps.cols[i], &fs.found[i]
		if f.gen != fs.gen || f.kind == flatNull {
			if ps.hasDf[i] {
				row[i] = ps.defs[i]
				continue
			}
			if c.Required {
				return "missing_" + c.Name, true
			}
			row[i] = Value{Null: true}
			continue
		}
		if f.kind == flatASCII && c.Type.Kind == String { // most columns: no call, no copy of a Value
			row[i] = Value{S: ps.keep(f.raw)}
			continue
		}
		val, err := ps.convertRaw(c, f.kind, f.raw)
		if err != nil {
			return "invalid_" + c.Name + ": " + err.Error(), true
		}
		row[i] = val
	}
	return "", true
}

// scanFlat walks one payload object, recording the columns' values; false when the
// payload needs the general path (see above).
func (ps *parser) scanFlat(s string) bool {
	fs := ps.flat
	s = skipSpace(s)
	if len(s) == 0 || s[0] != '{' {
		return false
	}
	s = skipSpace(s[1:])
	if len(s) > 0 && s[0] == '}' {
		return skipSpace(s[1:]) == ""
	}
	next, prev := fs.first, -1 // the column expected next, the last one found
	for {
		if len(s) == 0 || s[0] != '"' {
			return false
		}
		end, _ := plainString(s)
		if end < 0 {
			return false
		}
		key := s[1:end]
		s = skipSpace(s[end+1:])
		if len(s) == 0 || s[0] != ':' {
			return false
		}
		s = skipSpace(s[1:])
		col := -1
		if next < len(fs.names) && fs.names[next] == key {
			col = next
		} else if i, ok := fs.byName[key]; ok {
			col = i
		} else if _, ok := ps.known[key]; !ok && ps.tally != nil && !ps.seenField(key) {
			return false // an undeclared field new to the tally: the general path keeps its first value
		}
		var ok bool
		if col >= 0 {
			f := &fs.found[col]
			if f.gen == fs.gen {
				return false // a column twice: fastjson's first wins, as the general path gives it
			}
			f.gen = fs.gen
			if s, ok = scanFlatValue(s, f); !ok {
				return false
			}
			if prev < 0 {
				fs.first = col
			} else {
				fs.follow[prev] = col
			}
			prev, next = col, fs.follow[col]
		} else if s, ok = skipJSONValue(s, 2); !ok { // the payload is depth 1
			return false
		}
		var done bool
		if s, done, ok = nextMember(s, '}'); !ok || done {
			return ok && skipSpace(s) == ""
		}
		s = skipSpace(s)
	}
}

// nextMember reads what follows a member of an object or array closed by closing: a
// comma (done false: rest is after it, the next member perhaps after spaces) or the
// closing byte (done true: rest is after it); ok false for anything else.
func nextMember(s string, closing byte) (rest string, done, ok bool) {
	s = skipSpace(s)
	if len(s) == 0 || s[0] != ',' && s[0] != closing {
		return s, false, false
	}
	return s[1:], s[0] == closing, true
}

// seenField notes an undeclared field of the current payload if the tally has seen it
// (or is full: then it is an occurrence past the bound); false when the tally would
// take it as new, which needs its first value as fastjson writes it.
func (ps *parser) seenField(key string) bool {
	t, fs := ps.tally, ps.flat
	if len(key) > maxFieldName {
		key = key[:maxFieldName]
	}
	if i, ok := t.idx[key]; ok {
		fs.seen = append(fs.seen, i)
		return true
	}
	if len(t.fields) >= MaxUndeclaredFields {
		fs.over++
		return true
	}
	return false
}

// noteFlat counts the undeclared fields a payload taken by the flat path has, as
// noteFields counts them: a field once a row, each occurrence past the bound.
func (ps *parser) noteFlat() {
	fs, t := ps.flat, ps.tally
	if len(fs.seen) == 0 && fs.over == 0 {
		return
	}
	t.seq++
	for _, i := range fs.seen {
		if t.last[i] != t.seq {
			t.fields[i].Rows++
			t.last[i] = t.seq
		}
	}
	t.overflow += fs.over
}

// scanFlatValue reads a column's scalar value at the start of s into f and returns
// the rest; false for an object, an array, a string with an escape, or bad JSON.
func scanFlatValue(s string, f *flatField) (string, bool) {
	if len(s) == 0 {
		return s, false
	}
	switch s[0] {
	case '"':
		end, ascii := plainString(s)
		if end < 0 {
			return s, false
		}
		f.kind, f.raw = flatString, s[1:end]
		if ascii {
			f.kind = flatASCII
		}
		return s[end+1:], true
	case '{', '[':
		return s, false
	case 't':
		f.kind = flatTrue
		return literal(s, "true")
	case 'f':
		f.kind = flatFalse
		return literal(s, "false")
	case 'n':
		f.kind = flatNull
		return literal(s, "null") // "nan" (a number to fastjson) goes to the general path
	}
	num, rest, ok := jsonNumber(s)
	f.kind, f.raw = flatNumber, num
	return rest, ok
}

// plainString is the index of the quote closing the string that opens s, or -1 when
// a backslash comes first (or none), and whether the string's bytes are all ASCII.
// Hand-written: two strings.IndexByte calls (the quote, then a backslash before it)
// and utf8.ValidString cost 2.8 s of CPU in a 10M-row Silver build, a byte loop 1.1 s;
// eight bytes a step (a word without a quote, a backslash or a high bit is skipped
// whole) less again.
func plainString(s string) (end int, ascii bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 1
	for ; i+8 <= len(s); i += 8 {
		w := load64(s, i)
		q, bs := w^(ones*'"'), w^(ones*'\\')
		if ((q-ones)&^q|(bs-ones)&^bs|w)&highs != 0 {
			break // the byte loop finds which
		}
	}
	var or byte
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			return i, or < utf8.RuneSelf
		case '\\':
			return -1, false
		}
		or |= s[i]
	}
	return -1, false
}

// load64 is the 8 bytes of s at i, little-endian (one load on amd64 and arm64).
func load64(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// skipJSONValue skips one value of fastjson's grammar at the start of s (depth: its
// nesting, at most fastjson.MaxDepth) and returns the rest.
func skipJSONValue(s string, depth int) (string, bool) {
	if len(s) == 0 || depth > fastjson.MaxDepth {
		return s, false
	}
	switch s[0] {
	case '{':
		return skipJSONContainer(s, '}', depth, true)
	case '[':
		return skipJSONContainer(s, ']', depth, false)
	case '"':
		return skipString(s)
	case 't':
		return literal(s, "true")
	case 'f':
		return literal(s, "false")
	case 'n':
		return literal(s, "null")
	}
	_, rest, ok := jsonNumber(s)
	return rest, ok
}

// skipJSONContainer skips an object (keyed) or array starting at s[0].
func skipJSONContainer(s string, closing byte, depth int, keyed bool) (string, bool) {
	s = skipSpace(s[1:])
	if len(s) > 0 && s[0] == closing {
		return s[1:], true
	}
	for {
		var ok bool
		if keyed {
			if len(s) == 0 || s[0] != '"' {
				return s, false
			}
			if s, ok = skipString(s); !ok {
				return s, false
			}
			s = skipSpace(s)
			if len(s) == 0 || s[0] != ':' {
				return s, false
			}
			s = skipSpace(s[1:])
		}
		if s, ok = skipJSONValue(s, depth+1); !ok {
			return s, false
		}
		var done bool
		if s, done, ok = nextMember(s, closing); !ok || done {
			return s, ok
		}
		s = skipSpace(s)
	}
}

// skipString skips the string that opens s (fastjson ends it, as jsonscan does, at a
// quote after an even run of backslashes).
func skipString(s string) (string, bool) {
	end := jsonscan.SkipString(s, 0)
	if end < 0 {
		return s, false
	}
	return s[end:], true
}

// jsonNumber is fastjson's number token at the start of s: a run of digits, signs,
// points and exponents, checked by whoever types it; anything else (inf, nan: kept
// for the general path) is not one.
func jsonNumber(s string) (num, rest string, ok bool) {
	for i := range len(s) {
		ch := s[i]
		if ch >= '0' && ch <= '9' || ch == '.' || ch == '-' || ch == 'e' || ch == 'E' || ch == '+' {
			continue
		}
		if i == 0 || i == 1 && (s[0] == '-' || s[0] == '+') {
			return "", s, false
		}
		return s[:i], s[i:], true
	}
	return s, "", true
}

func literal(s, lit string) (string, bool) {
	if !strings.HasPrefix(s, lit) {
		return s, false
	}
	return s[len(lit):], true
}

// skipSpace skips JSON whitespace, as fastjson does.
func skipSpace(s string) string { return s[jsonscan.SkipWS(s, 0):] }
