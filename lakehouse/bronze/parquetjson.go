package bronze

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"goldbridge/lakehouse/timetext"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// rowEncoder writes the rows of Arrow record batches as JSON objects, byte for byte as
// arrow-go's array.RecordToJSON does (a map per row through encoding/json: keys sorted,
// HTML characters escaped, values from GetOneForMarshal), without its map and reflection
// per row: that was half the CPU of ingesting a Parquet file (1M taxi trips: 2.11 s of
// 4.46 s), on the reading goroutine that the writers wait for. Integers, floats, booleans,
// plain strings and timestamps without a zone or in UTC are appended directly; every other
// value (and a string needing escapes) goes through encoding/json on its own, which gives
// the bytes the map did.
// TestRowEncoderMatchesRecordToJSON compares the two on random batches.
type rowEncoder struct {
	schema *arrow.Schema
	order  []int    // columns in key order
	keys   [][]byte // `"name":` of each column in order
}

// newRowEncoder returns the encoder of batches with schema s, or nil when a row of s is
// not a plain JSON object of its columns (two columns of one name: the map keeps one).
func newRowEncoder(s *arrow.Schema) *rowEncoder {
	fields := s.Fields()
	order := make([]int, len(fields))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(fields[a].Name, fields[b].Name) })
	e := &rowEncoder{schema: s, order: order}
	for k, i := range order {
		if k > 0 && fields[order[k-1]].Name == fields[i].Name {
			return nil
		}
		key, err := json.Marshal(fields[i].Name)
		if err != nil {
			return nil
		}
		e.keys = append(e.keys, append(key, ':'))
	}
	return e
}

// appendRow appends row i of rec (of the encoder's schema) as one JSON object.
func (e *rowEncoder) appendRow(dst []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	dst = append(dst, '{')
	var err error
	for k, c := range e.order {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e.keys[k]...)
		if dst, err = appendJSONValue(dst, rec.Column(c), i); err != nil {
			return nil, fmt.Errorf("column %s: %w", e.schema.Field(c).Name, err)
		}
	}
	return append(dst, '}'), nil
}

// appendJSONValue appends value i of a as encoding/json encodes a.GetOneForMarshal(i).
func appendJSONValue(dst []byte, a arrow.Array, i int) ([]byte, error) {
	if a.IsNull(i) {
		return append(dst, "null"...), nil
	}
	switch v := a.(type) {
	case *array.Int64:
		return strconv.AppendInt(dst, v.Value(i), 10), nil
	case *array.Int32:
		return strconv.AppendInt(dst, int64(v.Value(i)), 10), nil
	case *array.Int16:
		return strconv.AppendInt(dst, int64(v.Value(i)), 10), nil
	case *array.Int8:
		return strconv.AppendInt(dst, int64(v.Value(i)), 10), nil
	case *array.Uint64:
		return strconv.AppendUint(dst, v.Value(i), 10), nil
	case *array.Uint32:
		return strconv.AppendUint(dst, uint64(v.Value(i)), 10), nil
	case *array.Uint16:
		return strconv.AppendUint(dst, uint64(v.Value(i)), 10), nil
	case *array.Uint8:
		return strconv.AppendUint(dst, uint64(v.Value(i)), 10), nil
	case *array.Float64:
		return appendJSONFloat(dst, v.Value(i), 64)
	case *array.Float32:
		return appendJSONFloat(dst, float64(v.Value(i)), 32)
	case *array.Boolean:
		return strconv.AppendBool(dst, v.Value(i)), nil
	case *array.String:
		if s := v.Value(i); plainJSON(s) {
			return append(append(append(dst, '"'), s...), '"'), nil
		}
	case *array.LargeString:
		if s := v.Value(i); plainJSON(s) {
			return append(append(append(dst, '"'), s...), '"'), nil
		}
	case *array.Timestamp:
		if b, ok := appendTimestampJSON(dst, v, i); ok {
			return b, nil
		}
	}
	b, err := json.Marshal(a.GetOneForMarshal(i))
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// plainJSON reports whether s is its own JSON string body under encoding/json: printable
// ASCII without a quote, a backslash or an HTML character (<, >, &), which it escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendJSONFloat appends f as encoding/json does (its floatEncoder): the shortest
// representation, in exponent form below 1e-6 and from 1e21 on, "e-07" as "e-7"; NaN
// and the infinities as the strings "NaN", "+Inf", "-Inf" (arrow-go's GetOneForMarshal).
func appendJSONFloat(dst []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.AppendQuote(dst, strconv.FormatFloat(f, 'g', -1, bits)), nil
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// appendTimestampJSON appends value i of a as its GetOneForMarshal text in JSON, written
// by hand (arrow-go formats it with time.Format and encoding/json quotes it: 3.8 s of
// the 17.9 s of CPU ingesting 4M taxi trips). ok is false, nothing appended, where the
// text is not this one: a zone other than none or UTC, a year outside 0-9999 (arrow-go
// writes the raw number). The layout is arrow-go's default (timestampNoTimezoneLayout,
// RFC 3339 with the zone "Z" in UTC): a read array has it, only
// NewTimestampDataWithValueStrLayout sets another.
func appendTimestampJSON(dst []byte, a *array.Timestamp, i int) ([]byte, bool) {
	typ := a.DataType().(*arrow.TimestampType)
	if typ.TimeZone != "" && typ.TimeZone != "UTC" {
		return dst, false
	}
	t := a.Value(i).ToTime(typ.Unit)
	dst, ok := timetext.AppendDateTime(append(dst, '"'), t)
	if !ok {
		return dst[:len(dst)-1], false
	}
	if ns := t.Nanosecond(); ns != 0 { // ".999999999": the digits without trailing zeros
		digits := 9
		for ns%10 == 0 {
			ns /= 10
			digits--
		}
		dst = append(dst, '.')
		dst = timetext.AppendDigits(dst, ns, digits)
	}
	if typ.TimeZone == "UTC" {
		dst = append(dst, 'Z')
	}
	return append(dst, '"'), true
}
