package gold

import (
	"testing"

	"goldbridge/lakehouse/mart"
)

// TestEveryAggregateHasAGoldShape: every aggregate is written through the shape of the
// aggregate it is served as, with a value column and a write; it keeps hidden columns
// exactly when serving finishes it from them (avg's sum and count, the lists), and every
// hidden column is written.
func TestEveryAggregateHasAGoldShape(t *testing.T) {
	for _, a := range mart.Aggs() {
		s, ok := shapes[a.Served()]
		if !ok || s.value == nil || s.write == nil {
			t.Errorf("%s: no shape", a)
			continue
		}
		wantHidden := a.List() != mart.ListNone || a.Result() == mart.ResultAverage
		if (s.hidden != nil) != wantHidden || (s.writeHidden != nil) != wantHidden {
			t.Errorf("%s: hidden columns %v, written %v, want %v", a, s.hidden != nil, s.writeHidden != nil, wantHidden)
		}
	}
}
