package push

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/ddl"
)

// ClientStates reports whether goldbridge builds the aggregate states of mart m itself,
// in ClickHouse's binary serialization, and inserts the target's rows as they are
// stored: an AggregatingMergeTree mart whose distinct counts are uniqExact (a set of
// the SipHash-128 of each key) and whose quantiles are groupArray states (the values).
// Then ClickHouse's insert work is the same as loading those rows (deserializing the
// states), with no GROUP BY over the detail keys. `uniq` states (an adaptive sample)
// are built server-side from the detail rows, and so are max_by's and min_by's (argMax,
// argMin: goldbridge does not write their serialization).
func ClientStates(m *serving.Mart) bool {
	return m.Aggregating() && m.Distinct == "uniqExact" && !slices.ContainsFunc(m.Measures, func(ms serving.Measure) bool { return ms.Agg.By() })
}

// stateSpec is one AggregateFunction column of the target built by goldbridge.
type stateSpec struct {
	col      *stateCol
	field    int  // the Gold list in the read fields: mart.KeysCol or mart.ValuesCol
	distinct bool // uniqExact(String) of the keys; otherwise groupArray(Float64) of the values
}

// stateCol is an AggregateFunction column: each row's state in ClickHouse's binary
// serialization, concatenated (the Native format has no per-row framing for them). It
// holds slices of the grains' state buffers rather than copies: a block's states are
// tens of MB, and copying them into one growing buffer was most of the push's CPU.
type stateCol struct {
	typ    proto.ColumnType
	chunks [][]byte
	rows   int
}

func (c *stateCol) Type() proto.ColumnType { return c.typ }
func (c *stateCol) Rows() int              { return c.rows }
func (c *stateCol) EncodeColumn(b *proto.Buffer) {
	for _, ch := range c.chunks {
		b.Buf = append(b.Buf, ch...)
	}
}
func (c *stateCol) WriteColumn(w *proto.Writer) {
	for _, ch := range c.chunks {
		w.ChainWrite(ch)
	}
}
func (c *stateCol) Reset() {
	clear(c.chunks)
	c.chunks, c.rows = c.chunks[:0], 0
}
func (c *stateCol) DecodeColumn(*proto.Reader, int) error {
	return fmt.Errorf("aggregate state column: decode not supported")
}

// grainStates computes the states of one grain's Gold rows (every level): a carrier row's
// states come from its own lists, a coarser row's from the union (distinct keys) or
// concatenation (values) of the lists of the rows of its carrier level (mart.Level.From)
// that it rolls up. The states of all rows are kept, in row order, until the rows are
// appended.
type grainStates struct {
	level int   // read field of grouping_level
	dims  []int // read fields of the dimensions
	flags []int // read fields of grouping_<dim>
	specs []stateSpec
	// levels by their grouping flags (mart.Level.Mask); from[i]: the carrier of level i
	byMask map[uint64]int
	levels []mart.Level

	rows   []rowRef
	bufs   [][]byte // per spec: the states of the rows, in order
	offs   [][]int  // per spec: row i's state is bufs[s][offs[s][i]:offs[s][i+1]]
	hashes [][2]uint64
	hoff   []int // carrier row i's key hashes: hashes[hoff[i]:hoff[i+1]] (per distinct spec)
	set    hashSet
	key    []byte
}

type rowRef struct {
	rec, row int
	mask     uint64 // bit j: dimension j rolled up
	level    int    // index in levels
	carrier  bool
	from     []int // carrier rows (indexes in rows) a coarser row rolls up
}

func newGrainStates(m *serving.Mart, fields []string, specs []stateSpec) (*grainStates, error) {
	g := &grainStates{specs: specs, level: -1}
	idx := func(name string) int {
		for i, f := range fields {
			if f == name {
				return i
			}
		}
		return -1
	}
	g.level = idx(mart.ColGroupingLevel)
	for _, d := range m.Dimensions {
		g.dims = append(g.dims, idx(d.Name))
		g.flags = append(g.flags, idx(mart.GroupingCol(d.Name)))
	}
	if g.level < 0 || len(m.Dimensions) > 64 {
		return nil, fmt.Errorf("gold rows: no grouping_level column or more than 64 dimensions")
	}
	levels, err := m.Levels()
	if err != nil {
		return nil, fmt.Errorf("mart %s: %w", m.Name, err)
	}
	g.levels, g.byMask = levels, map[uint64]int{}
	for i, l := range levels {
		g.byMask[l.Mask(len(m.Dimensions))] = i
	}
	for i := range g.dims {
		if g.dims[i] < 0 || g.flags[i] < 0 {
			return nil, fmt.Errorf("gold rows: no column %s or its grouping flag", m.Dimensions[i].Name)
		}
	}
	g.bufs = make([][]byte, len(specs))
	g.offs = make([][]int, len(specs))
	return g, nil
}

// compute builds the states of the rows of recs (one grain).
func (g *grainStates) compute(recs []arrow.RecordBatch) error {
	g.rows = g.rows[:0]
	for r, rec := range recs {
		for i := range int(rec.NumRows()) {
			ref := rowRef{rec: r, row: i}
			for j, f := range g.flags {
				v, err := intAt(rec.Column(f), i)
				if err != nil {
					return fmt.Errorf("grouping flag: %w", err)
				}
				if v != 0 {
					ref.mask |= 1 << j
				}
			}
			li, ok := g.byMask[ref.mask]
			if !ok {
				return fmt.Errorf("gold rows: grouping flags %b are no level of the mart", ref.mask)
			}
			ref.level, ref.carrier = li, g.levels[li].Carries(li)
			g.rows = append(g.rows, ref)
		}
	}
	// Every coarser row, by its level and kept dimension values; then each carrier row
	// joins the row of every level merged from its level that rolls it up.
	coarse := map[string]int{}
	for i, ref := range g.rows {
		if ref.carrier {
			continue
		}
		k := string(g.rowKey(recs, ref, ref.mask))
		if _, dup := coarse[k]; dup {
			return fmt.Errorf("gold rows: two rows of level %s with the same dimensions", g.levels[ref.level].Name)
		}
		coarse[k] = i
	}
	nd := len(g.dims)
	for i, ref := range g.rows {
		if !ref.carrier {
			continue
		}
		for li, l := range g.levels {
			if l.From != ref.level || li == ref.level {
				continue
			}
			c, ok := coarse[string(g.rowKey(recs, ref, l.Mask(nd)))]
			if !ok {
				return fmt.Errorf("gold rows: a row of level %s has no row at level %s", g.levels[ref.level].Name, l.Name)
			}
			g.rows[c].from = append(g.rows[c].from, i)
		}
	}
	for s, sp := range g.specs {
		g.bufs[s], g.offs[s] = g.bufs[s][:0], append(g.offs[s][:0], 0)
		var err error
		if sp.distinct {
			err = g.distinctStates(recs, s)
		} else {
			err = g.valuesStates(recs, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rowKey is the key of the row ref seen at level mask: the mask and the values of the
// dimensions it keeps.
func (g *grainStates) rowKey(recs []arrow.RecordBatch, ref rowRef, mask uint64) []byte {
	k := binary.LittleEndian.AppendUint64(g.key[:0], mask)
	rec := recs[ref.rec]
	for j, f := range g.dims {
		if mask&(1<<j) != 0 {
			continue
		}
		a := rec.Column(f)
		if a.IsNull(ref.row) {
			k = append(k, 0)
			continue
		}
		var v string
		if s, ok := a.(*array.String); ok {
			v = s.Value(ref.row)
		} else {
			v = a.ValueStr(ref.row)
		}
		k = append(k, 1)
		k = binary.AppendUvarint(k, uint64(len(v)))
		k = append(k, v...)
	}
	g.key = k
	return k
}

// distinctStates serializes uniqExact(String) states: varuint count, then each key's
// SipHash-128 (lo, hi little-endian), in any order.
func (g *grainStates) distinctStates(recs []arrow.RecordBatch, s int) error {
	sp := g.specs[s]
	g.hashes, g.hoff = g.hashes[:0], g.hoff[:0]
	for _, ref := range g.rows {
		g.hoff = append(g.hoff, len(g.hashes))
		if !ref.carrier {
			continue
		}
		l, ok := recs[ref.rec].Column(sp.field).(*array.List)
		if !ok {
			return fmt.Errorf("distinct keys: unexpected Arrow type %s", recs[ref.rec].Column(sp.field).DataType())
		}
		if l.IsNull(ref.row) {
			continue
		}
		vals, ok := l.ListValues().(*array.String)
		if !ok {
			return fmt.Errorf("distinct keys: unexpected Arrow type %s", l.ListValues().DataType())
		}
		b, e := l.ValueOffsets(ref.row)
		for j := int(b); j < int(e); j++ {
			lo, hi := sipHash128(unsafeBytes(vals.Value(j)))
			g.hashes = append(g.hashes, [2]uint64{lo, hi})
		}
	}
	g.hoff = append(g.hoff, len(g.hashes))
	// An upper bound of the states' size: every row's keys (a coarser row's are those of
	// the carrier rows it rolls up) and its count.
	size := 0
	for i, ref := range g.rows {
		n := g.hoff[i+1] - g.hoff[i]
		for _, d := range ref.from {
			n += g.hoff[d+1] - g.hoff[d]
		}
		size += binary.MaxVarintLen64 + 16*n
	}
	buf := g.bufs[s][:0]
	if cap(buf) < size {
		buf = make([]byte, 0, size+size/4) // room for the next grains that reuse it
	}
	for i, ref := range g.rows {
		if ref.carrier {
			// Gold's carrier keys are distinct: the row's hashes are its set.
			h := g.hashes[g.hoff[i]:g.hoff[i+1]]
			buf = binary.AppendUvarint(buf, uint64(len(h)))
			buf = appendHashes(buf, h)
		} else {
			n := 0
			for _, d := range ref.from {
				n += g.hoff[d+1] - g.hoff[d]
			}
			g.set.reset(n)
			for _, d := range ref.from {
				for _, x := range g.hashes[g.hoff[d]:g.hoff[d+1]] {
					g.set.add(x)
				}
			}
			buf = g.set.appendTo(buf)
		}
		g.offs[s] = append(g.offs[s], len(buf))
	}
	g.bufs[s] = buf
	return nil
}

// valuesStates serializes groupArray(Float64) states: varuint count, then the values
// (little-endian) of the row's list or of the lists of the carrier rows it rolls up.
func (g *grainStates) valuesStates(recs []arrow.RecordBatch, s int) error {
	sp := g.specs[s]
	list := func(d int) ([]float64, error) {
		ref := g.rows[d]
		l, ok := recs[ref.rec].Column(sp.field).(*array.List)
		if !ok {
			return nil, fmt.Errorf("quantile values: unexpected Arrow type %s", recs[ref.rec].Column(sp.field).DataType())
		}
		if l.IsNull(ref.row) {
			return nil, nil
		}
		vals, ok := l.ListValues().(*array.Float64)
		if !ok {
			return nil, fmt.Errorf("quantile values: unexpected Arrow type %s", l.ListValues().DataType())
		}
		b, e := l.ValueOffsets(ref.row)
		return vals.Float64Values()[b:e], nil
	}
	buf := g.bufs[s]
	for i, ref := range g.rows {
		from := ref.from
		if ref.carrier {
			from = []int{i}
		}
		var n int
		for _, d := range from {
			v, err := list(d)
			if err != nil {
				return err
			}
			n += len(v)
		}
		buf = binary.AppendUvarint(buf, uint64(n))
		for _, d := range from {
			v, _ := list(d)
			for _, x := range v {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(x))
			}
		}
		g.offs[s] = append(g.offs[s], len(buf))
	}
	g.bufs[s] = buf
	return nil
}

// rowStates are the serialized states of one grain's rows, per spec, in row order.
type rowStates struct {
	bufs [][]byte
	offs [][]int // row i's state of spec s is bufs[s][offs[s][i]:offs[s][i+1]]
}

// take hands over the states compute built.
// The next compute reuses buffers given back through free (a fresh buffer is zeroed
// memory: at 10M events that was a fifth of the push's CPU).
func (g *grainStates) take(free <-chan []byte) rowStates {
	st := rowStates{bufs: g.bufs, offs: g.offs}
	g.bufs, g.offs = make([][]byte, len(g.specs)), make([][]int, len(g.specs))
	for s := range g.bufs {
		select {
		case b := <-free:
			g.bufs[s] = b[:0]
		default:
		}
	}
	return st
}

// recycle gives st's buffers back for reuse (non-blocking: a full free list drops them).
func (st rowStates) recycle(free chan<- []byte) {
	for _, b := range st.bufs {
		select {
		case free <- b:
		default:
		}
	}
}

// appendTo appends the states of rows [from, to) to the spec columns and returns the
// bytes appended.
func (st rowStates) appendTo(specs []stateSpec, from, to int) int {
	n := 0
	for s, sp := range specs {
		b := st.bufs[s][st.offs[s][from]:st.offs[s][to]:st.offs[s][to]]
		sp.col.chunks = append(sp.col.chunks, b)
		sp.col.rows += to - from
		n += len(b)
	}
	return n
}

// rows is the number of rows st holds.
func (st rowStates) rows() int {
	if len(st.offs) == 0 {
		return 0
	}
	return len(st.offs[0]) - 1
}

// same reports whether st and o are the states of one grain.
func (st rowStates) same(o rowStates) bool {
	return len(st.offs) > 0 && len(o.offs) > 0 && len(st.offs[0]) > 0 && len(o.offs[0]) > 0 && &st.offs[0][0] == &o.offs[0][0]
}

// size is the size of the states of rows [from, to).
func (st rowStates) size(from, to int) int {
	n := 0
	for s := range st.bufs {
		n += st.offs[s][to] - st.offs[s][from]
	}
	return n
}

func intAt(a arrow.Array, i int) (int64, error) {
	switch v := a.(type) {
	case *array.Int32:
		return int64(v.Value(i)), nil
	case *array.Int64:
		return v.Value(i), nil
	case *array.Int8:
		return int64(v.Value(i)), nil
	case *array.Uint8:
		return int64(v.Value(i)), nil
	}
	return 0, fmt.Errorf("unexpected Arrow type %s", a.DataType())
}

// stateColumns returns, for a ClientStates mart, the insert columns of the target
// (TargetColumns: Gold's columns, the state columns from the Gold lists) and the read
// fields; cols[i] is filled from fields[i] except for the state columns.
func stateColumns(m *serving.Mart) (wcols []ddl.Column, fields []string, specs []stateSpec, stateAt map[int]int) {
	wcols = ddl.TargetColumns(m)
	stateAt = map[int]int{}
	lists := map[string]serving.Measure{}
	for _, ms := range m.Measures {
		if ms.Agg.List() != mart.ListNone {
			lists[ddl.StateColumn(ms)] = ms
		}
	}
	for i, wc := range wcols {
		ms, ok := lists[wc.Name]
		if !ok {
			fields = append(fields, wc.Name)
			continue
		}
		sp := stateSpec{col: &stateCol{typ: proto.ColumnType(wc.Type)}, field: i, distinct: ms.Agg.List() == mart.ListKeys}
		fields = append(fields, ms.Agg.ListCol(ms.Name))
		stateAt[i] = len(specs)
		specs = append(specs, sp)
	}
	return wcols, fields, specs, stateAt
}

// hashSet is an open-addressing set of 128-bit key hashes; the low word (uniformly
// distributed) picks the slot.
type hashSet struct {
	tbl     [][2]uint64
	n       int
	hasZero bool // the all-zero hash marks empty slots, so it is kept aside
}

// reset empties the set and sizes it for up to n keys.
func (s *hashSet) reset(n int) {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	if cap(s.tbl) < size {
		s.tbl = make([][2]uint64, size)
	} else {
		s.tbl = s.tbl[:size]
		clear(s.tbl)
	}
	s.n, s.hasZero = 0, false
}

func (s *hashSet) add(x [2]uint64) {
	if x == ([2]uint64{}) {
		if !s.hasZero {
			s.hasZero = true
			s.n++
		}
		return
	}
	mask := uint64(len(s.tbl) - 1)
	for i := x[0] & mask; ; i = (i + 1) & mask {
		switch s.tbl[i] {
		case x:
			return
		case [2]uint64{}:
			s.tbl[i] = x
			s.n++
			return
		}
	}
}

// appendTo appends the set as a uniqExact state: varuint count, then the hashes.
func (s *hashSet) appendTo(buf []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(s.n))
	at := len(buf)
	buf = slices.Grow(buf, 16*s.n)[:at+16*s.n]
	if s.hasZero {
		clear(buf[at : at+16])
		at += 16
	}
	for _, x := range s.tbl {
		if x != ([2]uint64{}) {
			binary.LittleEndian.PutUint64(buf[at:], x[0])
			binary.LittleEndian.PutUint64(buf[at+8:], x[1])
			at += 16
		}
	}
	return buf
}

// littleEndian: the machine stores a [2]uint64 as the state's bytes (lo, hi,
// little-endian), so hashes can be copied as they are.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// appendHashes appends the 16-byte little-endian (lo, hi) form of hs.
func appendHashes(buf []byte, hs [][2]uint64) []byte {
	if len(hs) == 0 {
		return buf
	}
	if littleEndian {
		return append(buf, unsafe.Slice((*byte)(unsafe.Pointer(&hs[0])), 16*len(hs))...)
	}
	at := len(buf)
	buf = slices.Grow(buf, 16*len(hs))[:at+16*len(hs)]
	for _, x := range hs {
		binary.LittleEndian.PutUint64(buf[at:], x[0])
		binary.LittleEndian.PutUint64(buf[at+8:], x[1])
		at += 16
	}
	return buf
}

// unsafeBytes views s as bytes without copying (read only).
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
