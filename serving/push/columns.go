package push

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"goldbridge/serving"
	"goldbridge/serving/ddl"
)

// column is one insert column filled from Arrow arrays without per-row allocation.
type column struct {
	name   string
	col    proto.Column
	append func(a arrow.Array, from, to int) error
}

// nullable is Nullable(T) over any inner column: a null map, then the values.
type nullable struct {
	nulls proto.ColUInt8
	inner proto.Column
}

func (c *nullable) Type() proto.ColumnType {
	return proto.ColumnType("Nullable(" + string(c.inner.Type()) + ")")
}
func (c *nullable) Rows() int { return c.nulls.Rows() }
func (c *nullable) EncodeColumn(b *proto.Buffer) {
	c.nulls.EncodeColumn(b)
	c.inner.EncodeColumn(b)
}
func (c *nullable) WriteColumn(w *proto.Writer) { w.ChainBuffer(c.EncodeColumn) }
func (c *nullable) DecodeColumn(*proto.Reader, int) error {
	return fmt.Errorf("nullable: decode not supported")
}
func (c *nullable) Reset() { c.nulls.Reset(); c.inner.Reset() }

// The range Date32 and DateTime64 columns accept (serving.MinTime..MaxTime), in days
// and microseconds.
var (
	minDays   = arrow.Date32FromTime(serving.MinTime)
	maxDays   = arrow.Date32FromTime(serving.MaxTime)
	minMicros = serving.MinTime.UnixMicro()
	maxMicros = serving.MaxTime.UnixMicro()
)

// rangeErr reports a date or time value that the served types do not hold. Sync plans
// no partition holding one (from Gold's column bounds); this stops one that slipped
// through, e.g. from a data file without bounds, before it reaches ClickHouse.
func rangeErr(c ddl.Column, v time.Time) error {
	return fmt.Errorf("column %s: value %s outside %s, which ClickHouse does not hold exactly", c.Name, v.Format("2006-01-02T15:04:05.999999Z"), serving.TimeRange())
}

// newColumn builds the insert column of a ClickHouse type.
func newColumn(c ddl.Column) (*column, error) {
	t := c.Type
	if inner, ok := strings.CutPrefix(t, "Nullable("); ok {
		base, err := newColumn(ddl.Column{Name: c.Name, Type: strings.TrimSuffix(inner, ")")})
		if err != nil {
			return nil, err
		}
		n := &nullable{inner: base.col}
		return &column{name: c.Name, col: n, append: func(a arrow.Array, from, to int) error {
			for i := from; i < to; i++ {
				if a.IsNull(i) {
					n.nulls.Append(1)
				} else {
					n.nulls.Append(0)
				}
			}
			return base.append(a, from, to) // nulls append the zero value
		}}, nil
	}
	if inner, ok := strings.CutPrefix(t, "SimpleAggregateFunction("); ok {
		_, typ, _ := strings.Cut(strings.TrimSuffix(inner, ")"), ", ")
		col, err := newColumn(ddl.Column{Name: c.Name, Type: typ})
		if err != nil {
			return nil, err
		}
		col.col = proto.Alias(col.col, proto.ColumnType(t))
		return col, nil
	}
	out := &column{name: c.Name}
	switch {
	case t == "Date":
		var col proto.ColDate
		out.col = &col
		out.append = each[*array.Date32](c, (*[]proto.Date)(&col), func(d arrow.Date32) proto.Date { return proto.Date(d) })
	case t == "Date32":
		var col proto.ColDate32
		out.col = &col
		out.append = func(a arrow.Array, from, to int) error {
			d, ok := a.(*array.Date32)
			if !ok {
				return typeErr(c, a)
			}
			for i := from; i < to; i++ {
				v := d.Value(i)
				if (v < minDays || v >= maxDays) && d.IsValid(i) {
					return rangeErr(c, d.Value(i).ToTime())
				}
				col = append(col, proto.Date32(v))
			}
			return nil
		}
	case t == "DateTime64(6, 'UTC')":
		var col proto.ColInt64
		out.col = proto.Alias(&col, proto.ColumnType(t))
		out.append = func(a arrow.Array, from, to int) error {
			ts, ok := a.(*array.Timestamp)
			if !ok {
				return typeErr(c, a)
			}
			mul := int64(1)
			switch ts.DataType().(*arrow.TimestampType).Unit {
			case arrow.Second:
				mul = 1e6
			case arrow.Millisecond:
				mul = 1e3
			case arrow.Nanosecond:
				mul = -1000
			}
			for i := from; i < to; i++ {
				v := int64(ts.Value(i))
				if mul > 0 {
					v *= mul
				} else {
					v /= -mul
				}
				if (v < minMicros || v >= maxMicros) && ts.IsValid(i) {
					return rangeErr(c, time.UnixMicro(v).UTC())
				}
				col = append(col, v)
			}
			return nil
		}
	case t == "String" || t == "LowCardinality(String)":
		str := new(proto.ColStr)
		var add func(string)
		if t == "String" {
			out.col, add = str, str.Append
		} else {
			lc := proto.NewLowCardinality[string](str)
			out.col, add = lc, lc.Append
		}
		out.append = func(a arrow.Array, from, to int) error {
			switch s := a.(type) {
			case *array.String:
				for i := from; i < to; i++ {
					add(s.Value(i))
				}
			case *array.LargeString:
				for i := from; i < to; i++ {
					add(s.Value(i))
				}
			default:
				return typeErr(c, a)
			}
			return nil
		}
	case t == "Int64":
		var col proto.ColInt64
		out.col = &col
		out.append = func(a arrow.Array, from, to int) error {
			switch v := a.(type) {
			case *array.Int64:
				col = append(col, v.Int64Values()[from:to]...)
			case *array.Int32:
				for i := from; i < to; i++ {
					col = append(col, int64(v.Value(i)))
				}
			default:
				return typeErr(c, a)
			}
			return nil
		}
	case t == "Int32":
		var col proto.ColInt32
		out.col = &col
		out.append = func(a arrow.Array, from, to int) error {
			v, ok := a.(*array.Int32)
			if !ok {
				return typeErr(c, a)
			}
			col = append(col, v.Int32Values()[from:to]...)
			return nil
		}
	case t == "UInt8":
		var col proto.ColUInt8
		out.col = &col
		out.append = each[*array.Int32](c, (*[]uint8)(&col), func(v int32) uint8 { return uint8(v) })
	case t == "Bool":
		var col proto.ColBool
		out.col = &col
		out.append = each[*array.Boolean](c, (*[]bool)(&col), func(v bool) bool { return v })
	case t == "Float64":
		var col proto.ColFloat64
		out.col = &col
		out.append = func(a arrow.Array, from, to int) error {
			v, ok := a.(*array.Float64)
			if !ok {
				return typeErr(c, a)
			}
			col = append(col, v.Float64Values()[from:to]...)
			return nil
		}
	case strings.HasPrefix(t, "Decimal(38, "):
		var col proto.ColDecimal128
		out.col = proto.Alias(&col, proto.ColumnType(t))
		out.append = each[*array.Decimal128](c, (*[]proto.Decimal128)(&col), func(n decimal128.Num) proto.Decimal128 {
			return proto.Decimal128{Low: n.LowBits(), High: uint64(n.HighBits())}
		})
	case t == "Array(String)":
		arr := proto.NewArray[string](new(proto.ColStr))
		out.col = arr
		out.append = func(a arrow.Array, from, to int) error {
			reserveStrings(arr.Data.(*proto.ColStr), a, from, to)
			return appendList(c, arr, a, from, to, func(vals arrow.Array, s, e int) error {
				switch sv := vals.(type) {
				case *array.String:
					for j := s; j < e; j++ {
						arr.Data.Append(sv.Value(j))
					}
				case *array.LargeString:
					for j := s; j < e; j++ {
						arr.Data.Append(sv.Value(j))
					}
				default:
					return typeErr(c, vals)
				}
				return nil
			})
		}
	case t == "Array(Float64)":
		arr := proto.NewArray[float64](new(proto.ColFloat64))
		out.col = arr
		out.append = func(a arrow.Array, from, to int) error {
			return appendList(c, arr, a, from, to, func(vals arrow.Array, s, e int) error {
				fv, ok := vals.(*array.Float64)
				if !ok {
					return typeErr(c, vals)
				}
				for j := s; j < e; j++ {
					arr.Data.Append(fv.Value(j))
				}
				return nil
			})
		}
	default:
		return nil, fmt.Errorf("column %s: unsupported ClickHouse type %s", c.Name, t)
	}
	return out, nil
}

// each returns an append func that converts every value of an Arrow array of type A
// (rows [from, to)) into dst.
func each[A interface {
	arrow.Array
	Value(int) V
}, V, P any](c ddl.Column, dst *[]P, conv func(V) P) func(arrow.Array, int, int) error {
	return func(a arrow.Array, from, to int) error {
		v, ok := a.(A)
		if !ok {
			return typeErr(c, a)
		}
		for i := from; i < to; i++ {
			*dst = append(*dst, conv(v.Value(i)))
		}
		return nil
	}
}

// appendList appends list rows [from, to) (NULL lists as empty arrays): elems appends
// the flattened values, then the offsets are extended.
func appendList[T any](c ddl.Column, arr *proto.ColArr[T], a arrow.Array, from, to int, elems func(vals arrow.Array, s, e int) error) error {
	var offsets func(i int) (int, int)
	var vals arrow.Array
	switch l := a.(type) {
	case *array.List:
		vals = l.ListValues()
		offsets = func(i int) (int, int) { s, e := l.ValueOffsets(i); return int(s), int(e) }
	case *array.LargeList:
		vals = l.ListValues()
		offsets = func(i int) (int, int) { s, e := l.ValueOffsets(i); return int(s), int(e) }
	default:
		return typeErr(c, a)
	}
	for i := from; i < to; i++ {
		if !a.IsNull(i) {
			s, e := offsets(i)
			if err := elems(vals, s, e); err != nil {
				return err
			}
		}
		arr.Offsets = append(arr.Offsets, uint64(arr.Data.Rows()))
	}
	return nil
}

// reserveStrings makes room in c for the strings of the list rows [from, to) of a (a
// list of strings): a block's key lists are millions of strings, and growing the
// buffers value by value copied them over and over (1.25x steps for large slices),
// which was most of the push's CPU.
func reserveStrings(c *proto.ColStr, a arrow.Array, from, to int) {
	l, ok := a.(*array.List)
	if !ok || to <= from {
		return
	}
	s, _ := l.ValueOffsets(from)
	_, e := l.ValueOffsets(to - 1)
	sv, ok := l.ListValues().(*array.String)
	if !ok || e <= s {
		return
	}
	offs := sv.ValueOffsets() // len+1 entries
	c.Buf = grow(c.Buf, int(offs[e]-offs[s]))
	c.Pos = grow(c.Pos, int(e-s))
}

// grow makes room for n more elements, at least doubling the capacity when it must
// grow (append grows large slices by 1.25x).
func grow[S ~[]E, E any](s S, n int) S {
	if cap(s)-len(s) >= n {
		return s
	}
	return slices.Grow(s, max(n, cap(s)))
}

func typeErr(c ddl.Column, a arrow.Array) error {
	return fmt.Errorf("column %s (%s): unexpected Arrow type %s", c.Name, c.Type, a.DataType())
}
