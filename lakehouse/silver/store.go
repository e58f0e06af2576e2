package silver

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/zeebo/xxh3"
)

// column holds one typed column of the keys table (append mode) in compact per-kind
// slices, free of pointers, so the garbage collector never scans them.
type column struct {
	kind  Kind
	nulls seq[bool]
	s     seq[uint64] // String: a strStore reference
	i     seq[int64]
	f     seq[float64]
	d     seq[decimal128.Num]
	b     seq[bool]
	strs  strStore
}

// own returns the reference the column stores for s.
func (c *column) own(s string) uint64 {
	ref, remap := c.strs.own(s)
	if remap != nil {
		for _, ch := range c.s.chunks {
			for i := range ch {
				ch[i] = remap[ch[i]]
			}
		}
	}
	return ref
}

// str returns the string a reference stands for.
func (c *column) str(ref uint64) string { return c.strs.str(ref) }

// strStore keeps the strings of one column for millions of rows without pointers: while
// the column has few distinct values (country, status, op...) a row holds a code into
// a dictionary, afterwards a reference into a byte arena. The strings given to own may
// point into memory the caller reuses (the parser's arena, an Arrow buffer): the store
// keeps its own copy.
type strStore struct {
	dict    []string          // coded: the distinct values
	dictIdx map[string]uint32 // coded: value -> code
	arena   arena             // after the dictionary outgrew internMax
	spilled bool              // references are arena references
}

// internMax is the number of distinct values up to which a string column stores codes;
// a column with more stores its values in the arena (they are mostly distinct).
const internMax = 4096

// own returns the reference to store for s. When the dictionary overflows, remap is
// not nil: the caller must replace every code it holds by remap[code].
func (st *strStore) own(s string) (ref uint64, remap []uint64) {
	if st.spilled {
		return st.arena.add(s), nil
	}
	if code, ok := st.dictIdx[s]; ok {
		return uint64(code), nil
	}
	if len(st.dict) < internMax {
		if st.dictIdx == nil {
			st.dictIdx = make(map[string]uint32, 64)
		}
		v := strings.Clone(s)
		st.dictIdx[v] = uint32(len(st.dict))
		st.dict = append(st.dict, v)
		return uint64(len(st.dict) - 1), nil
	}
	// Too many distinct values: every dictionary value moves into the arena once.
	remap = make([]uint64, len(st.dict))
	for i, v := range st.dict {
		remap[i] = st.arena.add(v)
	}
	st.dict, st.dictIdx, st.spilled = nil, nil, true
	return st.arena.add(s), remap
}

// str returns the string a reference stands for.
func (st *strStore) str(ref uint64) string {
	if st.spilled {
		return st.arena.get(ref)
	}
	return st.dict[ref]
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
// payload delivered twice). A Debezium entity ordered by the source position has the
// position's high word in ua and its low word in seq (0 for every other entity), and
// the hash of the key and the position in hash (debezium.go).
type version struct {
	ua   int64
	seq  uint64
	rank int8
	hash uint64
}

func (v version) cmp(o version) int {
	switch {
	case v.ua != o.ua:
		return cmp64(v.ua, o.ua)
	case v.seq != o.seq:
		if v.seq < o.seq {
			return -1
		}
		return 1
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
//
// Each key's row is one fixed-size record of 64-bit words (null bits, one word per
// value, two per decimal, then the version, arrival and event id), so merging an update
// touches a cache line or three rather than two per column. Strings are references
// into per-column strStores. Nothing here holds a pointer per key.
type winners struct {
	kinds    []Kind
	strs     []strStore // per column (String columns)
	off      []int      // word of each column's value in a record
	stride   int        // words per record
	meta     int        // word of the first meta field (see the meta* offsets)
	chunks   [][]uint64 // records, recordsPerChunk per chunk
	index    keyIndex
	keys     arena
	otherIDs []string // event ids that are not canonical UUIDs (see packID)
	fate     []fate
	hashes   []uint64 // upsert: the payload hash of every row offered (for the duplicate count)
	offered  int64    // the rows offered

	firstWins bool // append mode
	keyCol    int  // the column that is the whole key when it is one string column, else -1

	toast *toastState // a Debezium entity's: the columns a version does not carry (debezium_toast.go)

	held atomic.Int64 // heldBytes after the last batch the shard offered (read by the accounting)

	warmSink uint64 // what warm loaded, kept so that its loads are not optimized away
}

// Meta fields of a record, after the values.
const (
	metaUA    = iota // version: updated_at
	metaSeq          // version: the position's low word (Debezium), else 0
	metaHash         // version: payload hash; arrival: payload hash
	metaTS           // arrival: Bronze _ingest_ts (µs)
	metaID0          // event id: UUID bytes 0-7
	metaID1          // event id: UUID bytes 8-15
	metaMisc         // version rank (bits 0-7), op (8-15), 1 + index into otherIDs (32-63; 0: the UUID words hold the id)
	metaKey          // the key's reference into keys
	metaKeyHi        // the high 64 bits of the key's hash (the index holds the low 64)
	metaWords
)

const (
	recordShift     = 12
	recordsPerChunk = 1 << recordShift
)

type fate uint8

const (
	fateInsert fate = iota
	fateUpdate
	fateSame  // equal to the stored version: a re-delivery
	fateOlder // older than the stored version: a late event
)

// In append mode fateInsert means "append" and fateSame "already in Silver".

func newWinners(cols []ColumnSpec) *winners {
	w := &winners{keyCol: -1, strs: make([]strStore, len(cols))}
	nullWords := (len(cols) + 63) / 64
	next := nullWords
	for _, c := range cols {
		w.kinds = append(w.kinds, c.Type.Kind)
		w.off = append(w.off, next)
		next++
		if c.Type.Kind == Decimal {
			next++
		}
	}
	w.meta = next
	w.stride = next + metaWords
	return w
}

// record returns slot's record.
func (w *winners) record(slot int) []uint64 {
	i := (slot & (recordsPerChunk - 1)) * w.stride
	return w.chunks[slot>>recordShift][i : i+w.stride : i+w.stride]
}

// len is the number of keys held.
func (w *winners) len() int { return len(w.fate) }

// key returns the rendered business key of slot (valid for the winners' life).
func (w *winners) key(slot int) string { return w.keys.get(w.record(slot)[w.meta+metaKey]) }

// version returns the version held for slot.
func (w *winners) version(slot int) version {
	m := w.record(slot)[w.meta:]
	return version{ua: int64(m[metaUA]), seq: m[metaSeq], rank: int8(m[metaMisc]), hash: m[metaHash]}
}

// op returns the canonical op held for slot.
func (w *winners) op(slot int) byte { return byte(w.record(slot)[w.meta+metaMisc] >> 8) }

// distinctPayloads sorts the payload hashes and returns how many differ. Equal payloads
// have equal keys, so they are in the same shard.
func (w *winners) distinctPayloads() int64 {
	slices.Sort(w.hashes)
	return int64(len(slices.Compact(w.hashes)))
}

// warm loads, for each row of c that shard s takes, the index entry of its key and the
// record that entry names (each of its cache lines), so that offer finds them in the
// cache. With millions of keys both are cache misses, which offer, a few hundred
// instructions a row, takes one at a time; these loops are short, so the CPU keeps many
// of their loads in flight at once. The chunk's entries and records (~1k of each a
// shard) fit in the L2 cache. Profiles of a 10M-event replay: lookup 3.1 -> 1.2 s of
// CPU and hold 3.1 -> 2.5 s, for 0.9 s in warm.
func (w *winners) warm(c *chunk, s int) {
	tab := w.index.tab
	if len(tab) == 0 {
		return
	}
	mask := uint64(len(tab) - 1)
	var sink uint64
	for j := range c.n {
		if int(c.shard[j]) == s {
			sink += tab[c.kh[j].Lo&mask][1]
		}
	}
	for j := range c.n {
		if int(c.shard[j]) != s {
			continue
		}
		if e := tab[c.kh[j].Lo&mask]; e[1] != 0 && e[0] == c.kh[j].Lo {
			r := w.record(int(e[1] - 1))
			for k := 0; k < len(r); k += 8 { // each cache line of it: offer may update any
				sink += r[k]
			}
			sink += r[len(r)-1]
		}
	}
	w.warmSink = sink
}

// lookup returns the slot of the key whose hash (keyHash) is h.
func (w *winners) lookup(h xxh3.Uint128) (int, bool) {
	s, ok := w.index.get(h.Lo)
	if !ok {
		return 0, false
	}
	if w.record(s)[w.meta+metaKeyHi] == h.Hi {
		return s, true
	}
	c, ok := w.index.coll[h]
	return int(c), ok
}

// get returns column i of slot; strings point into the winners' storage.
func (w *winners) get(i, slot int) Value {
	if i == w.keyCol {
		return Value{S: w.key(slot)}
	}
	r := w.record(slot)
	if r[i>>6]&(1<<(i&63)) != 0 {
		return Value{Null: true}
	}
	x := r[w.off[i]]
	switch w.kinds[i] {
	case String:
		return Value{S: w.strs[i].str(x)}
	case Float64:
		return Value{F: math.Float64frombits(x)}
	case Decimal:
		return Value{D: decimal128.New(int64(r[w.off[i]+1]), x)}
	case Bool:
		return Value{B: x != 0}
	}
	return Value{I: int64(x)}
}

// put stores v as column i of record r; update: r holds an older value (kept when equal).
func (w *winners) put(r []uint64, i int, v Value, update bool) {
	word, bit := i>>6, uint64(1)<<(i&63)
	wasNull := r[word]&bit != 0
	if v.Null {
		r[word] |= bit
		return
	}
	r[word] &^= bit
	o := w.off[i]
	switch w.kinds[i] {
	case String:
		st := &w.strs[i]
		if update && !wasNull && st.str(r[o]) == v.S {
			return // the same value (a typical update): keep the copy held
		}
		ref, remap := st.own(v.S)
		if remap != nil {
			w.remap(i, remap)
		}
		r[o] = ref
	case Float64:
		r[o] = math.Float64bits(v.F)
	case Decimal:
		r[o], r[o+1] = v.D.LowBits(), uint64(v.D.HighBits())
	case Bool:
		r[o] = 0
		if v.B {
			r[o] = 1
		}
	default:
		r[o] = uint64(v.I)
	}
}

// remap replaces the dictionary codes of string column i by arena references.
func (w *winners) remap(i int, remap []uint64) {
	word, bit, o := i>>6, uint64(1)<<(i&63), w.off[i]
	for slot := range w.len() {
		if r := w.record(slot); r[word]&bit == 0 {
			r[o] = remap[r[o]]
		}
	}
}

// appendTo appends column i of slot to an Arrow builder of the column's type.
func (w *winners) appendTo(i int, b array.Builder, slot int) {
	v := w.get(i, slot)
	if v.Null {
		b.AppendNull()
		return
	}
	switch w.kinds[i] {
	case String:
		b.(*array.StringBuilder).Append(v.S)
	case Int32:
		b.(*array.Int32Builder).Append(int32(v.I))
	case Int64:
		b.(*array.Int64Builder).Append(v.I)
	case Date:
		b.(*array.Date32Builder).Append(arrow.Date32(v.I))
	case Timestamp:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.I))
	case Float64:
		b.(*array.Float64Builder).Append(v.F)
	case Decimal:
		b.(*array.Decimal128Builder).Append(v.D)
	case Bool:
		b.(*array.BooleanBuilder).Append(v.B)
	}
}

// offer keeps row as the key's row if it beats the one held (see winners). key, whose
// hash (keyHash) is h, the row's strings and eventID are only read during the call:
// what is kept is copied.
func (w *winners) offer(h xxh3.Uint128, key string, row []Value, v version, op byte, eventID string, ts int64) {
	s, ok := w.lookup(h)
	if !ok {
		slot := len(w.fate)
		if slot&(recordsPerChunk-1) == 0 {
			w.chunks = append(w.chunks, make([]uint64, recordsPerChunk*w.stride))
		}
		ref := w.keys.add(key)
		w.index.add(h, slot)
		w.fate = append(w.fate, fateInsert)
		r := w.record(slot)
		r[w.meta+metaKey], r[w.meta+metaKeyHi] = ref, h.Hi
		w.hold(r, row, v, op, eventID, ts, false)
		if w.toast != nil {
			w.toast.first(slot)
		}
		return
	}
	r := w.record(s)
	m := r[w.meta:]
	held := version{ua: int64(m[metaUA]), seq: m[metaSeq], rank: int8(m[metaMisc]), hash: m[metaHash]}
	hts := int64(m[metaTS])
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
	} else if c := v.cmp(held); c < 0 || c == 0 && !earlier {
		if w.toast != nil && c < 0 {
			w.toast.older(w, s, r, row, v)
		}
		return
	}
	if w.toast != nil {
		row = w.toast.newer(w, s, row, held)
	}
	w.hold(r, row, v, op, eventID, ts, true)
}

// hold stores a version in record r.
func (w *winners) hold(r []uint64, row []Value, v version, op byte, eventID string, ts int64, update bool) {
	for i := range w.kinds {
		if i != w.keyCol { // the key is the column's value: see get
			w.put(r, i, row[i], update)
		}
	}
	m := r[w.meta:]
	m[metaUA], m[metaSeq], m[metaHash], m[metaTS] = uint64(v.ua), v.seq, v.hash, uint64(ts)
	misc := uint64(uint8(v.rank)) | uint64(op)<<8
	if u, ok := parseCanonicalUUID(eventID); ok {
		m[metaID0], m[metaID1] = binary.LittleEndian.Uint64(u[:8]), binary.LittleEndian.Uint64(u[8:])
	} else {
		w.otherIDs = append(w.otherIDs, strings.Clone(eventID))
		misc |= uint64(len(w.otherIDs)) << 32
	}
	m[metaMisc] = misc
}

// keyIndex maps a key to its slot. A key is identified by its 128-bit hash (keyHash),
// as the stored-version lookup identifies it by the key hash columns: two keys sharing
// one (probability about n²/2¹²⁹) would be taken for one. The index is an
// open-addressing table (linear probing, at most 3/4 full) of the hash's low 64 bits
// and slot+1; the record holds the high 64 bits, so a lookup touches the table and the
// record it then updates, not the key's text. Keys whose low half another key already
// has (about one pair in 10^7 among millions of keys) are in coll.
type keyIndex struct {
	tab  [][2]uint64 // hash low bits, slot+1 (0: empty)
	n    int
	coll map[xxh3.Uint128]int32
}

// get returns the slot of hash h.
func (x *keyIndex) get(h uint64) (int, bool) {
	if len(x.tab) == 0 {
		return 0, false
	}
	mask := uint64(len(x.tab) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := &x.tab[i]
		if e[1] == 0 {
			return 0, false
		}
		if e[0] == h {
			return int(e[1] - 1), true
		}
	}
}

// addTo adds the low half of every key's hash held to f.
func (x *keyIndex) addTo(f hashFilter) {
	for _, e := range x.tab {
		if e[1] != 0 {
			f.add(e[0])
		}
	}
	for h := range x.coll {
		f.add(h.Lo)
	}
}

// add records slot for the key whose hash is h, which the index does not hold: in the
// table, or in coll when another key has h's low half.
func (x *keyIndex) add(h xxh3.Uint128, slot int) {
	if _, taken := x.get(h.Lo); taken {
		if x.coll == nil {
			x.coll = map[xxh3.Uint128]int32{}
		}
		x.coll[h] = int32(slot)
		return
	}
	x.put(h.Lo, slot)
}

// put records slot for hash h, which the table does not hold.
func (x *keyIndex) put(h uint64, slot int) {
	if 4*(x.n+1) > 3*len(x.tab) {
		old := x.tab
		x.tab = make([][2]uint64, max(1024, 2*len(old)))
		for _, e := range old {
			if e[1] != 0 {
				x.insert(e[0], e[1])
			}
		}
	}
	x.insert(h, uint64(slot)+1)
	x.n++
}

func (x *keyIndex) insert(h, v uint64) {
	mask := uint64(len(x.tab) - 1)
	i := h & mask
	for x.tab[i][1] != 0 {
		i = (i + 1) & mask
	}
	x.tab[i] = [2]uint64{h, v}
}

// hashFilter is a set of 64-bit hashes with false positives: one bit per hash, in a
// bitset about 16 bits per member (a few percent false positives), so a lookup that
// mostly misses costs a bit test rather than probes of every shard's index.
type hashFilter []uint64

func newHashFilter(n int) hashFilter {
	words := 1
	for words*64 < 16*n {
		words <<= 1
	}
	return make(hashFilter, words)
}

// add records h; has reports whether h may have been added.
func (f hashFilter) add(h uint64) {
	i := (h >> 32) & uint64(len(f)*64-1)
	f[i>>6] |= 1 << (i & 63)
}

func (f hashFilter) has(h uint64) bool {
	i := (h >> 32) & uint64(len(f)*64-1)
	return f[i>>6]&(1<<(i&63)) != 0
}

// appendEventID appends the _event_id of slot as it was read from Bronze: the 16 bytes
// of a canonical (lowercase, hyphenated) UUID, which is what Bronze writes, are held
// packed, any other id as is.
func (w *winners) appendEventID(b []byte, slot int) []byte {
	m := w.record(slot)[w.meta:]
	if other := m[metaMisc] >> 32; other > 0 {
		return append(b, w.otherIDs[other-1]...)
	}
	var u [16]byte
	binary.LittleEndian.PutUint64(u[:8], m[metaID0])
	binary.LittleEndian.PutUint64(u[8:], m[metaID1])
	for i, c := range u {
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
	var bad byte
	for j, i := range uuidHexAt {
		hi, lo := lowerHexVal[s[i]], lowerHexVal[s[i+1]]
		bad |= hi | lo
		u[j] = hi<<4 | lo&0x0f
	}
	return u, bad&0x80 == 0
}

// uuidHexAt is where each byte's two hex digits start in a canonical UUID.
var uuidHexAt = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// lowerHexVal maps '0'-'9' and 'a'-'f' to their value and any other byte to 0x80.
var lowerHexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0x80
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// keySet is the set of distinct keys a run read for an append entity's keys table. A key
// is identified by its 128-bit hash, in a keyIndex as in the winners: the set holds no
// string for the collector to mark, and a lookup is one probe of a flat table (taxi,
// 2.8M keys: a map keyed by the key's text cost ~2 s of Silver's CPU and the collector's
// marking of its strings more; one keyed by the hash ~2.1 s in its probes).
type keySet struct {
	index keyIndex
	hi    []uint64 // each slot's hash, high half
	cols  []column // the key columns
	fresh []bool   // not in the keys table: to append
	pre   []bool   // read from a range Silver had already processed (so it is in Silver)
}

func newKeySet(keyCols []ColumnSpec) *keySet {
	k := &keySet{cols: make([]column, len(keyCols))}
	for i, c := range keyCols {
		k.cols[i].kind = c.Type.Kind
	}
	return k
}

// add records the key whose hash (keyHash) is h, its columns in row (only read during
// the call), if it is new.
func (k *keySet) add(h xxh3.Uint128, row []Value, keyIdx []int, pre bool) {
	if _, ok := k.slot(h); ok {
		return
	}
	k.index.add(h, len(k.fresh))
	k.hi = append(k.hi, h.Hi)
	for i, ki := range keyIdx {
		k.cols[i].append(row[ki])
	}
	k.fresh = append(k.fresh, true)
	k.pre = append(k.pre, pre)
}

// slot returns the slot of the key whose hash is h (as winners.lookup, the high half
// from the set's own slice).
func (k *keySet) slot(h xxh3.Uint128) (int, bool) {
	s, ok := k.index.get(h.Lo)
	if !ok {
		return 0, false
	}
	if k.hi[s] == h.Hi {
		return s, true
	}
	c, ok := k.index.coll[h]
	return int(c), ok
}

// values returns the key column values of every key of the set, in slot order (the
// strings point into the set's storage), or nil above pruneMaxKeys.
func (k *keySet) values() [][]Value {
	n, width := len(k.fresh), len(k.cols)
	if n > pruneMaxKeys {
		return nil
	}
	flat := make([]Value, n*width)
	out := make([][]Value, n)
	for slot := range out {
		out[slot] = flat[slot*width : (slot+1)*width : (slot+1)*width]
		for i := range k.cols {
			out[slot][i] = k.cols[i].get(slot)
		}
	}
	return out
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

// heldBytes is about what w holds: its records, strings, keys, index and per-row
// hashes (the memory a pass over key groups bounds; see Options.PassBytes). It costs a
// step per string column and per very long string, so a shard recounts after every
// batch it offers.
func (w *winners) heldBytes() int64 {
	n := int64(len(w.chunks)) * recordsPerChunk * int64(w.stride) * 8
	n += w.keys.bytes() + int64(cap(w.index.tab))*16 + int64(len(w.index.coll))*40
	n += int64(cap(w.fate)) + int64(len(w.hashes))*8 + int64(len(w.otherIDs))*56
	for i := range w.strs {
		st := &w.strs[i]
		n += st.arena.bytes() + int64(len(st.dict))*64
	}
	if w.toast != nil {
		n += int64(len(w.toast.fill)) * 64
	}
	return n
}

// bytes is what a holds.
func (a *arena) bytes() int64 {
	n := int64(len(a.chunks)) * arenaChunk
	for _, s := range a.long {
		n += int64(len(s)) + 16
	}
	return n
}
