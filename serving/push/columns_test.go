package push

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"goldbridge/serving"
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
	if len(PushDetailSuffix) != serving.LongestSuffix || len(PushSuffix) > serving.LongestSuffix {
		t.Fatalf("serving.LongestSuffix %d, suffixes %q %q", serving.LongestSuffix, PushSuffix, PushDetailSuffix)
	}
}
