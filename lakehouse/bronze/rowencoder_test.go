package bronze

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowEncoderSchema has a column of every kind the encoder appends itself and of some it
// hands to encoding/json, in an order that is not the keys'.
var rowEncoderSchema = arrow.NewSchema([]arrow.Field{
	{Name: "zeta", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
	{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
	{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
	{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
	{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "Bool", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "large", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "ts_s_utc", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, Nullable: true},
	{Name: "ts_ms", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
	{Name: "ts_ns_utc", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "ts_zone", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "America/New_York"}, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 18, Scale: 2}, Nullable: true},
	{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "a<b>&\"c\"", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// specialFloats are the values where encoding/json's float format changes.
var specialFloats = []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1}

func randomText(r *rand.Rand) string {
	parts := []string{"plain", "<b>", "a&b", `q"uote`, `back\slash`, "tab\t", "nl\n", "\x01", "é", "\u2028", "\u2029", "\xff\xfe", "日本", "\x7f", ""}
	var b strings.Builder
	for range r.IntN(4) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// randomBatch builds n rows of rowEncoderSchema (each cell NULL one time in eight).
func randomBatch(r *rand.Rand, n int, nonFinite bool) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, rowEncoderSchema)
	defer b.Release()
	for range n {
		for i, f := range b.Fields() {
			if r.IntN(8) == 0 {
				f.AppendNull()
				continue
			}
			switch f := f.(type) {
			case *array.StringBuilder:
				f.Append(randomText(r))
			case *array.LargeStringBuilder:
				f.Append(randomText(r))
			case *array.Int64Builder:
				f.Append(r.Int64() >> r.IntN(64))
			case *array.Int32Builder:
				f.Append(r.Int32())
			case *array.Int16Builder:
				f.Append(int16(r.Int32()))
			case *array.Int8Builder:
				f.Append(int8(r.Int32()))
			case *array.Uint64Builder:
				f.Append(r.Uint64() >> r.IntN(64))
			case *array.Uint32Builder:
				f.Append(r.Uint32())
			case *array.Uint16Builder:
				f.Append(uint16(r.Uint32()))
			case *array.Uint8Builder:
				f.Append(uint8(r.Uint32()))
			case *array.Float64Builder:
				v := specialFloats[r.IntN(len(specialFloats))] * float64(1-2*r.IntN(2))
				if r.IntN(2) == 0 {
					v = r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25))
				}
				if nonFinite && i == 9 {
					v = math.NaN()
				}
				f.Append(v)
			case *array.Float32Builder:
				f.Append(float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))))
			case *array.BooleanBuilder:
				f.Append(r.IntN(2) == 0)
			case *array.TimestampBuilder:
				// Around 1970 to 2096 in the column's unit, a whole second or
				// millisecond one time in three; the seconds column also before year 0
				// and after 9999 (arrow-go writes the number there).
				v := r.Int64N(4e15) - 1e14
				switch f.Type().(*arrow.TimestampType).Unit {
				case arrow.Second:
					v = r.Int64N(4e11) - 1.2e11
				case arrow.Millisecond:
					v /= 1000
				case arrow.Nanosecond:
					v *= 1000
				}
				if r.IntN(3) == 0 {
					v -= v % 1000
				}
				f.Append(arrow.Timestamp(v))
			case *array.Date32Builder:
				f.Append(arrow.Date32(r.Int32N(40000)))
			case *array.Decimal128Builder:
				f.Append(decimal128.FromI64(r.Int64N(1e12) - 5e11))
			case *array.ListBuilder:
				f.Append(true)
				for range r.IntN(3) {
					f.ValueBuilder().(*array.Int64Builder).Append(r.Int64N(100))
				}
			}
		}
	}
	return b.NewRecordBatch()
}

// encodeRows is the encoder's output for rec, one line per row, or its first error.
func encodeRows(t *testing.T, rec arrow.RecordBatch) ([]byte, error) {
	t.Helper()
	enc := newRowEncoder(rec.Schema())
	if enc == nil {
		t.Fatal("no encoder for the test schema")
	}
	var out, line []byte
	var err error
	for i := range int(rec.NumRows()) {
		if line, err = enc.appendRow(line[:0], rec, i); err != nil {
			return nil, err
		}
		out = append(append(out, line...), '\n')
	}
	return out, nil
}

// TestRowEncoderMatchesRecordToJSON: on random batches of every column kind (NULLs,
// floats where the format changes, strings with HTML characters, escapes, invalid UTF-8
// and line separators, values encoding/json formats itself), the encoder writes exactly
// arrow-go's RecordToJSON lines (a NaN or an infinity as a string, as there).
func TestRowEncoderMatchesRecordToJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		rec := randomBatch(r, 1+r.IntN(40), round%25 == 24)
		var want bytes.Buffer
		werr := array.RecordToJSON(rec, &want)
		got, gerr := encodeRows(t, rec)
		rec.Release()
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("round %d: RecordToJSON error %v, encoder error %v", round, werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("round %d:\nencoder      %s\nRecordToJSON %s", round, got, want.Bytes())
		}
	}
}

// TestRowEncoderRefusesDuplicateNames: two columns of one name are one key of
// RecordToJSON's map; the encoder leaves such a schema to it.
func TestRowEncoderRefusesDuplicateNames(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if newRowEncoder(s) != nil {
		t.Fatal("an encoder for duplicate column names")
	}
}

// FuzzRowEncoder: any string and double in a batch encode as RecordToJSON does.
func FuzzRowEncoder(f *testing.F) {
	f.Add("plain", 1.5)
	f.Add("<\u2028\xff>", 1e-7)
	f.Add("", math.Inf(1))
	sch := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}, {Name: "f", Type: arrow.PrimitiveTypes.Float64}}, nil)
	f.Fuzz(func(t *testing.T, s string, x float64) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		defer b.Release()
		b.Field(0).(*array.StringBuilder).Append(s)
		b.Field(1).(*array.Float64Builder).Append(x)
		rec := b.NewRecordBatch()
		defer rec.Release()
		var want bytes.Buffer
		werr := array.RecordToJSON(rec, &want)
		got, gerr := encodeRows(t, rec)
		if (werr != nil) != (gerr != nil) || werr == nil && !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("encoder %q (%v), RecordToJSON %q (%v)", got, gerr, want.Bytes(), werr)
		}
	})
}
