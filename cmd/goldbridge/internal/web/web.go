// Package web is the HTTP interface of goldbridge serve: /metrics (Prometheus), /healthz
// (the process answers), /readyz (the catalog and ClickHouse answer and the process is
// not stopping) and /status (the schedules and marts, as the serve process reports them).
package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Probes are what the endpoints ask the serve process.
type Probes struct {
	Registry *prometheus.Registry
	// PingCatalog and PingClickHouse answer nil when their server answers; nil when not
	// configured (not ready).
	PingCatalog, PingClickHouse func(context.Context) error
	Stopping                    func() bool
	Status                      func(context.Context) any // the /status document
}

// Handler serves the endpoints of p.
func Handler(p Probes) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.Registry, promhttp.HandlerOpts{Registry: p.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", p.readyz)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		writeJSON(w, http.StatusOK, p.Status(ctx))
	})
	return mux
}

// readyz answers 200 when the catalog and ClickHouse answer, 503 otherwise or while
// shutting down; the body says which one failed.
func (p Probes) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	res := map[string]string{}
	ok := true
	check := func(name string, ping func(context.Context) error) {
		if ping == nil {
			res[name] = "not configured"
			ok = false
			return
		}
		if err := ping(ctx); err != nil {
			res[name] = err.Error()
			ok = false
			return
		}
		res[name] = "ok"
	}
	check("catalog", p.PingCatalog)
	check("clickhouse", p.PingClickHouse)
	if p.Stopping() {
		res["server"], ok = "shutting down", false
	}
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, res)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
