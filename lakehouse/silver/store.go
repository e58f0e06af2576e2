package silver

import (
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// column holds one typed column of the winners in compact per-kind slices (far smaller
// than a []Value per row for millions of keys, and free of pointers, so the garbage
// collector never scans them).
//
// A string column stores one uint64 per row: while the column has few distinct values
// (country, status, op...) a code into its dictionary, afterwards a reference into its
// byte arena. The string Values given to append and set may point into memory the
// caller reuses (the parser's arena, an Arrow buffer): the column keeps its own copy.
type column struct {
	kind  Kind
	nulls seq[bool]
	s     seq[uint64] // String: dictionary code or arena reference
	i     seq[int64]
	f     seq[float64]
	d     seq[decimal128.Num]
	b     seq[bool]

	dict    []string          // coded: the distinct values
	dictIdx map[string]uint32 // coded: value -> code
	arena   arena             // after the dictionary outgrew internMax
	spilled bool              // s holds arena references
}

// internMax is the number of distinct values up to which a string column stores codes;
// a column with more stores its values in the arena (they are mostly distinct).
const internMax = 4096

// own returns the reference the column stores for s.
func (c *column) own(s string) uint64 {
	if c.spilled {
		return c.arena.add(s)
	}
	if code, ok := c.dictIdx[s]; ok {
		return uint64(code)
	}
	if len(c.dict) < internMax {
		if c.dictIdx == nil {
			c.dictIdx = make(map[string]uint32, 64)
		}
		v := strings.Clone(s)
		c.dictIdx[v] = uint32(len(c.dict))
		c.dict = append(c.dict, v)
		return uint64(len(c.dict) - 1)
	}
	// Too many distinct values: move every dictionary value into the arena once and
	// turn the codes held into references.
	refs := make([]uint64, len(c.dict))
	for i, v := range c.dict {
		refs[i] = c.arena.add(v)
	}
	for _, ch := range c.s.chunks {
		for i := range ch {
			ch[i] = refs[ch[i]]
		}
	}
	c.dict, c.dictIdx, c.spilled = nil, nil, true
	return c.arena.add(s)
}

// str returns the string a reference stands for.
func (c *column) str(ref uint64) string {
	if c.spilled {
		return c.arena.get(ref)
	}
	return c.dict[ref]
}

func (c *column) append(v Value) {
	c.nulls.append(v.Null)
	switch c.kind {
	case String:
		var ref uint64
		if !v.Null {
			ref = c.own(v.S)
		}
		c.s.append(ref)
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
	wasNull := *c.nulls.at(slot)
	*c.nulls.at(slot) = v.Null
	switch c.kind {
	case String:
		if v.Null {
			return
		}
		// The same value (a typical update): keep the copy held.
		if p := c.s.at(slot); wasNull || c.str(*p) != v.S {
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

// get returns the value at slot; a string points into the column's storage.
func (c *column) get(slot int) Value {
	if *c.nulls.at(slot) {
		return Value{Null: true}
	}
	switch c.kind {
	case String:
		return Value{S: c.str(*c.s.at(slot))}
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
		b.(*array.StringBuilder).Append(c.str(*c.s.at(slot)))
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

// arena stores strings back to back in fixed chunks that never move, so a string read
// from it stays valid for the arena's life. A reference packs chunk (24 bits), offset
// (22 bits) and length (18 bits); longer strings go to a side list.
type arena struct {
	chunks [][]byte
	long   []string
}

const (
	arenaChunk   = 1 << 22
	arenaLenBits = 18
	arenaLong    = 1<<arenaLenBits - 1 // length field of a reference into long
)

func (a *arena) add(s string) uint64 {
	if len(s) == 0 {
		return 0
	}
	if len(s) >= arenaLong {
		a.long = append(a.long, strings.Clone(s))
		return uint64(len(a.long)-1)<<arenaLenBits | arenaLong
	}
	n := len(a.chunks)
	if n == 0 || len(a.chunks[n-1])+len(s) > arenaChunk {
		a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
		n++
	}
	ch := &a.chunks[n-1]
	off := len(*ch)
	*ch = append(*ch, s...)
	return uint64(n-1)<<40 | uint64(off)<<arenaLenBits | uint64(len(s))
}

func (a *arena) get(ref uint64) string {
	l := int(ref & arenaLong)
	switch l {
	case 0:
		return ""
	case arenaLong:
		return a.long[ref>>arenaLenBits]
	}
	off := int(ref>>arenaLenBits) & (arenaChunk - 1)
	return unsafe.String(&a.chunks[ref>>40][off], l)
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
// versions: the earliest arrival), in append mode the earliest arrival. A run holds
// several, each owning the keys of one hash shard, merged on their own goroutines.
type winners struct {
	cols      []column
	index     keyIndex
	keys      arena
	keyRef    seq[uint64]
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
	w := &winners{cols: make([]column, len(cols)), index: keyIndex{m: map[uint64]int32{}}, keyCol: -1}
	for i, c := range cols {
		w.cols[i].kind = c.Type.Kind
	}
	return w
}

// len is the number of keys held.
func (w *winners) len() int { return len(w.fate) }

// key returns the rendered business key of slot (valid for the winners' life).
func (w *winners) key(slot int) string { return w.keys.get(*w.keyRef.at(slot)) }

// lookup returns the slot of key, whose hash is h.
func (w *winners) lookup(h uint64, key string) (int, bool) {
	s, ok := w.index.m[h]
	if !ok {
		return 0, false
	}
	if w.key(int(s)) == key {
		return int(s), true
	}
	s, ok = w.index.coll[key]
	return int(s), ok
}

// get returns column i of slot; strings point into the winners' storage.
func (w *winners) get(i, slot int) Value {
	if i == w.keyCol {
		return Value{S: w.key(slot)}
	}
	return w.cols[i].get(slot)
}

// appendTo appends column i of slot to an Arrow builder of the column's type.
func (w *winners) appendTo(i int, b array.Builder, slot int) {
	if i == w.keyCol {
		b.(*array.StringBuilder).Append(w.key(slot))
		return
	}
	w.cols[i].appendTo(b, slot)
}

// keyIndex maps a key's 64-bit hash to its slot. Keys whose hash another key already
// has (about one pair in 10^7 among millions of keys) are looked up by value in coll.
type keyIndex struct {
	m    map[uint64]int32
	coll map[string]int32
}

// offer keeps row as the key's row if it beats the one held (see winners). key, whose
// hash is h, the row's strings and eventID are only read during the call: what is
// kept is copied.
func (w *winners) offer(h uint64, key string, row []Value, v version, op byte, eventID string, ts int64) {
	s, ok := w.lookup(h, key)
	if !ok {
		slot := int32(len(w.fate))
		ref := w.keys.add(key)
		if _, taken := w.index.m[h]; taken {
			if w.index.coll == nil {
				w.index.coll = map[string]int32{}
			}
			w.index.coll[w.keys.get(ref)] = slot
		} else {
			w.index.m[h] = slot
		}
		w.keyRef.append(ref)
		for i := range w.cols {
			if i == w.keyCol {
				continue // the key is the column's value: see get
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
		if i != w.keyCol {
			w.cols[i].set(s, row[i])
		}
	}
	*held, w.op[s], *w.eventID.at(s), *w.ts.at(s) = v, op, w.packID(eventID), ts
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
