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

// winners is the newest version per key seen in a run.
type winners struct {
	cols    []column
	slots   map[string]int32
	keys    []string
	ver     []version
	op      []byte
	eventID []string
	fate    []fate
}

type fate uint8

const (
	fateInsert fate = iota
	fateUpdate
	fateSame  // equal to the stored version: a re-delivery
	fateOlder // older than the stored version: a late event
)

func newWinners(cols []ColumnSpec) *winners {
	w := &winners{cols: make([]column, len(cols)), slots: map[string]int32{}}
	for i, c := range cols {
		w.cols[i].kind = c.Type.Kind
	}
	return w
}

// offer keeps row as the key's version if it is newer than the one held.
func (w *winners) offer(key string, row []Value, v version, op byte, eventID string) {
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
		w.fate = append(w.fate, fateInsert)
		return
	}
	if v.cmp(w.ver[slot]) <= 0 {
		return
	}
	for i := range w.cols {
		w.cols[i].set(int(slot), row[i])
	}
	w.ver[slot], w.op[slot], w.eventID[slot] = v, op, eventID
}
