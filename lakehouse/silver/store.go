package silver

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// column holds one typed column of the winners in compact per-kind slices (far smaller
// than a []Value per row for millions of keys).
type column struct {
	kind  Kind
	nulls []bool
	s     []string
	i     []int64
	f     []float64
	d     []decimal128.Num
	b     []bool
}

func (c *column) append(v Value) {
	c.nulls = append(c.nulls, v.Null)
	switch c.kind {
	case String:
		c.s = append(c.s, v.S)
	case Int32, Int64, Date, Timestamp:
		c.i = append(c.i, v.I)
	case Float64:
		c.f = append(c.f, v.F)
	case Decimal:
		c.d = append(c.d, v.D)
	case Bool:
		c.b = append(c.b, v.B)
	}
}

func (c *column) set(slot int, v Value) {
	c.nulls[slot] = v.Null
	switch c.kind {
	case String:
		c.s[slot] = v.S
	case Int32, Int64, Date, Timestamp:
		c.i[slot] = v.I
	case Float64:
		c.f[slot] = v.F
	case Decimal:
		c.d[slot] = v.D
	case Bool:
		c.b[slot] = v.B
	}
}

// get returns the value at slot.
func (c *column) get(slot int) Value {
	if c.nulls[slot] {
		return Value{Null: true}
	}
	switch c.kind {
	case String:
		return Value{S: c.s[slot]}
	case Int32, Int64, Date, Timestamp:
		return Value{I: c.i[slot]}
	case Float64:
		return Value{F: c.f[slot]}
	case Decimal:
		return Value{D: c.d[slot]}
	case Bool:
		return Value{B: c.b[slot]}
	}
	return Value{Null: true}
}

// appendTo appends the value at slot to an Arrow builder of the matching type.
func (c *column) appendTo(b array.Builder, slot int) {
	if c.nulls[slot] {
		b.AppendNull()
		return
	}
	switch c.kind {
	case String:
		b.(*array.StringBuilder).Append(c.s[slot])
	case Int32:
		b.(*array.Int32Builder).Append(int32(c.i[slot]))
	case Int64:
		b.(*array.Int64Builder).Append(c.i[slot])
	case Date:
		b.(*array.Date32Builder).Append(arrow.Date32(c.i[slot]))
	case Timestamp:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(c.i[slot]))
	case Float64:
		b.(*array.Float64Builder).Append(c.f[slot])
	case Decimal:
		b.(*array.Decimal128Builder).Append(c.d[slot])
	case Bool:
		b.(*array.BooleanBuilder).Append(c.b[slot])
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
	ver       []version
	op        []byte
	eventID   []string
	ts        []int64 // Bronze _ingest_ts (µs)
	fate      []fate
	firstWins bool // append mode
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
	w := &winners{cols: make([]column, len(cols)), slots: map[string]int32{}}
	for i, c := range cols {
		w.cols[i].kind = c.Type.Kind
	}
	return w
}

// offer keeps row as the key's row if it beats the one held (see winners).
func (w *winners) offer(key string, row []Value, v version, op byte, eventID string, ts int64) {
	slot, ok := w.slots[key]
	if !ok {
		w.slots[key] = int32(len(w.keys))
		w.keys = append(w.keys, key)
		for i := range w.cols {
			w.cols[i].append(row[i])
		}
		w.ver = append(w.ver, v)
		w.op = append(w.op, op)
		w.eventID = append(w.eventID, eventID)
		w.ts = append(w.ts, ts)
		w.fate = append(w.fate, fateInsert)
		return
	}
	earlier := arrival{ts, v.hash, eventID}.before(arrival{w.ts[slot], w.ver[slot].hash, w.eventID[slot]})
	if w.firstWins {
		if !earlier {
			return
		}
	} else if c := v.cmp(w.ver[slot]); c < 0 || c == 0 && !earlier {
		return
	}
	for i := range w.cols {
		w.cols[i].set(int(slot), row[i])
	}
	w.ver[slot], w.op[slot], w.eventID[slot], w.ts[slot] = v, op, eventID, ts
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

func (k *keySet) add(key string, row []Value, keyIdx []int, pre bool) {
	if _, ok := k.slots[key]; ok {
		return
	}
	k.slots[key] = int32(len(k.fresh))
	for i, ki := range keyIdx {
		k.cols[i].append(row[ki])
	}
	k.fresh = append(k.fresh, true)
	k.pre = append(k.pre, pre)
}
