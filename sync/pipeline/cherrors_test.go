package pipeline

import (
	"context"
	"errors"
	"testing"
)

// TestClickHouseErrors: each scrape reports every name, 0 where the server has none, and
// nothing when the server cannot be read.
func TestClickHouseErrors(t *testing.T) {
	m := NewMetrics()
	fail := false
	err := m.WatchClickHouseErrors(func(context.Context) (map[string]uint64, error) {
		if fail {
			return nil, errors.New("no server")
		}
		return map[string]uint64{"TIMEOUT_EXCEEDED": 3, "AUTHENTICATION_FAILED": 1, "UNRELATED": 9}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := scrapeErrors(t, m)
	want := map[string]float64{"TIMEOUT_EXCEEDED": 3, "MEMORY_LIMIT_EXCEEDED": 0, "SERVER_OVERLOADED": 0,
		"SETTING_CONSTRAINT_VIOLATION": 0, "AUTHENTICATION_FAILED": 1, "ACCESS_DENIED": 0}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	fail = true
	if got := scrapeErrors(t, m); len(got) != 0 {
		t.Fatalf("an unreadable server: %v, want no series", got)
	}
}

// scrapeErrors gathers m (failing t on a gather error: the other metrics must survive an
// unreadable server) and returns goldbridge_clickhouse_errors_total by name.
func scrapeErrors(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "goldbridge_clickhouse_errors_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	return got
}
