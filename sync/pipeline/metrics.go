// Metrics: goldbridge's Prometheus metrics (names goldbridge_*, labels only stage, entity,
// mart, outcome, tier, check, severity, table, layer, field: an undeclared payload
// field, at most silver.MaxUndeclaredFields per entity, and error: one of
// ClickHouseErrorNames) on a private registry.

package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is the set of goldbridge metrics and the registry that holds them.
type Metrics struct {
	Registry *prometheus.Registry

	StageDuration *prometheus.HistogramVec // stage, outcome
	Runs          *prometheus.CounterVec   // stage, outcome (success, failure, circuit_open)
	Rows          *prometheus.CounterVec   // stage, entity, mart, outcome
	LastSuccess   *prometheus.GaugeVec     // stage, entity, mart
	DataNewest    *prometheus.GaugeVec     // mart, tier (gold, clickhouse): newest grain, unix seconds
	SyncLag       *prometheus.GaugeVec     // mart
	DQFailures    *prometheus.CounterVec   // mart, check, severity
	CircuitOpen   *prometheus.GaugeVec     // mart
	Drift         *prometheus.GaugeVec     // mart: partitions that differ between tiers
	HotPartitions *prometheus.GaugeVec     // mart, tier
	SkippedRuns   prometheus.Counter       // scheduled runs skipped because the previous one still ran
	CalculatedAt  *prometheus.GaugeVec     // mart: last successful Gold calculation, unix seconds
	// FilesQuarantined is the number of landing files of an entity that could not be read.
	FilesQuarantined *prometheus.GaugeVec // entity
	// QuarantineGate is 1 while an entity's last Silver run was stopped by its quarantine gate.
	QuarantineGate *prometheus.GaugeVec // entity
	// SilverCheckFailures counts the failed row, schema and balance checks of Silver runs.
	SilverCheckFailures *prometheus.CounterVec // entity, check, severity
	// SilverUndeclared is the rows of an entity's last Silver run that read rows carrying
	// a top-level payload field the spec does not read; field "" holds the occurrences of
	// the names beyond silver.MaxUndeclaredFields. Replaced whole by each such run.
	SilverUndeclared *prometheus.GaugeVec // entity, field
	// EmbeddedRestarts counts restarts of the embedded ClickHouse after it exited on its own.
	EmbeddedRestarts prometheus.Counter
	// What each lake table costs a reader, after the last maintenance (table, layer).
	TableSnapshots     *prometheus.GaugeVec
	TableDataFiles     *prometheus.GaugeVec
	TableDeleteFiles   *prometheus.GaugeVec
	TableManifests     *prometheus.GaugeVec
	TableMetadataBytes *prometheus.GaugeVec
	// MaintenanceLastSuccess is the unix time of a table's last successful maintenance (table).
	MaintenanceLastSuccess *prometheus.GaugeVec
	// What a mart's served table holds on ClickHouse's disk, read after each sync that
	// reached ClickHouse (push.Storage).
	CHParts         *prometheus.GaugeVec // mart: active parts of the served table and its windows
	CHBytes         *prometheus.GaugeVec // mart: their bytes on disk
	CHInactiveParts *prometheus.GaugeVec // mart: parts of its tables still on disk that no reader reads
	CHInactiveBytes *prometheus.GaugeVec // mart: their bytes
	CHDictKeys      *prometheus.GaugeVec // mart: entries of a bitmap mart's key dictionary
	CHDictBytes     *prometheus.GaugeVec // mart: their bytes on disk
	// The embedded ClickHouse's data directory, measured after each sync
	// (chlocal.DiskUsage); no labels, absent without an embedded server.
	CHDataPartDirs *prometheus.GaugeVec
	CHDataBytes    *prometheus.GaugeVec
}

// NewMetrics registers every goldbridge metric plus the Go and process collectors.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		StageDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "goldbridge_stage_duration_seconds", Help: "Duration of one pipeline stage run.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"stage", "outcome"}),
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "goldbridge_runs_total", Help: "Stage runs by outcome (success, failure, circuit_open).",
		}, []string{"stage", "outcome"}),
		Rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "goldbridge_rows_total", Help: "Rows by stage and outcome (ingested, quarantined, duplicate, superseded, merged, computed, null_grain, pushed).",
		}, []string{"stage", "entity", "mart", "outcome"}),
		LastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_last_success_timestamp_seconds", Help: "Unix time of the last successful run of a stage for an entity or mart.",
		}, []string{"stage", "entity", "mart"}),
		DataNewest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_data_newest_timestamp_seconds", Help: "Newest grain value of a mart per tier (gold = Iceberg, clickhouse = hot tier), unix time.",
		}, []string{"mart", "tier"}),
		SyncLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_sync_lag_seconds", Help: "Age of the newest Gold snapshot not yet in ClickHouse; 0 when in sync.",
		}, []string{"mart"}),
		DQFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "goldbridge_dq_check_failures_total", Help: "Failed data-quality checks by mart, check and severity.",
		}, []string{"mart", "check", "severity"}),
		CircuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_circuit_open", Help: "1 while a mart's circuit is open (a critical check failed; nothing is published).",
		}, []string{"mart"}),
		Drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_reconciliation_drift_partitions", Help: "Hot partitions whose ClickHouse content differs from Gold at the last check.",
		}, []string{"mart"}),
		HotPartitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_hot_partitions", Help: "Partitions of a mart in the hot window, per tier.",
		}, []string{"mart", "tier"}),
		SkippedRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "goldbridge_skipped_overlapping_runs_total", Help: "Scheduled runs skipped because the previous run was still going.",
		}),
		CalculatedAt: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_gold_calculated_timestamp_seconds", Help: "Unix time of a mart's last successful Gold calculation (_calculated_at).",
		}, []string{"mart"}),
		FilesQuarantined: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_quarantined_files", Help: "Landing files of an entity that could not be read and are skipped until they change.",
		}, []string{"entity"}),
		QuarantineGate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_silver_quarantine_gate", Help: "1 while an entity's last Silver run quarantined more than fail_quarantine_pct and committed nothing.",
		}, []string{"entity"}),
		SilverCheckFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "goldbridge_silver_check_failures_total", Help: "Failed Silver quality checks (rows, schema, balance) by entity and severity; a critical one committed nothing.",
		}, []string{"entity", "check", "severity"}),
		SilverUndeclared: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_silver_undeclared_fields", Help: "Rows of an entity's last Silver run (that read rows) carrying a top-level payload field no column reads (field \"\": names beyond the first 100).",
		}, []string{"entity", "field"}),
		EmbeddedRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "goldbridge_clickhouse_restarts_total", Help: "Restarts of the embedded ClickHouse after its process exited on its own (a crash).",
		}),
		TableSnapshots:     tableGauge("goldbridge_table_snapshots", "Snapshots a lake table keeps (bounded by maintenance.retain_age and retain_min)."),
		TableDataFiles:     tableGauge("goldbridge_table_data_files", "Live data files of a lake table's current snapshot."),
		TableDeleteFiles:   tableGauge("goldbridge_table_delete_files", "Live delete files of a lake table's current snapshot (Silver's merge-on-read debt)."),
		TableManifests:     tableGauge("goldbridge_table_manifests", "Manifests (data and delete) of a lake table's current snapshot."),
		TableMetadataBytes: tableGauge("goldbridge_table_metadata_bytes", "Size of a lake table's current metadata file, bytes."),
		MaintenanceLastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_maintenance_last_success_timestamp_seconds", Help: "Unix time of a lake table's last successful maintenance.",
		}, []string{"table"}),
		CHParts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_clickhouse_parts", Help: "Active parts of a mart's served ClickHouse table and its rolling windows, after the last sync.",
		}, []string{"mart"}),
		CHBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_clickhouse_bytes", Help: "Bytes on disk of the active parts of a mart's served ClickHouse table and its rolling windows, after the last sync.",
		}, []string{"mart"}),
		CHInactiveParts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_clickhouse_inactive_parts", Help: "Parts of a mart's ClickHouse tables that no reader reads (replaced, dropped, merged away) still on disk, after the last sync.",
		}, []string{"mart"}),
		CHInactiveBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_clickhouse_inactive_bytes", Help: "Bytes on disk of those inactive parts, a file shared with an active part counted in both.",
		}, []string{"mart"}),
		CHDictKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_clickhouse_dictionary_keys", Help: "Entries of a bitmap mart's key dictionary in ClickHouse (the keys it numbers), after the last sync.",
		}, []string{"mart"}),
		CHDictBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_clickhouse_dictionary_bytes", Help: "Bytes on disk of the active parts of a bitmap mart's key dictionary, after the last sync.",
		}, []string{"mart"}),
		CHDataPartDirs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_clickhouse_data_part_directories", Help: "Part directories in the embedded ClickHouse's data directory, active or not, after the last sync.",
		}, nil),
		CHDataBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "goldbridge_clickhouse_data_bytes", Help: "Bytes of the files in the embedded ClickHouse's data directory (a hard-linked file once), after the last sync.",
		}, nil),
	}
	r.MustRegister(m.StageDuration, m.Runs, m.Rows, m.LastSuccess, m.DataNewest, m.SyncLag, m.DQFailures,
		m.CircuitOpen, m.Drift, m.HotPartitions, m.SkippedRuns, m.CalculatedAt, m.FilesQuarantined, m.QuarantineGate,
		m.SilverCheckFailures, m.SilverUndeclared, m.EmbeddedRestarts, m.TableSnapshots, m.TableDataFiles, m.TableDeleteFiles, m.TableManifests, m.TableMetadataBytes,
		m.MaintenanceLastSuccess, m.CHParts, m.CHBytes, m.CHInactiveParts, m.CHInactiveBytes, m.CHDictKeys, m.CHDictBytes, m.CHDataPartDirs, m.CHDataBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func tableGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"table", "layer"})
}
