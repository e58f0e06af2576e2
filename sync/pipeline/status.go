package pipeline

import (
	"context"
	"time"

	dto "github.com/prometheus/client_model/go"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/silver"
)

// InitSeries creates the counters that alerts take increase() of, at zero, so that the
// first failure is an increase and the series exist before anything happened: the runs
// of stages, the Gold checks of every mart and the Silver checks of every entity of p.
func (m *Metrics) InitSeries(p Plan, stages []string) error {
	for _, st := range stages {
		for _, outcome := range []string{"success", "failure", "circuit_open"} {
			m.Runs.WithLabelValues(st, outcome).Add(0)
		}
	}
	for _, name := range p.Marts() {
		mc, err := p.Mart(name)
		if err != nil {
			return err
		}
		for _, ck := range mc.Gold.Checks {
			m.DQFailures.WithLabelValues(name, ck.Name, ck.Severity).Add(0)
		}
	}
	for _, name := range p.Entities() {
		e, err := p.Entity(name)
		if err != nil {
			return err
		}
		sev := e.Silver.Severity
		m.SilverCheckFailures.WithLabelValues(name, silver.CheckRows, sev.Rows).Add(0)
		m.SilverCheckFailures.WithLabelValues(name, silver.CheckSchema, sev.Schema).Add(0)
		m.SilverCheckFailures.WithLabelValues(name, silver.CheckBalance, sev.Balance).Add(0)
		m.SilverCheckFailures.WithLabelValues(name, silver.CheckUndeclared, sev.Undeclared).Add(0)
	}
	return nil
}

// RefreshState sets the state gauges (circuit, last calculation, newest Gold grain) of
// every mart of p from its Gold table, so that they are right after a restart too; it
// returns the marts whose circuit is open.
func (m *Metrics) RefreshState(ctx context.Context, lh *catalog.Lakehouse, p Plan) map[string]bool {
	open := map[string]bool{}
	for _, name := range p.Marts() {
		mc, err := p.Mart(name)
		if err != nil {
			continue
		}
		f, err := gold.ReadFreshness(ctx, lh, mc.Gold.Table)
		if err != nil {
			continue // not calculated yet
		}
		c := 0.0
		if f.Circuit == "open" {
			c, open[name] = 1, true
		}
		m.CircuitOpen.WithLabelValues(name).Set(c)
		if f.LastCalculated.IsZero() {
			continue
		}
		m.CalculatedAt.WithLabelValues(name).Set(float64(f.LastCalculated.Unix()))
		if t, ok := grainTime(f.NewestGrain); ok {
			m.DataNewest.WithLabelValues(name, "gold").Set(float64(t.Unix()))
		}
	}
	return open
}

// MartStatus is one mart's freshness, circuit and serving state (serve's /status).
type MartStatus struct {
	Name           string     `json:"name"`
	LastCalculated *time.Time `json:"last_calculated"`
	AgeSeconds     *float64   `json:"age_seconds"`
	NewestGrain    string     `json:"newest_grain"`
	Circuit        string     `json:"circuit"`
	CircuitReason  string     `json:"circuit_reason,omitempty"`
	LastSync       *time.Time `json:"last_sync"`
	SyncLagSeconds *float64   `json:"sync_lag_seconds"`
	DriftParts     *float64   `json:"drift_partitions"`
	Error          string     `json:"error,omitempty"` // why its Gold table could not be read
}

// Status reads the status of every mart of p from its Gold table and from m.
func (m *Metrics) Status(ctx context.Context, lh *catalog.Lakehouse, p Plan) []MartStatus {
	mfs, _ := m.Registry.Gather()
	out := []MartStatus{}
	for _, name := range p.Marts() {
		ms := MartStatus{Name: name}
		mc, err := p.Mart(name)
		var f gold.Freshness
		if err == nil {
			f, err = gold.ReadFreshness(ctx, lh, mc.Gold.Table)
		}
		if err != nil {
			ms.Error = err.Error()
		} else {
			ms.Circuit, ms.CircuitReason, ms.NewestGrain = f.Circuit, f.CircuitReason, f.NewestGrain
			if !f.LastCalculated.IsZero() {
				t, age := f.LastCalculated, time.Since(f.LastCalculated).Seconds()
				ms.LastCalculated, ms.AgeSeconds = &t, &age
			}
		}
		if v, ok := metricValue(mfs, "goldbridge_last_success_timestamp_seconds", map[string]string{"stage": "sync", "mart": name}); ok {
			t := time.Unix(int64(v), 0).UTC()
			ms.LastSync = &t
		}
		if v, ok := metricValue(mfs, "goldbridge_sync_lag_seconds", map[string]string{"mart": name}); ok {
			ms.SyncLagSeconds = &v
		}
		if v, ok := metricValue(mfs, "goldbridge_reconciliation_drift_partitions", map[string]string{"mart": name}); ok {
			ms.DriftParts = &v
		}
		out = append(out, ms)
	}
	return out
}

// metricValue returns the value of the gauge (or counter) series of family name whose
// labels include want.
func metricValue(mfs []*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}
