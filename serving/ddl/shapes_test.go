package ddl

import (
	"testing"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
)

// TestEveryServedAggregateHasAShape: every aggregate a measure can be served as has its
// ClickHouse shape, with stored and wire columns, a merge and a state build, and a finish
// exactly when the value is Finished (not a SimpleAggregateFunction).
func TestEveryServedAggregateHasAShape(t *testing.T) {
	m := &serving.Mart{Distinct: "uniqExact"}
	for _, a := range mart.Aggs() {
		served := a.Served()
		s, ok := shapes[served]
		if !ok {
			t.Errorf("%s (served as %s): no shape", a, served)
			continue
		}
		ms := serving.Measure{Name: "v", Agg: served, Type: "Int64"}
		if len(s.stored(m, ms)) == 0 || len(s.wire(ms)) == 0 || s.merge(m, ms) == "" || len(s.build(m, ms)) == 0 {
			t.Errorf("%s: an empty part of its shape", served)
		}
		if (s.finish != nil) != Finished(ms) {
			t.Errorf("%s: finish %v, Finished %v", served, s.finish != nil, Finished(ms))
		}
	}
}
