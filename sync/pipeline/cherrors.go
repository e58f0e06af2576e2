package pipeline

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClickHouseErrorNames are the errors of the embedded ClickHouse that
// goldbridge_clickhouse_errors_total reports, one series each (0 until the first): a
// reader's query past its time or memory bound, refused by the readers' full queue, or
// trying to lift a bound (docs/serving.md, "The readers' bounds"), and refused logins.
func ClickHouseErrorNames() []string {
	return []string{"TIMEOUT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "SERVER_OVERLOADED",
		"SETTING_CONSTRAINT_VIOLATION", "AUTHENTICATION_FAILED", "ACCESS_DENIED"}
}

// ClickHouseErrors reads how often each of ClickHouseErrorNames occurred since the
// server started (its system.errors); a name it has not seen is absent.
type ClickHouseErrors func(ctx context.Context) (map[string]uint64, error)

// errorsScrapeTimeout bounds the read of a scrape: a busy server costs the scrape this
// series, never the others.
const errorsScrapeTimeout = 2 * time.Second

// WatchClickHouseErrors registers goldbridge_clickhouse_errors_total{error}, read at
// each scrape; a scrape that cannot read it has no such series (the others stay).
func (m *Metrics) WatchClickHouseErrors(read ClickHouseErrors) error {
	return m.Registry.Register(&chErrorsCollector{read: read, desc: prometheus.NewDesc(
		"goldbridge_clickhouse_errors_total",
		"Errors of the embedded ClickHouse since it started, by name: readers' queries past their bounds or refused by their queue, refused logins.",
		[]string{"error"}, nil)})
}

type chErrorsCollector struct {
	read ClickHouseErrors
	desc *prometheus.Desc
}

func (c *chErrorsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *chErrorsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), errorsScrapeTimeout)
	defer cancel()
	counts, err := c.read(ctx)
	if err != nil {
		return
	}
	for _, name := range ClickHouseErrorNames() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(counts[name]), name)
	}
}
