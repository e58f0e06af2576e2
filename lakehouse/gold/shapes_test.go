package gold

import (
	"slices"
	"testing"

	"goldbridge/lakehouse/mart"
)

// TestEveryAggregateHasAGoldShape: every aggregate is written through the shape of the
// aggregate it is served as, with a value column and a write; it keeps exactly the
// hidden columns lakehouse/mart names for it (avg's sum and count, the lists, max_by's
// by), and writes them.
func TestEveryAggregateHasAGoldShape(t *testing.T) {
	for _, a := range mart.Aggs() {
		s, ok := shapes[a.Served()]
		if !ok || s.value == nil || s.write == nil {
			t.Errorf("%s: no shape", a)
			continue
		}
		var got []string
		if s.hidden != nil {
			for _, c := range s.hidden(MeasureSpec{Name: "m", Agg: a, InputType: typ("int64"), ByType: typ("int64")}) {
				got = append(got, c.name)
			}
		}
		if want := a.HiddenCols("m"); !slices.Equal(got, want) || (s.writeHidden != nil) != (len(want) > 0) {
			t.Errorf("%s: hidden columns %v, written %v, want %v", a, got, s.writeHidden != nil, want)
		}
	}
}
