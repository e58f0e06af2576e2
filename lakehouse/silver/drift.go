package silver

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Undeclared fields (schema drift, issue 42; docs/silver.md, "Undeclared fields").
//
// A payload field is undeclared when it is a top-level field of the payload (of the row
// image, for a Debezium event) that no declared column's path starts with. Rules read
// columns only, so a field a rule reads is a declared column's. A field nested under a
// declared path's first segment (customer.email beside a column $.customer.id) is not
// reported: the object is the entity's, and which of its members it reads is the spec's
// business; only new top-level fields are drift. The fields Debezium adds to a flattened
// event (add.fields: __op, __lsn, __source_ts_ms, ...; __deleted) are not the row's and
// are never reported; neither is the envelope around the row image.
//
// The parse workers tally each chunk's undeclared fields (a map lookup per top-level
// field of a payload); the accounting goroutine adds the chunks up in scan order, so the
// first value of a field is the one of the first row that carries it, and the report is
// the same whatever the worker count.

// MaxUndeclaredFields bounds the distinct undeclared names a run reports: the first ones
// in scan order (and in each chunk); the occurrences of any other name are counted in
// Quality.UndeclaredOverflow.
const MaxUndeclaredFields = 100

// Bounds of what is kept of one undeclared field.
const (
	maxFieldName  = 128 // bytes of its name; a longer name is clipped (names alike in them are one)
	maxFirstValue = 64  // bytes of its first value's JSON text
)

// UndeclaredField is one undeclared top-level payload field of a run.
type UndeclaredField struct {
	Field string `json:"field"` // its name, clipped to 128 bytes ("…" marks a clipped one)
	Rows  int64  `json:"rows"`  // Bronze rows carrying it (quarantined ones included)
	First string `json:"first"` // the JSON text of its value in the first of them, clipped to 64 bytes
}

// fieldTally counts undeclared fields, bounded by MaxUndeclaredFields names.
type fieldTally struct {
	idx      map[string]int // clipped name -> index into fields
	fields   []UndeclaredField
	keys     []string // per field: its clipped name, the key of idx
	last     []int64  // per field: the row that counted it last (a key twice in a row counts once)
	seq      int64    // rows seen
	overflow int64    // occurrences of names beyond the bound
	scratch  []byte
}

func (t *fieldTally) reset() {
	clear(t.idx)
	t.fields, t.keys, t.last = t.fields[:0], t.keys[:0], t.last[:0]
	t.seq, t.overflow = 0, 0
}

// knownFields are the top-level names the columns' paths start with, and which paths
// are the first one of their name that is the top-level field alone.
func knownFields(paths [][]string) (map[string]struct{}, []bool) {
	known := make(map[string]struct{}, len(paths))
	top := make([]bool, len(paths))
	alone := map[string]bool{}
	for i, p := range paths {
		known[p[0]] = struct{}{}
		if len(p) == 1 && !alone[p[0]] {
			top[i], alone[p[0]] = true, true
		}
	}
	return known, top
}

// noteFields tallies the top-level fields of one payload object that the columns do
// not read (skipping "__" names with skipMeta: a flattened Debezium event's metadata).
// present is the number of distinct fields the columns found alone (-1: unknown): when
// the object has no more fields than that, it has no other, and nothing is looked up.
func (ps *parser) noteFields(o *fastjson.Object, present int, skipMeta bool) {
	if o.Len() == present {
		return
	}
	t := ps.tally
	t.seq++
	o.Visit(func(k []byte, v *fastjson.Value) {
		if _, ok := ps.known[string(k)]; ok || skipMeta && bytes.HasPrefix(k, []byte("__")) {
			return
		}
		t.add(k, v)
	})
}

// add counts field k of the current row, keeping its first value.
func (t *fieldTally) add(k []byte, v *fastjson.Value) {
	clipped := len(k) > maxFieldName
	if clipped {
		k = k[:maxFieldName]
	}
	if i, ok := t.idx[string(k)]; ok {
		if t.last[i] != t.seq {
			t.fields[i].Rows++
			t.last[i] = t.seq
		}
		return
	}
	if len(t.fields) >= MaxUndeclaredFields {
		t.overflow++
		return
	}
	t.scratch = v.MarshalTo(t.scratch[:0])
	t.put(string(k), UndeclaredField{Field: fieldName(k, clipped), Rows: 1, First: clipText(t.scratch, maxFirstValue)})
}

// put adds a field new to t under key.
func (t *fieldTally) put(key string, f UndeclaredField) {
	if t.idx == nil {
		t.idx = map[string]int{}
	}
	t.idx[key] = len(t.fields)
	t.fields = append(t.fields, f)
	t.keys = append(t.keys, key)
	t.last = append(t.last, t.seq)
}

// absorb adds the tally of a later chunk (in scan order) to t.
func (t *fieldTally) absorb(c *fieldTally) {
	t.overflow += c.overflow
	for j, f := range c.fields {
		if i, ok := t.idx[c.keys[j]]; ok {
			t.fields[i].Rows += f.Rows
		} else if len(t.fields) < MaxUndeclaredFields {
			t.put(c.keys[j], f)
		} else {
			t.overflow += f.Rows
		}
	}
}

// fieldName is how a (clipped) name is reported: valid UTF-8, "…" when clipped, and
// `""` for the empty name.
func fieldName(k []byte, clipped bool) string {
	if len(k) == 0 {
		return `""`
	}
	s := strings.ToValidUTF8(string(k), "\uFFFD")
	if clipped {
		s += "…"
	}
	return s
}

// clipText is b as valid UTF-8, at most n bytes of it ("…" marks a clipped one).
func clipText(b []byte, n int) string {
	if len(b) <= n {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	b = b[:n]
	for len(b) > 0 && !utf8.Valid(b) && len(b) > n-utf8.UTFMax {
		b = b[:len(b)-1]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD") + "…"
}

// undeclaredDetail describes the undeclared fields for a line or an error: the first
// ten with their rows, then how many more.
func (q Quality) undeclaredDetail() string {
	var parts []string
	for i, f := range q.Undeclared {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(q.Undeclared)-10))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d rows, first %s)", f.Field, f.Rows, f.First))
	}
	if q.UndeclaredOverflow > 0 {
		parts = append(parts, fmt.Sprintf("%d occurrences of fields beyond the first %d names", q.UndeclaredOverflow, MaxUndeclaredFields))
	}
	return fmt.Sprintf("%d top-level fields the spec does not read: %s", len(q.Undeclared), strings.Join(parts, ", "))
}

// hasUndeclared reports whether the run saw undeclared fields.
func (q Quality) hasUndeclared() bool { return len(q.Undeclared) > 0 || q.UndeclaredOverflow > 0 }
