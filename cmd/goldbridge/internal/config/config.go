// Package config is the pipeline configuration of goldbridge: the YAML schema, its strict
// decoding with ${ENV} expansion, defaults and validation that reports every problem by path.
//
// Only cmd/goldbridge reads it; the layer packages take plain structs built from it.
package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"go.yaml.in/yaml/v3"
)

// Config is one pipeline file.
type Config struct {
	Version    int                 `yaml:"version"`
	Lakehouse  Lakehouse           `yaml:"lakehouse"`
	ClickHouse ClickHouse          `yaml:"clickhouse"`
	Sources    map[string]Source   `yaml:"sources"`
	Entities   map[string]Entity   `yaml:"entities"`
	Marts      map[string]Mart     `yaml:"marts"`
	Schedules  map[string]Schedule `yaml:"schedules"`
	// Maintenance keeps every table's cost flat over the years of runs (docs/operations.md).
	Maintenance Maintenance `yaml:"maintenance"`
	Server      Server      `yaml:"server"`
	Metrics     Metrics     `yaml:"metrics"`

	// StateDir is the absolute --state-dir the file was loaded with (not read from YAML).
	StateDir string `yaml:"-"`
}

// Lakehouse is the Iceberg side: catalog, warehouse and the layer namespaces.
type Lakehouse struct {
	Catalog    Catalog    `yaml:"catalog"`
	Warehouse  string     `yaml:"warehouse"`
	S3         S3         `yaml:"s3"`
	Namespaces Namespaces `yaml:"namespaces"`
	// Compression is each layer's Parquet codec (docs/config.md); "" is zstd level 1.
	Compression Compression `yaml:"compression"`
}

// Compression names the codec of each layer's data files: zstd, zstd:<level> (1-22),
// snappy, lz4raw or uncompressed.
type Compression struct {
	Bronze string `yaml:"bronze"`
	Silver string `yaml:"silver"`
	Gold   string `yaml:"gold"`
}

// Catalog selects the Iceberg catalog implementation.
type Catalog struct {
	Type       string            `yaml:"type"` // sql | rest
	URI        string            `yaml:"uri"`
	Name       string            `yaml:"name"`
	Properties map[string]Secret `yaml:"properties"`
	LeaseTTL   Duration          `yaml:"lease_ttl"` // shared (PostgreSQL) catalog: how long a worker's lease lives unrenewed
}

// S3 holds object-store settings for an s3:// warehouse (MinIO included).
type S3 struct {
	Endpoint        string `yaml:"endpoint"`
	Region          string `yaml:"region"`
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey Secret `yaml:"secret_access_key"`
	PathStyle       *bool  `yaml:"path_style"`
}

// Namespaces names the Iceberg namespace of each layer.
type Namespaces struct {
	Bronze string `yaml:"bronze"`
	Silver string `yaml:"silver"`
	Gold   string `yaml:"gold"`
}

// ClickHouse is the serving tier connection, or the embedded local server.
type ClickHouse struct {
	Embedded     *bool       `yaml:"embedded"`
	Local        LocalServer `yaml:"local"`
	Addresses    []string    `yaml:"addresses"`
	Protocol     string      `yaml:"protocol"` // native | http
	Database     string      `yaml:"database"`
	User         string      `yaml:"user"`
	Password     Secret      `yaml:"password"`
	PasswordFile string      `yaml:"password_file"`
	TLS          TLS         `yaml:"tls"`
	Cluster      string      `yaml:"cluster"`
	// Shards, with cluster, serve from shards of plain nodes (no Keeper): each entry the
	// host:port of every node of one shard, in the order of the cluster's remote_servers.
	Shards       [][]string        `yaml:"shards"`
	DialTimeout  Duration          `yaml:"dial_timeout"`
	MaxRetries   int               `yaml:"max_retries"`
	RetryBackoff Duration          `yaml:"retry_backoff"`
	Settings     map[string]string `yaml:"settings"`
}

// IsEmbedded reports whether goldbridge starts its own local ClickHouse (the default).
func (c ClickHouse) IsEmbedded() bool { return c.Embedded == nil || *c.Embedded }

// LocalServer configures the embedded ClickHouse started by goldbridge.
type LocalServer struct {
	Path string `yaml:"path"`
	// TCPPort and HTTPPort pin the server's ports; 0 leaves them to the state dir
	// (recorded in PortsFile).
	TCPPort  int `yaml:"tcp_port"`
	HTTPPort int `yaml:"http_port"`
	// PortsFile is set by goldbridge when it filled in a port left unset: the state
	// dir's file that records its own ports (<state-dir>/clickhouse.ports).
	PortsFile       string `yaml:"-"`
	MaxServerMemory int64  `yaml:"max_server_memory"`
	// Readers are read-only users (BI tools, Grafana) of the served database.
	Readers []LocalReader `yaml:"readers"`
	// ReaderQueries is how many of the readers' queries run at once, the others
	// waiting their turn; 0 = chlocal.DefaultReaderQueries (docs/serving.md).
	ReaderQueries int `yaml:"reader_queries"`
	// ReaderTimeout and ReaderMemory bound each reader's query (time, bytes); 0 =
	// chlocal.DefaultReaderTimeout, chlocal.DefaultReaderMemory (docs/serving.md).
	ReaderTimeout Duration `yaml:"reader_timeout"`
	ReaderMemory  int64    `yaml:"reader_memory"`
}

// LocalReader is a read-only user of the embedded server; without a password, one is
// generated into <state-dir>/clickhouse-<name>.password.
type LocalReader struct {
	Name         string `yaml:"name"`
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
}

// TLS configures a TLS client connection.
type TLS struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Source is where raw records come from: a landing directory or a Kafka topic.
type Source struct {
	Type   string `yaml:"type"`   // file | kafka
	System string `yaml:"system"` // _source_system = {system}_{type}

	// file
	Path        string `yaml:"path"`
	Pattern     string `yaml:"pattern"`
	Format      string `yaml:"format"`      // jsonl | csv | parquet (default: by extension)
	Compression string `yaml:"compression"` // auto | none | gzip | zstd
	CSV         CSV    `yaml:"csv"`
	// Settle is how long a landing file must stay unchanged before it is read.
	Settle *Duration `yaml:"settle"`
	// TailWait is how long an unterminated last line of an uncompressed JSON Lines file
	// waits for its newline before it is read as the file's last line.
	TailWait *Duration `yaml:"tail_wait"`

	// kafka
	Brokers     []string `yaml:"brokers"`
	Topic       string   `yaml:"topic"`
	Group       string   `yaml:"group"`
	StartOffset string   `yaml:"start_offset"` // earliest | latest
	SASL        SASL     `yaml:"sasl"`
	TLS         TLS      `yaml:"tls"`
}

// CSV configures CSV parsing.
type CSV struct {
	Delimiter string `yaml:"delimiter"`
	// NullValues are the field texts read as NULL (unset: the empty field; [] for none).
	NullValues *[]string `yaml:"null_values"`
}

// SASL configures Kafka authentication.
type SASL struct {
	Mechanism string `yaml:"mechanism"` // plain | scram-sha-256 | scram-sha-512
	User      string `yaml:"user"`
	Password  Secret `yaml:"password"`
}

// Entity is one business entity: its sources, its Bronze table and its Silver model.
type Entity struct {
	Sources []string `yaml:"sources"`
	Bronze  Bronze   `yaml:"bronze"`
	Silver  Silver   `yaml:"silver"`
	PII     *PII     `yaml:"pii"`
}

// PII turns on crypto-shredding for an entity (docs/privacy.md): the listed top-level
// payload fields are encrypted at ingest with a key of the subject, kept in the
// embedded catalog database.
type PII struct {
	Subject string   `yaml:"subject"` // top-level payload key naming the person: $.user_id or user_id
	Fields  []string `yaml:"fields"`  // top-level payload keys to encrypt: $.email
}

// Bronze configures the append-only raw table.
type Bronze struct {
	Table     string `yaml:"table"`
	BatchRows int    `yaml:"batch_rows"`
}

// Silver configures parsing, typing, rules, quarantine and the dedup/merge of an entity.
type Silver struct {
	Table           string              `yaml:"table"`
	QuarantineTable string              `yaml:"quarantine_table"`
	Mode            string              `yaml:"mode"`     // upsert | append
	Identity        string              `yaml:"identity"` // append: key (default) | delivery
	Key             []string            `yaml:"key"`
	UpdatedAt       string              `yaml:"updated_at"` // ordering column (upsert)
	Op              string              `yaml:"op"`         // CDC op column (upsert); values c/u/d/r
	OpValues        map[string][]string `yaml:"op_values"`
	EventTime       string              `yaml:"event_time"` // partition/lookback column (append)
	Lookback        Duration            `yaml:"lookback"`
	KeysTable       string              `yaml:"keys_table"`
	Buckets         int                 `yaml:"buckets"`
	PassRows        int64               `yaml:"pass_rows"`  // Bronze rows per pass over key groups (0: silver.DefaultPassRows, -1: one pass)
	PassBytes       ByteSize            `yaml:"pass_bytes"` // what one pass's winners hold at most, e.g. 2GiB (0: silver.DefaultPassBytes, -1: no bound)
	SortBy          []string            `yaml:"sort_by"`    // columns the data files are sorted by (e.g. a mart's grain)
	// IgnoredFields are top-level payload fields the entity does not read on purpose:
	// not reported as undeclared (silver.EntitySpec.IgnoredFields).
	IgnoredFields []string  `yaml:"ignored_fields"`
	Columns       []Column  `yaml:"columns"`
	Rules         []Rule    `yaml:"rules"`
	Quality       Quality   `yaml:"quality"`
	Format        string    `yaml:"format"`   // json | debezium: how payloads are read
	Debezium      *Debezium `yaml:"debezium"` // with format: debezium
}

// Debezium reads an entity's payloads as Debezium change events (silver.DebeziumSpec).
type Debezium struct {
	Connector       string `yaml:"connector"`        // postgresql | mysql | sqlserver: the position's fields
	DecimalHandling string `yaml:"decimal_handling"` // precise | string | double: the connector's decimal.handling.mode
}

// Column is one typed Silver column read from the payload.
type Column struct {
	Name     string  `yaml:"name"`
	Path     string  `yaml:"path"` // JSON path in the payload, default $.<name>
	Type     string  `yaml:"type"` // string, int32, int64, float64, decimal(p,s), bool, date, timestamp
	Required bool    `yaml:"required"`
	Default  *string `yaml:"default"`
	Format   string  `yaml:"format"` // timestamps: rfc3339 | epoch_s | epoch_ms | epoch_us | epoch_ns | Go layout; dates also epoch_days
	// RenamedFrom is the column's earlier name, renamed in place in the Silver table.
	RenamedFrom string `yaml:"renamed_from"`
}

// Rule is one entry of the transformation registry (F* filter, N* normalise, E* enrich).
type Rule struct {
	ID     string  `yaml:"id"`
	Kind   string  `yaml:"kind"` // filter | normalize | derive | lookup
	Expr   string  `yaml:"expr"`
	Column string  `yaml:"column"`
	Type   string  `yaml:"type"`
	Reason string  `yaml:"reason"`
	Lookup *Lookup `yaml:"lookup"`
}

// Lookup is a LEFT JOIN enrichment against another Silver entity or a CSV reference file.
type Lookup struct {
	Entity string            `yaml:"entity"`
	File   string            `yaml:"file"`
	On     map[string]string `yaml:"on"` // this column -> lookup column
	// Columns are the columns brought in: a list of the lookup's names (kept), or a
	// mapping new name -> lookup column (renamed), in the order written.
	Columns LookupColumns `yaml:"columns"`
	// OnChange is what a run does when the lookup changed and stored rows hold the old
	// enrichment: replay (the default: Silver is rebuilt from Bronze) or fail.
	OnChange string `yaml:"on_change"`
}

// LookupColumn is one column a lookup brings: From in the lookup source, As in Silver.
type LookupColumn struct{ As, From string }

// LookupColumns is a lookup's columns, decoded from a list or from a mapping.
type LookupColumns []LookupColumn

// Names are the Silver names of the columns.
func (lc LookupColumns) Names() []string {
	out := make([]string, len(lc))
	for i, c := range lc {
		out[i] = c.As
	}
	return out
}

// decodeNode reads a list of names or a mapping new name -> lookup column.
func (lc *LookupColumns) decodeNode(d *decoder, path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.SequenceNode:
		for i, item := range n.Content {
			var name string
			d.decode(fmt.Sprintf("%s[%d]", path, i), item, reflect.ValueOf(&name).Elem())
			*lc = append(*lc, LookupColumn{As: name, From: name})
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			var from string
			d.decode(join(path, n.Content[i].Value), n.Content[i+1], reflect.ValueOf(&from).Elem())
			*lc = append(*lc, LookupColumn{As: n.Content[i].Value, From: from})
		}
	default:
		d.addf(path, n, "expected a list of names or a mapping new name: lookup column, got %s", kindName(n))
	}
}

// Quality sets the thresholds of the Silver aggregate checks and the severity of the
// row, schema and balance checks.
type Quality struct {
	WarnQuarantinePct *float64 `yaml:"warn_quarantine_pct"`
	WarnDuplicatePct  *float64 `yaml:"warn_duplicate_pct"`
	// FailQuarantinePct is the quarantine gate (silver.EntitySpec.FailQuarantinePct).
	FailQuarantinePct *float64        `yaml:"fail_quarantine_pct"`
	Severity          QualitySeverity `yaml:"severity"`
}

// QualitySeverity is critical or warning per Silver check (silver.EntitySpec.Severity).
type QualitySeverity struct {
	Rows    string `yaml:"rows"`    // a written row fails a filter rule or a not-null column
	Schema  string `yaml:"schema"`  // the table's columns differ from the declared ones
	Balance string `yaml:"balance"` // the run's counts do not add up
	// Undeclared: the payloads carry top-level fields no column reads (default warning).
	Undeclared string `yaml:"undeclared"`
}

// Mart is one Gold KPI mart and how it is served from ClickHouse.
type Mart struct {
	Source       string     `yaml:"source"`
	Joins        []Join     `yaml:"joins"`
	Table        string     `yaml:"table"`
	Mode         string     `yaml:"mode"`      // incremental | snapshot
	OnChange     string     `yaml:"on_change"` // rebuild | fail: when the definition changed since Gold was built
	PassRows     int64      `yaml:"pass_rows"` // Silver rows per pass of a full build (0: gold.DefaultPassRows, -1: one pass)
	Filter       string     `yaml:"filter"`
	Grain        Grain      `yaml:"grain"`
	Dimensions   []string   `yaml:"dimensions"`
	Grouping     string     `yaml:"grouping"` // none | rollup | cube | sets
	GroupingSets [][]string `yaml:"grouping_sets"`
	Measures     []Measure  `yaml:"measures"`
	Checks       []Check    `yaml:"checks"`
	Serving      Serving    `yaml:"serving"`
}

// Join denormalises another Silver entity into the mart's rows.
type Join struct {
	Entity  string            `yaml:"entity"`
	Type    string            `yaml:"type"` // left | inner
	On      map[string]string `yaml:"on"`
	Columns []string          `yaml:"columns"`
}

// Grain is the time column of a mart, truncated to a unit; it is also the partition.
type Grain struct {
	Column string `yaml:"column"`
	Unit   string `yaml:"unit"` // hour | day | month
	As     string `yaml:"as"`
}

// Measure is one aggregate of a mart.
type Measure struct {
	Name      string    `yaml:"name"`
	Agg       string    `yaml:"agg"` // one of lakehouse/mart's Aggs (docs/gold.md)
	Column    string    `yaml:"column"`
	Quantiles []float64 `yaml:"quantiles"`
	If        string    `yaml:"if"` // count_if, sum_if, avg_if: the rows taken (a boolean expression over the mart's row columns)
	By        string    `yaml:"by"` // max_by, min_by: the column whose largest or smallest value picks the row
}

// Check is one data-quality gateway check of a mart.
type Check struct {
	Name      string   `yaml:"name"`
	Type      string   `yaml:"type"` // expr | not_null | unique_grain | row_count_anomaly | consistency | null_grain
	Expr      string   `yaml:"expr"`
	Columns   []string `yaml:"columns"`
	Severity  string   `yaml:"severity"` // critical | warning
	Trailing  int      `yaml:"trailing"`
	Tolerance float64  `yaml:"tolerance"`
}

// Serving configures the hot ClickHouse copy of a mart.
type Serving struct {
	Enabled   *bool    `yaml:"enabled"`
	Table     string   `yaml:"table"`
	HotWindow Duration `yaml:"hot_window"`
	// HotWindowAnchor is what hot_window counts back from: clock (today) | data (the
	// newest Gold partition).
	HotWindowAnchor string   `yaml:"hot_window_anchor"`
	PartitionBy     string   `yaml:"partition_by"` // day | month
	TTL             Duration `yaml:"ttl"`
	BatchRows       int      `yaml:"batch_rows"`
	Parallelism     int      `yaml:"parallelism"`
	Distinct        string   `yaml:"distinct"` // uniqExact | uniq | bitmap
	// Windows are the rolling windows served finished in <table>_windows (docs/bi.md).
	Windows Windows `yaml:"windows"`
}

// Windows declares a day mart's rolling windows: their lengths in days and the grouping
// levels windowed (none listed: every level).
type Windows struct {
	Days   []int    `yaml:"days"`
	Levels []string `yaml:"levels"`
}

// IsEnabled reports whether the mart is pushed to ClickHouse (the default).
func (s Serving) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// Schedule runs stages on a cron spec inside `goldbridge serve`.
type Schedule struct {
	Cron     string   `yaml:"cron"`
	Timezone string   `yaml:"timezone"`
	Stages   []string `yaml:"stages"` // ingest | silver | gold | sync | check
	Entities []string `yaml:"entities"`
	Marts    []string `yaml:"marts"`
}

// Maintenance is the table maintenance that run and serve do after their stages
// (`goldbridge maintain` by hand): expire snapshots, compact small files, merge
// manifests, bound the metadata log. Its policy applies to every table; Tables
// overrides it per table ("silver.orders") or per layer ("bronze", "silver", "gold").
type Maintenance struct {
	Enabled *bool `yaml:"enabled"`
	// Every is the least time between two maintenances by run and serve (0: each run).
	Every             Duration `yaml:"every"`
	MaintenancePolicy `yaml:",inline"`
	Tables            map[string]MaintenancePolicy `yaml:"tables"`
}

// IsEnabled reports whether run and serve maintain the tables (the default).
func (m Maintenance) IsEnabled() bool { return m.Enabled == nil || *m.Enabled }

// MaintenancePolicy is what a table keeps; unset fields take the enclosing value.
type MaintenancePolicy struct {
	RetainAge        *Duration `yaml:"retain_age"`        // snapshots younger than this are kept
	RetainMin        *int      `yaml:"retain_min"`        // and at least this many of the newest
	MaxFiles         *int      `yaml:"max_files"`         // files in a partition before it is compacted
	MaxDeleteFiles   *int      `yaml:"max_delete_files"`  // Silver delete files before compaction
	MaxManifests     *int      `yaml:"max_manifests"`     // data manifests before they are merged
	MetadataVersions *int      `yaml:"metadata_versions"` // previous metadata files kept
}

// Override returns p with the fields o sets replaced.
func (p MaintenancePolicy) Override(o MaintenancePolicy) MaintenancePolicy {
	pick := func(dst **int, src *int) {
		if src != nil {
			*dst = src
		}
	}
	if o.RetainAge != nil {
		p.RetainAge = o.RetainAge
	}
	pick(&p.RetainMin, o.RetainMin)
	pick(&p.MaxFiles, o.MaxFiles)
	pick(&p.MaxDeleteFiles, o.MaxDeleteFiles)
	pick(&p.MaxManifests, o.MaxManifests)
	pick(&p.MetadataVersions, o.MetadataVersions)
	return p
}

// Server configures the HTTP endpoint of `goldbridge serve`.
type Server struct {
	Listen          string   `yaml:"listen"`
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
}

// Metrics configures where one-shot runs leave their metrics.
type Metrics struct {
	Textfile    string `yaml:"textfile"`
	Pushgateway string `yaml:"pushgateway"`
	Job         string `yaml:"job"`
}

// Secret is a string that never prints its value (logs, errors, %v).
type Secret string

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "******"
}

// GoString hides the value from %#v.
func (s Secret) GoString() string { return `config.Secret("******")` }

// Reveal returns the secret value; call it only where the value is handed to a client.
func (s Secret) Reveal() string { return string(s) }

// Duration is a time.Duration that also accepts days ("90d", "1d12h").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// ParseDuration parses Go durations plus a leading whole-day part ("90d", "2d6h").
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		var n int64
		for _, c := range s[:i] {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
			n = n*10 + int64(c-'0')
			if n > 1<<20 {
				return 0, fmt.Errorf("duration %q too large", s)
			}
		}
		days, s = n, s[i+1:]
	}
	var rest time.Duration
	if s != "" {
		var err error
		if rest, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("invalid duration %q (use 90d, 26h, 15m, 1d12h)", s)
		}
	}
	d := time.Duration(days)*24*time.Hour + rest
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	return Duration(d), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// String formats the duration, in days when it is a whole number of days.
func (d Duration) String() string {
	td := time.Duration(d)
	if td > 0 && td%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", td/(24*time.Hour))
	}
	return td.String()
}

// ByteSize is a number of bytes, written as one ("1500000000") or with a unit ("1.5GB",
// "2GiB", "512MiB"; go-humanize's ParseBytes). -1 is kept as -1 (no bound).
type ByteSize int64

// UnmarshalText parses a byte size.
func (b *ByteSize) UnmarshalText(t []byte) error {
	s := strings.TrimSpace(string(t))
	if s == "-1" {
		*b = -1
		return nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("byte size %q: want a number of bytes, e.g. 2GiB or 512MB", s)
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("byte size %q too large", s)
	}
	*b = ByteSize(n)
	return nil
}

// TableNames lists every lake table of the pipeline: each entity's Bronze, Silver,
// quarantine and keys tables, and each mart's Gold table, sorted.
func (c *Config) TableNames() []string {
	var out []string
	for _, e := range c.Entities {
		out = append(out, e.Bronze.Table, e.Silver.Table, e.Silver.QuarantineTable)
		if e.Silver.KeysTable != "" {
			out = append(out, e.Silver.KeysTable)
		}
	}
	for _, m := range c.Marts {
		out = append(out, m.Table)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// MaintenanceOf is the maintenance policy of table ident of layer: the pipeline's,
// overridden by the layer's entry of maintenance.tables, then by the table's.
func (c *Config) MaintenanceOf(ident, layer string) MaintenancePolicy {
	p := c.Maintenance.MaintenancePolicy
	if o, ok := c.Maintenance.Tables[layer]; ok {
		p = p.Override(o)
	}
	if o, ok := c.Maintenance.Tables[ident]; ok {
		p = p.Override(o)
	}
	return p
}
