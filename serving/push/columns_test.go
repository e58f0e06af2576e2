package push

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"goldbridge/serving"
	"goldbridge/serving/ddl"
)

// TestListRows checks the cut of a block at a number of list values: rows with 3, 0,
// 5, 2 and 4 values.
func TestListRows(t *testing.T) {
	b := array.NewListBuilder(memory.DefaultAllocator, arrow.BinaryTypes.String)
	defer b.Release()
	vb := b.ValueBuilder().(*array.StringBuilder)
	for _, n := range []int{3, 0, 5, 2, 4} {
		b.Append(true)
		for range n {
			vb.Append("k")
		}
	}
	a := b.NewArray()
	defer a.Release()
	for _, c := range []struct{ from, to, budget, want int }{
		{0, 5, 14, 5}, // everything fits
		{0, 5, 100, 5},
		{0, 5, 13, 4},  // 3+0+5+2 = 10 <= 13
		{0, 5, 8, 3},   // 3+0+5
		{0, 5, 3, 2},   // 3+0: an empty row is free
		{0, 5, 2, 1},   // the first row alone holds more: one row anyway
		{0, 5, 0, 1},   // no budget left: one row anyway
		{2, 5, 7, 4},   // 5+2
		{2, 4, 100, 4}, // bounded by to
		{4, 5, 1, 5},
	} {
		if got := listRows(a, c.from, c.to, c.budget); got != c.want {
			t.Errorf("listRows(%d, %d, budget %d) = %d, want %d", c.from, c.to, c.budget, got, c.want)
		}
	}
	if got := listLen(a, 1, 4); got != 7 {
		t.Errorf("listLen(1, 4) = %d, want 7", got)
	}
}

// TestSuffixesFit: the push's table suffixes fit serving.LongestSuffix (CheckNames).
func TestSuffixesFit(t *testing.T) {
	if len(PushDetailSuffix) != serving.LongestSuffix || len(PushSuffix) > serving.LongestSuffix || len(ddl.WindowsSuffix) > serving.LongestSuffix {
		t.Fatalf("serving.LongestSuffix %d, suffixes %q %q %q", serving.LongestSuffix, PushSuffix, PushDetailSuffix, ddl.WindowsSuffix)
	}
}

// TestColumnsRefuseOutOfRange: a Date32 or DateTime64 column takes exactly the values
// in serving.MinTime..MaxTime (NULLs whatever their slot holds) and refuses every other
// with the column named, never sending a value ClickHouse does not hold.
func TestColumnsRefuseOutOfRange(t *testing.T) {
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		v  time.Time
		ok bool
	}{
		{day(1899, 12, 31), false}, {day(1900, 1, 1), true}, {day(2026, 5, 1), true}, {day(2200, 1, 1), true},
		{day(2299, 12, 31), true}, {day(2300, 1, 1), false}, {day(9999, 12, 31), false}, {day(1, 1, 1), false},
	} {
		for _, typ := range []string{"Date32", "Nullable(Date32)", "DateTime64(6, 'UTC')", "Nullable(DateTime64(6, 'UTC'))"} {
			var a arrow.Array
			if strings.Contains(typ, "Date32") {
				b := array.NewDate32Builder(memory.DefaultAllocator)
				b.Append(arrow.Date32FromTime(tc.v))
				a = b.NewArray()
			} else {
				b := array.NewTimestampBuilder(memory.DefaultAllocator, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})
				b.Append(arrow.Timestamp(tc.v.UnixMicro()))
				a = b.NewArray()
			}
			col, err := newColumn(ddl.Column{Name: "d", Type: typ})
			if err != nil {
				t.Fatal(err)
			}
			err = col.append(a, 0, 1)
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "column d: value "+tc.v.Format(time.DateOnly))) {
				t.Errorf("%s %s: %v", typ, tc.v.Format(time.DateOnly), err)
			}
			a.Release()
		}
	}
	// A NULL whose slot holds an out-of-range value is a NULL.
	b := array.NewDate32Builder(memory.DefaultAllocator)
	b.AppendValues([]arrow.Date32{arrow.Date32FromTime(day(9999, 12, 31))}, []bool{false})
	a := b.NewArray()
	defer a.Release()
	col, _ := newColumn(ddl.Column{Name: "d", Type: "Nullable(Date32)"})
	if err := col.append(a, 0, 1); err != nil {
		t.Errorf("NULL: %v", err)
	}
}
