package silver

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// column holds one typed column of the winners in compact per-kind slices (far smaller
// than a []Value per row for millions of keys).
//
// The string Values given to append and set may point into memory the caller reuses
// (the parser's arena, an Arrow buffer): the column stores its own copy, shared by
// equal values while the column has few distinct ones (country, status, op...).
type column struct {
	kind   Kind
	nulls  seq[bool]
	s      seq[string]
	i      seq[int64]
	f      seq[float64]
	d      seq[decimal128.Num]
	b      seq[bool]
	intern map[string]string // nil: not (or no longer) interning
	noInt  bool              // gave up interning: too many distinct values
}

// internMax is the number of distinct values up to which a string column shares one
// copy per value; a column with more stops interning (its values are mostly distinct).
const internMax = 4096

// own returns a copy of s that the column may keep.
func (c *column) own(s string) string {
	if len(s) == 0 {
		return ""
	}
	if c.noInt {
		return strings.Clone(s)
	}
	if v, ok := c.intern[s]; ok {
		return v
	}
	v := strings.Clone(s)
	if c.intern == nil {
		c.intern = make(map[string]string, 64)
	}
	if len(c.intern) >= internMax {
		c.intern, c.noInt = nil, true
		return v
	}
	c.intern[v] = v
	return v
}

func (c *column) append(v Value) {
	c.nulls.append(v.Null)
	switch c.kind {
	case String:
		c.s.append(c.own(v.S))
	case Int32, Int64, Date, Timestamp:
		c.i.append(v.I)
	case Float64:
		c.f.append(v.F)
	case Decimal:
		c.d.append(v.D)
	case Bool:
		c.b.append(v.B)
	}
}

func (c *column) set(slot int, v Value) {
	*c.nulls.at(slot) = v.Null
	switch c.kind {
	case String:
		if p := c.s.at(slot); *p != v.S { // the same value (a typical update): keep the copy held
			*p = c.own(v.S)
		}
	case Int32, Int64, Date, Timestamp:
		*c.i.at(slot) = v.I
	case Float64:
		*c.f.at(slot) = v.F
	case Decimal:
		*c.d.at(slot) = v.D
	case Bool:
		*c.b.at(slot) = v.B
	}
}

// get returns the value at slot.
func (c *column) get(slot int) Value {
	if *c.nulls.at(slot) {
		return Value{Null: true}
	}
	switch c.kind {
	case String:
		return Value{S: *c.s.at(slot)}
	case Int32, Int64, Date, Timestamp:
		return Value{I: *c.i.at(slot)}
	case Float64:
		return Value{F: *c.f.at(slot)}
	case Decimal:
		return Value{D: *c.d.at(slot)}
	case Bool:
		return Value{B: *c.b.at(slot)}
	}
	return Value{Null: true}
}

// appendTo appends the value at slot to an Arrow builder of the matching type.
func (c *column) appendTo(b array.Builder, slot int) {
	if *c.nulls.at(slot) {
		b.AppendNull()
		return
	}
	switch c.kind {
	case String:
		b.(*array.StringBuilder).Append(*c.s.at(slot))
	case Int32:
		b.(*array.Int32Builder).Append(int32(*c.i.at(slot)))
	case Int64:
		b.(*array.Int64Builder).Append(*c.i.at(slot))
	case Date:
		b.(*array.Date32Builder).Append(arrow.Date32(*c.i.at(slot)))
	case Timestamp:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(*c.i.at(slot)))
	case Float64:
		b.(*array.Float64Builder).Append(*c.f.at(slot))
	case Decimal:
		b.(*array.Decimal128Builder).Append(*c.d.at(slot))
	case Bool:
		b.(*array.BooleanBuilder).Append(*c.b.at(slot))
	}
}

// version orders the versions of one key: newer updated_at wins, then the op rank
// d > u > c > r, then the payload hash (a deterministic tiebreak; equal means the same
// payload delivered twice).
type version struct {
	ua   int64
	rank int8
	hash uint64
}

func (v version) cmp(o version) int {
	switch {
	case v.ua != o.ua:
		return cmp64(v.ua, o.ua)
	case v.rank != o.rank:
		return cmp64(int64(v.rank), int64(o.rank))
	case v.hash != o.hash:
		if v.hash < o.hash {
			return -1
		}
		return 1
	}
	return 0
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// opRank ranks canonical CDC ops for ties on updated_at.
func opRank(op byte) int8 {
	switch op {
	case 'd':
		return 4
	case 'u':
		return 3
	case 'c':
		return 2
	case 'r':
		return 1
	}
	return 0
}

// arrival orders the deliveries of one Bronze row: by _ingest_ts (one value per ingest
// batch, so later batches come later), then the payload hash, then the Bronze _event_id.
// It depends only on Bronze's content, not on the order a scan returns rows in, so an
// incremental history and a replay pick the same row.
type arrival struct {
	ts   int64
	hash uint64
	id   string
}

func (a arrival) before(o arrival) bool {
	switch {
	case a.ts != o.ts:
		return a.ts < o.ts
	case a.hash != o.hash:
		return a.hash < o.hash
	}
	return a.id < o.id
}

// winners is the row kept per key in a run: in upsert mode the newest version (equal
// versions: the earliest arrival), in append mode the earliest arrival.
type winners struct {
	cols      []column
	slots     map[string]int32
	keys      []string
	ver       seq[version]
	op        []byte
	eventID   seq[eventID]
	otherIDs  []string   // event ids that are not canonical UUIDs (see eventID)
	ts        seq[int64] // Bronze _ingest_ts (µs)
	fate      []fate
	firstWins bool // append mode
	keyCol    int  // the column that is the whole key when it is one string column, else -1
}

type fate uint8

const (
	fateInsert fate = iota
	fateUpdate
	fateSame  // equal to the stored version: a re-delivery
	fateOlder // older than the stored version: a late event
)

// In append mode fateInsert means "append" and fateSame "already in Silver".

func newWinners(cols []ColumnSpec) *winners {
	w := &winners{cols: make([]column, len(cols)), slots: map[string]int32{}, keyCol: -1}
	for i, c := range cols {
		w.cols[i].kind = c.Type.Kind
	}
	return w
}

// offer keeps row as the key's row if it beats the one held (see winners). key, the
// row's strings and eventID are only read during the call: what is kept is copied.
func (w *winners) offer(key string, row []Value, v version, op byte, eventID string, ts int64) {
	slot, ok := w.slots[key]
	if !ok {
		key = strings.Clone(key)
		w.slots[key] = int32(len(w.keys))
		w.keys = append(w.keys, key)
		for i := range w.cols {
			if i == w.keyCol {
				w.cols[i].nulls.append(false)
				w.cols[i].s.append(key) // the key is the column's value: one copy
				continue
			}
			w.cols[i].append(row[i])
		}
		w.ver.append(v)
		w.op = append(w.op, op)
		w.eventID.append(w.packID(eventID))
		w.ts.append(ts)
		w.fate = append(w.fate, fateInsert)
		return
	}
	s := int(slot)
	held := w.ver.at(s)
	hts := *w.ts.at(s)
	var (
		buf    [36]byte
		heldID string // only read on a tie of the rest
	)
	if ts == hts && v.hash == held.hash {
		heldID = unsafeString(w.appendEventID(buf[:0], s))
	}
	earlier := arrival{ts, v.hash, eventID}.before(arrival{hts, held.hash, heldID})
	if w.firstWins {
		if !earlier {
			return
		}
	} else if c := v.cmp(*held); c < 0 || c == 0 && !earlier {
		return
	}
	for i := range w.cols {
		w.cols[i].set(s, row[i])
	}
	*held, w.op[slot], *w.eventID.at(s), *w.ts.at(s) = v, op, w.packID(eventID), ts
}

// eventID holds a Bronze _event_id compactly: the 16 bytes of a canonical (lowercase,
// hyphenated) UUID, which is what Bronze writes, or else an index into otherIDs.
type eventID struct {
	uuid  [16]byte
	other int32 // 1 + index into otherIDs; 0: uuid holds the id
}

func (w *winners) packID(id string) eventID {
	if u, ok := parseCanonicalUUID(id); ok {
		return eventID{uuid: u}
	}
	w.otherIDs = append(w.otherIDs, strings.Clone(id))
	return eventID{other: int32(len(w.otherIDs))}
}

// appendEventID appends the _event_id of slot as it was read from Bronze.
func (w *winners) appendEventID(b []byte, slot int) []byte {
	id := w.eventID.at(slot)
	if id.other > 0 {
		return append(b, w.otherIDs[id.other-1]...)
	}
	for i, c := range id.uuid {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

const hexDigits = "0123456789abcdef"

// parseCanonicalUUID parses xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in lowercase hex only,
// so that formatting the bytes back gives the same string.
func parseCanonicalUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[j] = hi<<4 | lo
		j++
		i += 2
	}
	return u, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// keySet is the set of distinct keys a run read for an append entity's keys table.
type keySet struct {
	slots map[string]int32
	cols  []column // the key columns
	fresh []bool   // not in the keys table: to append
	pre   []bool   // read from a range Silver had already processed (so it is in Silver)
}

func newKeySet(keyCols []ColumnSpec) *keySet {
	k := &keySet{slots: map[string]int32{}, cols: make([]column, len(keyCols))}
	for i, c := range keyCols {
		k.cols[i].kind = c.Type.Kind
	}
	return k
}

// add records key (only read during the call, like row) if it is new.
func (k *keySet) add(key string, row []Value, keyIdx []int, pre bool) {
	if _, ok := k.slots[key]; ok {
		return
	}
	key = strings.Clone(key)
	k.slots[key] = int32(len(k.fresh))
	for i, ki := range keyIdx {
		k.cols[i].append(row[ki])
	}
	k.fresh = append(k.fresh, true)
	k.pre = append(k.pre, pre)
}

// seq is an append-only sequence stored in fixed-size chunks: growing it never copies
// what it holds (a slice of millions of winners would be copied at every doubling).
type seq[T any] struct {
	chunks [][]T
	n      int
}

const (
	seqShift = 14
	seqChunk = 1 << seqShift
)

func (q *seq[T]) append(v T) {
	if q.n&(seqChunk-1) == 0 {
		q.chunks = append(q.chunks, make([]T, 0, seqChunk))
	}
	last := &q.chunks[len(q.chunks)-1]
	*last = append(*last, v)
	q.n++
}

// at returns the element i (< len).
func (q *seq[T]) at(i int) *T { return &q.chunks[i>>seqShift][i&(seqChunk-1)] }

func (q *seq[T]) len() int { return q.n }
