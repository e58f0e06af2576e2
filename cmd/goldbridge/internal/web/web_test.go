package web

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReadyz: ready only when both servers answer and the process is not stopping; the
// body names what is not.
func TestReadyz(t *testing.T) {
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	for _, tc := range []struct {
		name      string
		cat, ch   func(context.Context) error
		stopping  bool
		code      int
		wantState map[string]string
	}{
		{"ready", up, up, false, 200, map[string]string{"catalog": "ok", "clickhouse": "ok"}},
		{"clickhouse down", up, down, false, 503, map[string]string{"catalog": "ok", "clickhouse": "connection refused"}},
		{"no catalog", nil, up, false, 503, map[string]string{"catalog": "not configured", "clickhouse": "ok"}},
		{"stopping", up, up, true, 503, map[string]string{"catalog": "ok", "clickhouse": "ok", "server": "shutting down"}},
	} {
		h := Handler(Probes{Registry: prometheus.NewRegistry(), PingCatalog: tc.cat, PingClickHouse: tc.ch,
			Stopping: func() bool { return tc.stopping }, Status: func(context.Context) any { return map[string]int{"marts": 2} }})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var got map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != tc.code || !maps.Equal(got, tc.wantState) {
			t.Errorf("%s: %d %s (%v), want %d %v", tc.name, rec.Code, rec.Body, err, tc.code, tc.wantState)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
		if rec.Code != 200 || rec.Body.String() != "{\n  \"marts\": 2\n}\n" {
			t.Errorf("%s: status %d %q", tc.name, rec.Code, rec.Body)
		}
	}
}
