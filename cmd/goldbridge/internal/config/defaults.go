package config

import (
	"path/filepath"
	"time"

	"goldbridge/lakehouse/silver"
)

// Defaults of the embedded stack and of every optional setting; docs/config.md lists them.
const (
	DefaultCatalogName              = "goldbridge"
	DefaultCHDatabase               = "marts"
	DefaultCHLocalUser              = "goldbridge" // the embedded server's admin; "default" is clickhouse-local's own
	DefaultBatchRows                = 100_000
	DefaultBronzeBatchRows          = 16_384 // small Arrow batches keep ingestion memory flat
	DefaultBuckets                  = 16
	DefaultHotWindow                = Duration(90 * 24 * time.Hour)
	DefaultQualityWarnPct           = 5.0
	DefaultSettle                   = 5 * time.Second // sources.<name>.settle
	DefaultTailWait                 = time.Hour       // sources.<name>.tail_wait
	DefaultQualityFailQuarantinePct = 50.0            // entities.<name>.silver.quality.fail_quarantine_pct
	DefaultQualitySeverity          = "critical"      // entities.<name>.silver.quality.severity.*
	DefaultUndeclaredSeverity       = "warning"       // entities.<name>.silver.quality.severity.undeclared
	DefaultAnomalyTrailing          = 7
	DefaultAnomalyTolerance         = 0.5
	DefaultListen                   = "127.0.0.1:9464"

	// maintenance.*: what every table keeps (lakehouse/maintain.DefaultPolicy).
	DefaultRetainAge        = Duration(time.Hour)
	DefaultRetainMin        = 5
	DefaultMaxFiles         = 8
	DefaultMaxDeleteFiles   = 16
	DefaultMaxManifests     = 16
	DefaultMetadataVersions = 20
)

// The embedded server's fixed ports before every state dir had its own: a state dir that
// already holds ClickHouse data keeps them while they are free, so that the dashboards
// pointed at them keep working (cmd/goldbridge, localPorts).
const (
	LegacyCHLocalTCPPort  = 19000
	LegacyCHLocalHTTPPort = 18123
)

func (c *Config) applyDefaults() {
	if c.Version == 0 {
		c.Version = 1
	}
	lh := &c.Lakehouse
	if lh.Catalog.Type == "" {
		lh.Catalog.Type = "sql"
	}
	if lh.Catalog.Type == "sql" && lh.Catalog.URI == "" {
		lh.Catalog.URI = filepath.Join(c.StateDir, "catalog.db")
	}
	if lh.Catalog.Name == "" {
		lh.Catalog.Name = DefaultCatalogName
	}
	if lh.Warehouse == "" {
		lh.Warehouse = "file://" + filepath.Join(c.StateDir, "warehouse")
	}
	if lh.S3.Region == "" {
		lh.S3.Region = "us-east-1"
	}
	setDefault(&lh.Namespaces.Bronze, "bronze")
	setDefault(&lh.Namespaces.Silver, "silver")
	setDefault(&lh.Namespaces.Gold, "gold")

	ch := &c.ClickHouse
	if ch.IsEmbedded() {
		setDefault(&ch.Local.Path, filepath.Join(c.StateDir, "clickhouse"))
		// Ports left unset are the state dir's own, chosen on first use and recorded
		// (cmd/goldbridge, localPorts): a fixed default would give every pipeline of a
		// host the same ports.
		setDefault(&ch.User, DefaultCHLocalUser)
	}
	setDefault(&ch.Protocol, "native")
	setDefault(&ch.Database, DefaultCHDatabase)
	setDefault(&ch.User, "default")
	if ch.DialTimeout == 0 {
		ch.DialTimeout = Duration(10 * time.Second)
	}
	if ch.MaxRetries == 0 {
		ch.MaxRetries = 5
	}
	if ch.RetryBackoff == 0 {
		ch.RetryBackoff = Duration(200 * time.Millisecond)
	}

	for name, s := range c.Sources {
		if s.Type == "file" {
			setDefault(&s.Compression, "auto")
			setDefault(&s.Pattern, "*")
			if s.Settle == nil {
				d := Duration(DefaultSettle)
				s.Settle = &d
			}
			if s.TailWait == nil {
				d := Duration(DefaultTailWait)
				s.TailWait = &d
			}
		}
		if s.Type == "kafka" {
			setDefault(&s.Group, "goldbridge-"+name)
			setDefault(&s.StartOffset, "earliest")
		}
		c.Sources[name] = s
	}

	for name, e := range c.Entities {
		setDefault(&e.Bronze.Table, lh.Namespaces.Bronze+"."+name)
		if e.Bronze.BatchRows == 0 {
			e.Bronze.BatchRows = DefaultBronzeBatchRows
		}
		sv := &e.Silver
		setDefault(&sv.Table, lh.Namespaces.Silver+"."+name)
		setDefault(&sv.QuarantineTable, lh.Namespaces.Silver+"."+name+"_quarantine")
		setDefault(&sv.Identity, "key")
		if sv.Buckets == 0 {
			sv.Buckets = DefaultBuckets
		}
		setDefault(&sv.Format, "json")
		if sv.Debezium != nil {
			setDefault(&sv.Debezium.DecimalHandling, silver.DecimalPrecise)
		}
		for i := range sv.Columns {
			setDefault(&sv.Columns[i].Path, "$."+sv.Columns[i].Name)
		}
		if sv.Quality.WarnQuarantinePct == nil {
			v := DefaultQualityWarnPct
			sv.Quality.WarnQuarantinePct = &v
		}
		if sv.Quality.FailQuarantinePct == nil {
			v := DefaultQualityFailQuarantinePct
			sv.Quality.FailQuarantinePct = &v
		}
		if sv.Quality.WarnDuplicatePct == nil {
			v := DefaultQualityWarnPct
			sv.Quality.WarnDuplicatePct = &v
		}
		for _, sev := range []*string{&sv.Quality.Severity.Rows, &sv.Quality.Severity.Schema, &sv.Quality.Severity.Balance} {
			setDefault(sev, DefaultQualitySeverity)
		}
		setDefault(&sv.Quality.Severity.Undeclared, DefaultUndeclaredSeverity)
		c.Entities[name] = e
	}

	for name, m := range c.Marts {
		setDefault(&m.Table, lh.Namespaces.Gold+"."+name)
		setDefault(&m.Mode, "incremental")
		setDefault(&m.OnChange, "rebuild")
		setDefault(&m.Grouping, "none")
		setDefault(&m.Grain.Unit, "day")
		if m.Grain.As == "" {
			switch m.Grain.Unit {
			case "hour":
				m.Grain.As = "report_hour"
			case "month":
				m.Grain.As = "report_month"
			default:
				m.Grain.As = "report_date"
			}
		}
		for i := range m.Joins {
			setDefault(&m.Joins[i].Type, "left")
		}
		for i := range m.Checks {
			ck := &m.Checks[i]
			setDefault(&ck.Severity, "critical")
			setDefault(&ck.Name, ck.Type)
			if ck.Type == "row_count_anomaly" {
				if ck.Trailing == 0 {
					ck.Trailing = DefaultAnomalyTrailing
				}
				if ck.Tolerance == 0 {
					ck.Tolerance = DefaultAnomalyTolerance
				}
			}
		}
		sv := &m.Serving
		setDefault(&sv.Table, name)
		if sv.HotWindow == 0 {
			sv.HotWindow = DefaultHotWindow
		}
		if m.Grain.Unit == "month" {
			setDefault(&sv.PartitionBy, "month")
		}
		setDefault(&sv.PartitionBy, "day")
		setDefault(&sv.HotWindowAnchor, "clock")
		if sv.TTL == 0 && sv.HotWindowAnchor != "data" {
			// No TTL with the data anchor: it counts from the server's clock and would
			// delete a backfill the window serves.
			sv.TTL = sv.HotWindow + Duration(30*24*time.Hour)
		}
		if sv.BatchRows == 0 {
			sv.BatchRows = DefaultBatchRows
		}
		if sv.Parallelism == 0 {
			sv.Parallelism = 2
		}
		setDefault(&sv.Distinct, "uniqExact")
		c.Marts[name] = m
	}

	for name, s := range c.Schedules {
		setDefault(&s.Timezone, "UTC")
		c.Schedules[name] = s
	}
	setDefault(&c.Server.Listen, DefaultListen)
	mp := &c.Maintenance.MaintenancePolicy
	setPtr(&mp.RetainAge, DefaultRetainAge)
	setPtr(&mp.RetainMin, DefaultRetainMin)
	setPtr(&mp.MaxFiles, DefaultMaxFiles)
	setPtr(&mp.MaxDeleteFiles, DefaultMaxDeleteFiles)
	setPtr(&mp.MaxManifests, DefaultMaxManifests)
	setPtr(&mp.MetadataVersions, DefaultMetadataVersions)
	if c.Server.ShutdownTimeout == 0 {
		c.Server.ShutdownTimeout = Duration(30 * time.Second)
	}
	setDefault(&c.Metrics.Job, "goldbridge")
}

func setDefault(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

// setPtr points *p at v when it is unset.
func setPtr[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}
