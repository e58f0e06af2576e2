package bronze

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestParquetRowAsPayload pins what docs/bronze.md says a Parquet row becomes (issue 37,
// item 4): a JSON object whose keys are in alphabetical order, not the file's column
// order; a double 2.0 written 2; a TIMESTAMP without a zone as its wall-clock text with no
// zone (Silver reads a missing zone as UTC), one with a zone in UTC with "Z"; a date as
// YYYY-MM-DD; a struct as an object, its keys sorted too.
func TestParquetRowAsPayload(t *testing.T) {
	mem := memory.DefaultAllocator
	local := &arrow.TimestampType{Unit: arrow.Microsecond}                  // TIMESTAMP (no zone)
	zoned := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"} // TIMESTAMP WITH TIME ZONE
	inner := arrow.StructOf(arrow.Field{Name: "z", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "a", Type: arrow.BinaryTypes.String})
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "zeta", Type: arrow.PrimitiveTypes.Float64},
		{Name: "Alpha", Type: arrow.BinaryTypes.String},
		{Name: "pickup", Type: local},
		{Name: "dropoff", Type: zoned},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},
		{Name: "nested", Type: inner},
	}, nil)
	b := array.NewRecordBuilder(mem, sch)
	defer b.Release()
	at := time.Date(2024, 1, 15, 10, 30, 0, 123456000, time.UTC)
	b.Field(0).(*array.Float64Builder).Append(2.0)
	b.Field(1).(*array.StringBuilder).Append("x")
	b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMicro()))
	b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMicro()))
	b.Field(4).(*array.Date32Builder).Append(arrow.Date32FromTime(at))
	sb := b.Field(5).(*array.StructBuilder)
	sb.Append(true)
	sb.FieldBuilder(0).(*array.Int32Builder).Append(1)
	sb.FieldBuilder(1).(*array.StringBuilder).Append("y")
	rec := b.NewRecordBatch()
	defer rec.Release()
	var pq bytes.Buffer
	if err := pqarrow.WriteTable(array.NewTableFromRecords(sch, []arrow.RecordBatch{rec}), &pq, 1024, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := readParquet(context.Background(), bytes.NewReader(pq.Bytes()), func(p []byte, _ int64) error {
		got = append(got, string(p))
		return nil
	})
	want := []string{`{"Alpha":"x","day":"2024-01-15","dropoff":"2024-01-15T10:30:00.123456Z","nested":{"a":"y","z":1},"pickup":"2024-01-15T10:30:00.123456","zeta":2}`}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q (%v)\nwant %q", got, err, want)
	}
}
