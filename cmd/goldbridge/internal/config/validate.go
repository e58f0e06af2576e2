package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/robfig/cron/v3"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/ddl"
)

var (
	identRe     = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	chIdentRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	systemRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	decimalRe   = regexp.MustCompile(`^decimal\((\d+),\s*(\d+)\)$`)
	cronParser  = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	validStages = []string{"ingest", "silver", "gold", "sync", "check", "maintain"}
)

// Reserved column names that goldbridge adds to Silver and Gold tables itself; a
// declared name may not equal one of them in any case (see columnName).
var reservedColumns = append(silver.InternalNames(), mart.ColCalculatedAt, mart.ColGroupingLevel)

// colNameRe is a column name: as the source spells it, case kept (docs/config.md, "Names").
var colNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// tableColumns are the column names of one table seen so far, by their case-folded
// form: names are case-sensitive, but two names of one table that differ only by case
// are refused, since Iceberg readers and BI tools that fold case would see one column.
type tableColumns map[string]string // folded name -> the name as written

// columnName checks a column name of a table and records it in seen: a name
// (colNameRe) that ClickHouse accepts, not a column goldbridge adds (in any case), and
// not the same as another column of the table up to case. It reports whether the name
// is new in seen.
func (v *validator) columnName(path, name string, seen tableColumns, reserved []string) bool {
	switch {
	case !colNameRe.MatchString(name):
		v.add(path, "invalid column name %q (letters, digits and _, not starting with a digit)", name)
	case serving.CheckIdent("column", name) != nil:
		v.add(path, "column name %q is longer than ClickHouse accepts (%d bytes)", name, serving.MaxIdentLen)
	}
	folded := strings.ToLower(name)
	if i := slices.IndexFunc(reserved, func(r string) bool { return r == folded }); i >= 0 {
		v.add(path, "%q is a column goldbridge adds itself (%s; reserved in any case)", name, reserved[i])
	}
	prev, dup := seen[folded]
	switch {
	case dup && prev == name:
		v.add(path, "duplicate column %q", name)
	case dup:
		v.add(path, "column %q differs from column %q only by case (Iceberg readers and BI tools that fold case would see one column)", name, prev)
	default:
		seen[folded] = name
	}
	return !dup
}

// unknownColumn is the problem of a name that is no column of cols, with the column it
// matches up to case when there is one (names are case-sensitive).
func (v *validator) unknownColumn(path, name string, cols map[string]string) {
	for _, c := range sortedKeys(cols) {
		if strings.EqualFold(c, name) {
			v.add(path, "unknown column %q (names are case-sensitive: did you mean %q?)", name, c)
			return
		}
	}
	v.add(path, "unknown column %q", name)
}

type validator struct{ ps Problems }

func (v *validator) add(path, format string, args ...any) {
	v.ps = append(v.ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) required(path, val string) bool {
	if strings.TrimSpace(val) == "" {
		v.add(path, "required")
		return false
	}
	return true
}

func (v *validator) oneOf(path, val string, allowed ...string) {
	if !slices.Contains(allowed, val) {
		v.add(path, "must be one of %s, got %q", strings.Join(allowed, ", "), val)
	}
}

func (v *validator) tableIdent(path, val string) {
	ns, name, ok := strings.Cut(val, ".")
	if !ok || !identRe.MatchString(ns) || !identRe.MatchString(name) {
		v.add(path, "must be namespace.table in lower case (letters, digits, _), got %q", val)
	}
}

func (v *validator) exprSyntax(path, src string) {
	if _, err := expr.Compile(src); err != nil {
		v.add(path, "invalid expression: %s", firstLine(err.Error()))
	}
}

// exprTyped compiles a boolean expression over columns of the given kinds (ColumnKind),
// as the Gold stage does: an unknown name is a problem here, not at the first run. With
// no known columns (an unknown source, reported elsewhere) only the syntax is checked.
func (v *validator) exprTyped(path, src string, cols map[string]string) {
	if len(cols) == 0 {
		v.exprSyntax(path, src)
		return
	}
	env := make(map[string]any, len(cols))
	for name, kind := range cols {
		switch kind {
		case "string":
			env[name] = ""
		case "int":
			env[name] = 0
		case "float", "decimal":
			env[name] = 0.0
		case "bool":
			env[name] = false
		case "date", "timestamp":
			env[name] = time.Time{}
		default:
			env[name] = nil
		}
	}
	if _, err := expr.Compile(src, expr.Env(env), expr.AsBool()); err != nil {
		v.add(path, "invalid expression: %s", firstLine(err.Error()))
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Validate checks a defaulted config and returns every problem, ordered by path.
func (c *Config) Validate() Problems {
	v := &validator{}
	if c.Version != 1 {
		v.add("version", "unsupported version %d (this goldbridge reads version 1)", c.Version)
	}
	c.validateLakehouse(v)
	c.validateClickHouse(v)
	for _, name := range sortedKeys(c.Sources) {
		c.validateSource(v, name)
	}
	for _, name := range sortedKeys(c.Entities) {
		c.validateEntity(v, name)
	}
	for _, name := range sortedKeys(c.Marts) {
		c.validateMart(v, name)
	}
	for _, name := range sortedKeys(c.Schedules) {
		c.validateSchedule(v, name)
	}
	c.validateMaintenance(v)
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		v.add("server.listen", "must be host:port, got %q", c.Server.Listen)
	}
	if c.Metrics.Pushgateway != "" {
		v.url("metrics.pushgateway", c.Metrics.Pushgateway)
	}
	return v.ps
}

func (v *validator) url(path, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(path, "must be an http(s) URL")
	}
}

func (c *Config) validateLakehouse(v *validator) {
	lh := c.Lakehouse
	v.oneOf("lakehouse.catalog.type", lh.Catalog.Type, "sql", "rest")
	if lh.Catalog.Type == "rest" {
		if v.required("lakehouse.catalog.uri", lh.Catalog.URI) {
			v.url("lakehouse.catalog.uri", lh.Catalog.URI)
		}
	}
	if lh.Catalog.Type == "sql" {
		c.validateSQLCatalog(v)
	}
	if lh.Catalog.LeaseTTL != 0 && !(lh.Catalog.Type == "sql" && catalog.IsPostgresURI(lh.Catalog.URI)) {
		v.add("lakehouse.catalog.lease_ttl", "leases are kept in a shared postgres:// catalog only; this catalog is guarded by the state lock")
	}
	switch {
	case lh.Catalog.Type == "rest" && !strings.Contains(lh.Warehouse, "://"):
		// A REST catalog's warehouse may be a name the server resolves (SeaweedFS: the
		// table bucket); the server decides where the tables live.
	case strings.HasPrefix(lh.Warehouse, "file://"):
		if !strings.HasPrefix(strings.TrimPrefix(lh.Warehouse, "file://"), "/") {
			v.add("lakehouse.warehouse", "file:// warehouse must be an absolute path (use ${STATE_DIR}/warehouse)")
		}
	case strings.HasPrefix(lh.Warehouse, "s3://"):
		if strings.TrimPrefix(lh.Warehouse, "s3://") == "" {
			v.add("lakehouse.warehouse", "s3:// warehouse needs a bucket")
		}
		if lh.S3.Endpoint != "" {
			v.url("lakehouse.s3.endpoint", lh.S3.Endpoint)
		}
		if (lh.S3.AccessKeyID == "") != (lh.S3.SecretAccessKey == "") {
			v.add("lakehouse.s3", "access_key_id and secret_access_key go together")
		}
	default:
		v.add("lakehouse.warehouse", "must start with file:// or s3://")
	}
	for path, ns := range map[string]string{
		"lakehouse.namespaces.bronze": lh.Namespaces.Bronze,
		"lakehouse.namespaces.silver": lh.Namespaces.Silver,
		"lakehouse.namespaces.gold":   lh.Namespaces.Gold,
	} {
		if !identRe.MatchString(ns) {
			v.add(path, "invalid namespace %q", ns)
		}
	}
	for path, c := range map[string]string{
		"lakehouse.compression.bronze": lh.Compression.Bronze,
		"lakehouse.compression.silver": lh.Compression.Silver,
		"lakehouse.compression.gold":   lh.Compression.Gold,
	} {
		if _, err := catalog.ParseCodec(c); err != nil {
			v.add(path, "%v", err)
		}
	}
}

// validateSQLCatalog checks a sql catalog's URI: a SQLite file path, or a postgres://
// URI (the driver is chosen by the scheme; any other scheme is refused, not read as a
// file name). A Postgres catalog is shared by workers on other machines, so its
// warehouse must be named, not the default directory in this machine's state dir.
func (c *Config) validateSQLCatalog(v *validator) {
	lh := c.Lakehouse
	uri := lh.Catalog.URI
	if !catalog.IsPostgresURI(uri) {
		if scheme, _, ok := strings.Cut(uri, "://"); ok {
			v.add("lakehouse.catalog.uri", "unsupported scheme %q: a sql catalog is a SQLite file path or a postgres:// URI", scheme)
		}
		return
	}
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		v.add("lakehouse.catalog.uri", "want postgres://user@host:port/database (the password from PGPASSWORD or ${VAR})")
		return
	}
	if ttl := lh.Catalog.LeaseTTL.D(); ttl != 0 && (ttl < 10*time.Second || ttl > time.Hour) {
		v.add("lakehouse.catalog.lease_ttl", "want 10s to 1h (a lease is renewed every third of it), got %s", ttl)
	}
	if lh.Warehouse == "file://"+filepath.Join(c.StateDir, "warehouse") {
		v.add("lakehouse.warehouse", "a postgres catalog is shared by workers on other machines: name the warehouse (s3://bucket/prefix), not the default in this state dir")
	}
}

// validateShards checks clickhouse.shards: a cluster name (the nodes' remote_servers),
// and host:port nodes in every shard, each node once.
func validateShards(v *validator, ch ClickHouse) {
	if len(ch.Shards) == 0 {
		return
	}
	if ch.IsEmbedded() {
		v.add("clickhouse.shards", "the embedded server is a single node; set embedded: false")
	}
	if ch.Cluster == "" {
		v.add("clickhouse.cluster", "required with clickhouse.shards: the cluster of the nodes' remote_servers that <t>_dist reads")
	}
	seen := map[string]bool{}
	for i, nodes := range ch.Shards {
		if len(nodes) == 0 {
			v.add(fmt.Sprintf("clickhouse.shards[%d]", i), "a shard needs at least one node")
		}
		for j, a := range nodes {
			path := fmt.Sprintf("clickhouse.shards[%d][%d]", i, j)
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				v.add(path, "must be host:port, got %q", a)
			} else if seen[a] {
				v.add(path, "node %s is listed twice", a)
			}
			seen[a] = true
		}
	}
}

func (c *Config) validateClickHouse(v *validator) {
	ch := c.ClickHouse
	if ch.IsEmbedded() {
		if len(ch.Addresses) > 0 {
			v.add("clickhouse.addresses", "not used with embedded: true (set embedded: false for an external server)")
		}
		for path, p := range map[string]int{"clickhouse.local.tcp_port": ch.Local.TCPPort, "clickhouse.local.http_port": ch.Local.HTTPPort} {
			if p < 0 || p > 65535 { // 0: unset, the state dir's own
				v.add(path, "must be a port number, got %d", p)
			}
		}
		if ch.Local.TCPPort != 0 && ch.Local.TCPPort == ch.Local.HTTPPort {
			v.add("clickhouse.local.http_port", "must differ from tcp_port")
		}
		if ch.Cluster != "" {
			v.add("clickhouse.cluster", "the embedded server is a single node; set embedded: false")
		}
		if q := ch.Local.ReaderQueries; q < 0 || q > maxReaderQueries {
			v.add("clickhouse.local.reader_queries", "must be 0 (the default) to %d, got %d", maxReaderQueries, q)
		}
		validateReaderBounds(v, ch.Local)
		validateLocalUsers(v, ch)
	} else {
		if len(ch.Local.Readers) > 0 {
			v.add("clickhouse.local.readers", "only for the embedded server; create readers on your own server")
		}
		if ch.Local.ReaderQueries != 0 {
			v.add("clickhouse.local.reader_queries", "only for the embedded server; see docs/serving.md for your own server's workloads")
		}
		if ch.Local.ReaderTimeout != 0 {
			v.add("clickhouse.local.reader_timeout", "only for the embedded server; bound your own server's readers in their profile (docs/serving.md)")
		}
		if ch.Local.ReaderMemory != 0 {
			v.add("clickhouse.local.reader_memory", "only for the embedded server; bound your own server's readers in their profile (docs/serving.md)")
		}
		switch {
		case len(ch.Shards) > 0 && len(ch.Addresses) > 0:
			v.add("clickhouse.addresses", "not used with clickhouse.shards (the shards list every node)")
		case len(ch.Shards) == 0 && len(ch.Addresses) == 0:
			v.add("clickhouse.addresses", "required when embedded is false")
		}
		for i, a := range ch.Addresses {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				v.add(fmt.Sprintf("clickhouse.addresses[%d]", i), "must be host:port, got %q", a)
			}
		}
	}
	validateShards(v, ch)
	v.oneOf("clickhouse.protocol", ch.Protocol, "native", "http")
	if !chIdentRe.MatchString(ch.Database) {
		v.add("clickhouse.database", "invalid identifier %q", ch.Database)
	} else if err := serving.CheckNames(ch.Database, ""); err != nil {
		v.add("clickhouse.database", "%v", err)
	}
	if ch.Cluster != "" && !chIdentRe.MatchString(ch.Cluster) {
		v.add("clickhouse.cluster", "invalid identifier %q", ch.Cluster)
	}
	if ch.Password != "" && ch.PasswordFile != "" {
		v.add("clickhouse.password_file", "set password or password_file, not both")
	}
	validateTLS(v, "clickhouse.tls", ch.TLS)
	if ch.MaxRetries < 0 {
		v.add("clickhouse.max_retries", "must be >= 0")
	}
}

// validateReaderBounds checks clickhouse.local.reader_timeout and reader_memory.
func validateReaderBounds(v *validator, l LocalServer) {
	if d := l.ReaderTimeout.D(); d != 0 && (d < time.Second || d > maxReaderTimeout || d%time.Second != 0) {
		v.add("clickhouse.local.reader_timeout", "must be 0 (the default, %v) or whole seconds from 1s to %v, got %v", chlocal.DefaultReaderTimeout, maxReaderTimeout, d)
	}
	switch m := l.ReaderMemory; {
	case m == 0:
	case m < chlocal.MinReaderMemory:
		v.add("clickhouse.local.reader_memory", "must be 0 (the default, %d bytes) or at least %d bytes, got %d", chlocal.DefaultReaderMemory, chlocal.MinReaderMemory, m)
	case l.MaxServerMemory > 0 && m > l.MaxServerMemory:
		v.add("clickhouse.local.reader_memory", "must not exceed max_server_memory (%d), got %d", l.MaxServerMemory, m)
	}
}

// maxReaderTimeout bounds clickhouse.local.reader_timeout: a dashboard waits for no
// longer, and a slot of the readers' queue is held no longer.
const maxReaderTimeout = 24 * time.Hour

// maxReaderQueries bounds clickhouse.local.reader_queries: past a few per core, more
// queries at once only share the cores more finely.
const maxReaderQueries = 1024

// validateLocalUsers checks the embedded server's user names: identifiers, distinct, and
// not "default" (the user of clickhouse-local's own session, which nobody else may use).
func validateLocalUsers(v *validator, ch ClickHouse) {
	if ch.User == "default" {
		v.add("clickhouse.user", "the embedded server keeps \"default\" for its own session; use another name (default %s)", DefaultCHLocalUser)
	} else if !chIdentRe.MatchString(ch.User) {
		v.add("clickhouse.user", "invalid identifier %q", ch.User)
	}
	seen := map[string]bool{"default": true, ch.User: true}
	for i, r := range ch.Local.Readers {
		path := fmt.Sprintf("clickhouse.local.readers[%d]", i)
		switch {
		case !chIdentRe.MatchString(r.Name):
			v.add(path+".name", "invalid identifier %q", r.Name)
		case seen[r.Name]:
			v.add(path+".name", "%q is taken (by default, clickhouse.user or another reader)", r.Name)
		}
		seen[r.Name] = true
		if r.Password != "" && r.PasswordFile != "" {
			v.add(path+".password_file", "set password or password_file, not both")
		}
	}
}

func validateTLS(v *validator, path string, t TLS) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add(path, "cert_file and key_file go together")
	}
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.ServerName != "") {
		v.add(path+".enabled", "TLS files are set but enabled is false")
	}
}

// Bounds of sources.<name>.csv.null_values.
const maxCSVNulls, maxCSVNullText = 64, 256

func (c *Config) validateSource(v *validator, name string) {
	p := "sources." + name
	s := c.Sources[name]
	if !identRe.MatchString(name) {
		v.add(p, "invalid source name (lower case letters, digits, _)")
	}
	if v.required(p+".system", s.System) && !systemRe.MatchString(s.System) {
		v.add(p+".system", "invalid system name %q (lower case letters, digits, _ and -)", s.System)
	}
	switch s.Type {
	case "file":
		v.required(p+".path", s.Path)
		if s.Format != "" {
			v.oneOf(p+".format", s.Format, "jsonl", "csv", "parquet")
		}
		v.oneOf(p+".compression", s.Compression, "auto", "none", "gzip", "zstd")
		if len(s.CSV.Delimiter) > 1 {
			v.add(p+".csv.delimiter", "must be one character")
		}
		if nv := s.CSV.NullValues; nv != nil {
			if len(*nv) > maxCSVNulls {
				v.add(p+".csv.null_values", "at most %d values", maxCSVNulls)
			}
			for i, t := range *nv {
				if len(t) > maxCSVNullText {
					v.add(fmt.Sprintf("%s.csv.null_values[%d]", p, i), "longer than %d bytes", maxCSVNullText)
				}
			}
		}
		if s.Settle != nil && (*s.Settle < 0 || s.Settle.D() > time.Hour) {
			v.add(p+".settle", "must be between 0s and 1h")
		}
		if s.TailWait != nil && (*s.TailWait < 0 || s.TailWait.D() > 7*24*time.Hour) {
			v.add(p+".tail_wait", "must be between 0s and 7d")
		}
		if len(s.Brokers) > 0 || s.Topic != "" {
			v.add(p, "brokers/topic are Kafka settings; this source has type file")
		}
	case "kafka":
		if len(s.Brokers) == 0 {
			v.add(p+".brokers", "required")
		}
		v.required(p+".topic", s.Topic)
		v.oneOf(p+".start_offset", s.StartOffset, "earliest", "latest")
		if s.SASL.Mechanism != "" {
			v.oneOf(p+".sasl.mechanism", s.SASL.Mechanism, "plain", "scram-sha-256", "scram-sha-512")
			v.required(p+".sasl.user", s.SASL.User)
		}
		validateTLS(v, p+".tls", s.TLS)
		if s.Path != "" {
			v.add(p+".path", "a file setting; this source has type kafka")
		}
	case "":
		v.add(p+".type", "required (file or kafka)")
	default:
		v.add(p+".type", "must be one of file, kafka, got %q", s.Type)
	}
}

// ColumnKind classifies a declared column type: "string", "int", "float", "decimal",
// "bool", "date", "timestamp", or "" when invalid.
func ColumnKind(typ string) string {
	switch typ {
	case "string":
		return "string"
	case "int32", "int64":
		return "int"
	case "float64":
		return "float"
	case "bool":
		return "bool"
	case "date":
		return "date"
	case "timestamp":
		return "timestamp"
	}
	if m := decimalRe.FindStringSubmatch(typ); m != nil {
		p, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[2])
		if p >= 1 && p <= 38 && s <= p {
			return "decimal"
		}
	}
	return ""
}

func (c *Config) validateEntity(v *validator, name string) {
	p := "entities." + name
	e := c.Entities[name]
	if !identRe.MatchString(name) {
		v.add(p, "invalid entity name (lower case letters, digits, _)")
	}
	if len(e.Sources) == 0 {
		v.add(p+".sources", "required")
	}
	for i, s := range e.Sources {
		if _, ok := c.Sources[s]; !ok {
			v.add(fmt.Sprintf("%s.sources[%d]", p, i), "unknown source %q", s)
		}
	}
	v.tableIdent(p+".bronze.table", e.Bronze.Table)
	if e.Bronze.BatchRows < 0 {
		v.add(p+".bronze.batch_rows", "must be > 0")
	}
	if e.PII != nil {
		c.validatePII(v, p+".pii", e.PII)
	}

	sp := p + ".silver"
	sv := e.Silver
	v.tableIdent(sp+".table", sv.Table)
	v.tableIdent(sp+".quarantine_table", sv.QuarantineTable)
	if sv.Table == sv.QuarantineTable {
		v.add(sp+".quarantine_table", "must differ from table")
	}
	cols, names := map[string]string{}, tableColumns{}
	if len(sv.Columns) == 0 {
		v.add(sp+".columns", "required (at least one typed column)")
	}
	for i, col := range sv.Columns {
		cp := fmt.Sprintf("%s.columns[%d]", sp, i)
		if !v.required(cp+".name", col.Name) {
			continue
		}
		v.columnName(cp+".name", col.Name, names, reservedColumns)
		kind := ColumnKind(col.Type)
		cols[col.Name] = kind
		if col.Type == "" {
			v.add(cp+".type", "required")
		} else if kind == "" {
			v.add(cp+".type", "unknown type %q (string, int32, int64, float64, decimal(p,s), bool, date, timestamp)", col.Type)
		}
		if !columnPathRe.MatchString(col.Path) {
			// "$" alone (the whole payload) is not served: Silver reads a field, never the object.
			v.add(cp+".path", "must be a JSON path to a field, $ followed by .name segments (e.g. $.customer.id); $ alone, [index] and * are not supported")
		}
		if col.Format != "" && kind != "timestamp" && kind != "date" {
			v.add(cp+".format", "only timestamp and date columns take a format")
		}
		if col.Default != nil && kind != "" {
			if err := checkLiteral(kind, *col.Default); err != nil {
				v.add(cp+".default", "%v", err)
			}
		}
		if r := col.RenamedFrom; r != "" && (r == col.Name || slices.ContainsFunc(sv.Columns, func(c Column) bool { return c.Name == r })) {
			v.add(cp+".renamed_from", "%q is declared: a column is renamed from a name the entity no longer declares", r)
		}
	}
	switch sv.Mode {
	case "upsert":
		if sv.UpdatedAt == "" {
			if sv.Format != "debezium" { // a Debezium entity is ordered by the source position
				v.add(sp+".updated_at", "required in upsert mode (the column that orders versions)")
			}
		} else if k, ok := cols[sv.UpdatedAt]; !ok {
			v.unknownColumn(sp+".updated_at", sv.UpdatedAt, cols)
		} else if k != "timestamp" && k != "date" && k != "int" {
			v.add(sp+".updated_at", "column %q must be a timestamp, date or integer", sv.UpdatedAt)
		}
		if sv.Op != "" {
			if k, ok := cols[sv.Op]; !ok {
				v.unknownColumn(sp+".op", sv.Op, cols)
			} else if k != "string" {
				v.add(sp+".op", "column %q must be a string", sv.Op)
			}
		}
		for op := range sv.OpValues {
			if !slices.Contains([]string{"c", "u", "d", "r"}, op) {
				v.add(sp+".op_values."+op, "keys are the CDC ops c, u, d, r")
			}
		}
		if sv.Lookback != 0 || sv.KeysTable != "" {
			v.add(sp+".lookback", "lookback and keys_table belong to append mode")
		}
	case "append":
		if sv.Op != "" || sv.UpdatedAt != "" {
			v.add(sp+".op", "op and updated_at belong to upsert mode")
		}
		if sv.EventTime != "" {
			if k, ok := cols[sv.EventTime]; !ok {
				v.unknownColumn(sp+".event_time", sv.EventTime, cols)
			} else if k != "timestamp" && k != "date" {
				v.add(sp+".event_time", "column %q must be a timestamp or date", sv.EventTime)
			}
		}
		if sv.Lookback != 0 && sv.EventTime == "" {
			v.add(sp+".event_time", "required when lookback is set (the window is on this column)")
		}
		if sv.KeysTable != "" {
			v.tableIdent(sp+".keys_table", sv.KeysTable)
			if sv.Lookback != 0 {
				v.add(sp+".lookback", "not used with keys_table (the keys table already covers every earlier event); set one of them")
			}
		}
	case "":
		v.add(sp+".mode", "required (upsert or append)")
	default:
		v.add(sp+".mode", "must be one of upsert, append, got %q", sv.Mode)
	}
	if sv.Buckets < 1 || sv.Buckets > 1024 {
		v.add(sp+".buckets", "must be between 1 and 1024")
	}
	if sv.PassRows < -1 {
		v.add(sp+".pass_rows", "must be -1 (one pass), 0 (the default) or a number of rows")
	}
	for i, c := range sv.SortBy {
		if _, ok := cols[c]; !ok {
			v.unknownColumn(fmt.Sprintf("%s.sort_by[%d]", sp, i), c, cols)
		}
	}
	for i, f := range sv.IgnoredFields {
		if f == "" || strings.Contains(f, ".") {
			v.add(fmt.Sprintf("%s.ignored_fields[%d]", sp, i), "must be a top-level field name (no dots)")
		}
	}
	for path, pct := range map[string]*float64{sp + ".quality.warn_quarantine_pct": sv.Quality.WarnQuarantinePct, sp + ".quality.warn_duplicate_pct": sv.Quality.WarnDuplicatePct,
		sp + ".quality.fail_quarantine_pct": sv.Quality.FailQuarantinePct} {
		if pct != nil && (*pct < 0 || *pct > 100) {
			v.add(path, "must be a percentage between 0 and 100")
		}
	}
	sev := sv.Quality.Severity
	for _, ck := range []struct{ name, val string }{{"rows", sev.Rows}, {"schema", sev.Schema}, {"balance", sev.Balance}, {"undeclared", sev.Undeclared}} {
		v.oneOf(sp+".quality.severity."+ck.name, ck.val, "critical", "warning")
	}
	validateFormat(v, sp, sv)
	c.validateRules(v, name, sp, sv, cols, names)
	validateKey(v, sp, sv, cols)
}

// validateKey checks the identity of an entity's rows: its business key (which may name
// a column a derive rule adds: cols holds the rules' columns), or, for facts without
// one, identity: delivery.
func validateKey(v *validator, sp string, sv Silver, cols map[string]string) {
	switch sv.Identity {
	case "key":
	case "delivery":
		if sv.Mode == "upsert" {
			v.add(sp+".identity", "delivery is for append mode (facts without a natural key); an upsert entity merges the versions of its business key")
		}
		if len(sv.Key) > 0 {
			v.add(sp+".key", "not with identity: delivery, which names each fact by where it was delivered (docs/silver.md, \"Facts without a natural key\"): remove key, or remove identity to deduplicate by this key")
		}
		return
	default:
		v.add(sp+".identity", "must be one of key, delivery, got %q", sv.Identity)
		return
	}
	if len(sv.Key) == 0 && sv.Mode == "append" {
		v.add(sp+".key", "required: the columns that identify a fact, or, for facts without one (two identical rows are two facts), identity: delivery (docs/silver.md, \"Facts without a natural key\")")
	} else if len(sv.Key) == 0 {
		v.add(sp+".key", "required")
	}
	for i, k := range sv.Key {
		if kind, ok := cols[k]; !ok {
			v.unknownColumn(fmt.Sprintf("%s.key[%d]", sp, i), k, cols)
		} else if kind == "float" {
			v.add(fmt.Sprintf("%s.key[%d]", sp, i), "a float column cannot be a key (float text is not an identity: derive one, e.g. with hash(), docs/expressions.md)")
		}
	}
}

func (c *Config) validateRules(v *validator, entity, sp string, sv Silver, cols map[string]string, names tableColumns) {
	ids := map[string]bool{}
	for i, r := range sv.Rules {
		rp := fmt.Sprintf("%s.rules[%d]", sp, i)
		if v.required(rp+".id", r.ID) {
			if ids[r.ID] {
				v.add(rp+".id", "duplicate rule id %q", r.ID)
			}
			ids[r.ID] = true
		}
		prefix := map[string]string{"filter": "F", "normalize": "N", "derive": "E", "lookup": "E"}[r.Kind]
		if prefix == "" {
			v.add(rp+".kind", "must be one of filter, normalize, derive, lookup, got %q", r.Kind)
		} else if r.ID != "" && !strings.HasPrefix(r.ID, prefix) {
			v.add(rp+".id", "a %s rule id starts with %s (registry convention F*/N*/E*), got %q", r.Kind, prefix, r.ID)
		}
		switch r.Kind {
		case "filter":
			if v.required(rp+".expr", r.Expr) {
				v.exprSyntax(rp+".expr", r.Expr)
			}
			v.required(rp+".reason", r.Reason)
		case "normalize":
			if v.required(rp+".column", r.Column) {
				if _, ok := cols[r.Column]; !ok {
					v.add(rp+".column", "unknown column %q (normalize rewrites a declared column)", r.Column)
				}
			}
			if r.Type != "" {
				if k := ColumnKind(r.Type); k == "" {
					v.add(rp+".type", "unknown type %q", r.Type)
				} else if r.Column != "" {
					cols[r.Column] = k // the column's type from this rule on
				}
			}
			if v.required(rp+".expr", r.Expr) {
				v.exprSyntax(rp+".expr", r.Expr)
			}
		case "derive":
			if v.required(rp+".column", r.Column) {
				if _, ok := cols[r.Column]; ok {
					v.add(rp+".column", "column %q already exists (use a normalize rule to rewrite it)", r.Column)
				} else {
					v.columnName(rp+".column", r.Column, names, reservedColumns)
				}
				cols[r.Column] = ColumnKind(r.Type)
			}
			if v.required(rp+".type", r.Type) && ColumnKind(r.Type) == "" {
				v.add(rp+".type", "unknown type %q", r.Type)
			}
			if v.required(rp+".expr", r.Expr) {
				v.exprSyntax(rp+".expr", r.Expr)
			}
		case "lookup":
			lk := r.Lookup
			if lk == nil {
				v.add(rp+".lookup", "required for a lookup rule")
				continue
			}
			if (lk.Entity == "") == (lk.File == "") {
				v.add(rp+".lookup", "set exactly one of entity or file")
			}
			v.oneOf(rp+".lookup.on_change", lk.OnChange, "", "replay", "fail")
			var remote map[string]string // the lookup entity's Silver columns
			if lk.Entity != "" {
				remote = c.lookupEntity(v, rp+".lookup.entity", entity, lk.Entity)
			}
			if len(lk.On) == 0 {
				v.add(rp+".lookup.on", "required (this column: lookup column)")
			}
			for _, local := range sortedKeys(lk.On) {
				if _, ok := cols[local]; !ok {
					v.unknownColumn(rp+".lookup.on."+local, local, cols)
				}
				if _, ok := remote[lk.On[local]]; remote != nil && !ok {
					v.add(rp+".lookup.on."+local, "entity %s has no Silver column %q", lk.Entity, lk.On[local])
				}
			}
			if len(lk.Columns) == 0 {
				v.add(rp+".lookup.columns", "required")
			}
			for _, lc := range lk.Columns {
				name := join(rp+".lookup.columns", lc.As)
				if lc.From == "" {
					v.add(name, "names no lookup column")
				} else if _, ok := remote[lc.From]; remote != nil && !ok {
					v.add(name, "entity %s has no Silver column %q", lk.Entity, lc.From)
				} else if remote != nil && c.piiColumn(lk.Entity, lc.From) {
					v.add(name, "column %q of entity %s is encrypted personal data (entities.%s.pii): a lookup would copy it where `goldbridge forget %s --shred` cannot erase it", lc.From, lk.Entity, lk.Entity, lk.Entity)
				}
				if _, dup := cols[lc.As]; dup {
					v.add(name, "column %q already exists (name it: columns: {new_name: %s})", lc.As, lc.From)
				} else {
					v.columnName(name, lc.As, names, reservedColumns)
				}
				cols[lc.As] = "string"
			}
		}
	}
}

func checkLiteral(kind, s string) error {
	var err error
	switch kind {
	case "int":
		_, err = strconv.ParseInt(s, 10, 64)
	case "float":
		_, err = strconv.ParseFloat(s, 64)
	case "decimal":
		_, err = strconv.ParseFloat(s, 64)
	case "bool":
		_, err = strconv.ParseBool(s)
	case "date":
		_, err = time.Parse(time.DateOnly, s)
	case "timestamp":
		_, err = time.Parse(time.RFC3339Nano, s)
	}
	if err != nil {
		return fmt.Errorf("default %q is not a valid %s", s, kind)
	}
	return nil
}

// goldReserved are the columns every Gold mart has (lakehouse/mart).
var goldReserved = []string{mart.ColGroupingLevel, mart.ColCalculatedAt, mart.ColRunID}

// goldColumn checks an output column of a mart (columnName) and the hidden columns
// goldbridge adds for it in Gold and ClickHouse: each must fit MaxIdentLen and clash
// with no other column of the mart, up to case.
func (v *validator) goldColumn(path, name string, hidden []string, seen tableColumns) {
	if !v.columnName(path, name, seen, goldReserved) {
		return
	}
	for _, h := range hidden {
		prev, dup := seen[strings.ToLower(h)]
		switch {
		case len(h) > serving.MaxIdentLen:
			v.add(path, "name %q is too long: goldbridge adds the column %q for it, longer than ClickHouse accepts (%d bytes)", name, h, serving.MaxIdentLen)
		case dup:
			v.add(path, "goldbridge adds the column %q for %q, which clashes with the column %q (names that differ only by case are one column)", h, name, prev)
		default:
			seen[strings.ToLower(h)] = h
		}
	}
}

// hiddenColumns are the columns goldbridge adds for a measure (lakehouse/mart, serving/ddl).
func hiddenColumns(ms Measure) []string {
	a := mart.Agg(ms.Agg)
	out := a.HiddenCols(ms.Name)
	if a.List() != mart.ListNone || a.By() { // served as a state
		out = append(out, ddl.StateColumn(serving.Measure{Name: ms.Name}))
	}
	return out
}

// aggNames are the aggregates' names (lakehouse/mart).
func aggNames() string {
	var out []string
	for _, a := range mart.Aggs() {
		out = append(out, string(a))
	}
	return strings.Join(out, ", ")
}

// aggNamesWhere names the aggregates is holds for ("a or b").
func aggNamesWhere(is func(mart.Agg) bool) string {
	var out []string
	for _, a := range mart.Aggs() {
		if is(a) {
			out = append(out, string(a))
		}
	}
	return strings.Join(out, " or ")
}

func (c *Config) validateMart(v *validator, name string) {
	p := "marts." + name
	m := c.Marts[name]
	if !identRe.MatchString(name) {
		v.add(p, "invalid mart name (lower case letters, digits, _)")
	}
	v.tableIdent(p+".table", m.Table)
	v.oneOf(p+".mode", m.Mode, "incremental", "snapshot")
	v.oneOf(p+".on_change", m.OnChange, "rebuild", "fail")
	if m.PassRows < -1 {
		v.add(p+".pass_rows", "must be -1 (one pass), 0 (the default) or a number of rows")
	}
	cols := map[string]string{}
	if v.required(p+".source", m.Source) {
		e, ok := c.Entities[m.Source]
		if !ok {
			v.add(p+".source", "unknown entity %q", m.Source)
		} else {
			cols = e.silverColumns()
		}
	}
	for i, j := range m.Joins {
		jp := fmt.Sprintf("%s.joins[%d]", p, i)
		je, ok := c.Entities[j.Entity]
		if !ok {
			v.add(jp+".entity", "unknown entity %q", j.Entity)
			continue
		}
		v.oneOf(jp+".type", j.Type, "left", "inner")
		if len(j.On) == 0 {
			v.add(jp+".on", "required (mart column: joined column)")
		}
		jcols := map[string]string{}
		for _, col := range je.Silver.Columns {
			jcols[col.Name] = ColumnKind(col.Type)
		}
		for _, local := range sortedKeys(j.On) {
			if _, ok := cols[local]; !ok {
				v.unknownColumn(jp+".on."+local, local, cols)
			}
			if _, ok := jcols[j.On[local]]; !ok {
				v.add(jp+".on."+local, "entity %s has no column %q", j.Entity, j.On[local])
			}
		}
		for _, jc := range j.Columns {
			k, ok := jcols[jc]
			if !ok {
				v.add(jp+".columns", "entity %s has no column %q", j.Entity, jc)
			}
			if _, clash := cols[jc]; clash {
				v.add(jp+".columns", "column %q is already a column of the mart's rows", jc)
			}
			cols[jc] = k
		}
	}
	if m.Filter != "" {
		v.exprTyped(p+".filter", m.Filter, cols)
	}
	if m.Mode == "snapshot" {
		// A snapshot's grain is the run's UTC hour, day or month, not a column.
		if m.Grain.Column != "" {
			v.add(p+".grain.column", "not used with mode: snapshot (the grain is the run's UTC %s); remove it", m.Grain.Unit)
		}
	} else if v.required(p+".grain.column", m.Grain.Column) && len(cols) > 0 {
		if k, ok := cols[m.Grain.Column]; !ok {
			v.unknownColumn(p+".grain.column", m.Grain.Column, cols)
		} else if k != "timestamp" && k != "date" {
			v.add(p+".grain.column", "column %q must be a timestamp or date", m.Grain.Column)
		}
	}
	v.oneOf(p+".grain.unit", m.Grain.Unit, "hour", "day", "month")
	// The mart's columns in Gold and ClickHouse, hidden ones included, by folded name.
	gold := tableColumns{}
	outNames := map[string]bool{m.Grain.As: true}
	v.goldColumn(p+".grain.as", m.Grain.As, nil, gold)
	for i, d := range m.Dimensions {
		dp := fmt.Sprintf("%s.dimensions[%d]", p, i)
		if _, ok := cols[d]; !ok && len(cols) > 0 {
			v.unknownColumn(dp, d, cols)
		}
		v.goldColumn(dp, d, []string{mart.GroupingCol(d)}, gold)
		outNames[d] = true
	}
	v.oneOf(p+".grouping", m.Grouping, "none", "rollup", "cube", "sets")
	if m.Grouping == "sets" && len(m.GroupingSets) == 0 {
		v.add(p+".grouping_sets", "required when grouping is sets")
	}
	if m.Grouping != "sets" && len(m.GroupingSets) > 0 {
		v.add(p+".grouping_sets", "only used with grouping: sets")
	}
	if (m.Grouping == "rollup" || m.Grouping == "cube") && len(m.Dimensions) == 0 {
		v.add(p+".dimensions", "%s needs at least one dimension", m.Grouping)
	}
	for i, set := range m.GroupingSets {
		for _, d := range set {
			if !slices.Contains(m.Dimensions, d) {
				v.add(fmt.Sprintf("%s.grouping_sets[%d]", p, i), "%q is not a dimension", d)
			}
		}
	}
	if len(m.Measures) == 0 {
		v.add(p+".measures", "required (at least one measure)")
	}
	for i, ms := range m.Measures {
		mp := fmt.Sprintf("%s.measures[%d]", p, i)
		if v.required(mp+".name", ms.Name) {
			v.goldColumn(mp+".name", ms.Name, hiddenColumns(ms), gold)
			outNames[ms.Name] = true
		}
		if !mart.Agg(ms.Agg).Valid() {
			v.add(mp+".agg", "must be one of %s, got %q", aggNames(), ms.Agg)
			continue
		}
		if ms.Column == "" {
			if d, _ := mart.Agg(ms.Agg).Desc(); d.Input != mart.InputNone {
				v.add(mp+".column", "required for %s", ms.Agg)
			}
		} else if k, ok := cols[ms.Column]; !ok && len(cols) > 0 {
			v.unknownColumn(mp+".column", ms.Column, cols)
		} else if d, _ := mart.Agg(ms.Agg).Desc(); ok && d.Input == mart.InputNumeric && k != "int" && k != "float" && k != "decimal" {
			v.add(mp+".column", "%s needs a numeric column, %q is %s", ms.Agg, ms.Column, k)
		} else if ok && d.Simple != "" && (k == "string" || k == "bool") {
			// serving.Mart.Validate: a merged simple value is a number, a date or a time.
			v.add(mp+".column", "%s of a %s column is not served (a number, date or timestamp is); max_by and min_by take any column", ms.Agg, k)
		}
		if mart.Agg(ms.Agg).Served() == mart.Quantiles {
			if len(ms.Quantiles) == 0 {
				v.add(mp+".quantiles", "required for quantiles (e.g. [0.5, 0.9, 0.99])")
			}
			for _, q := range ms.Quantiles {
				if err := mart.CheckQuantile(q); err != nil {
					v.add(mp+".quantiles", "%v", err)
				}
			}
		} else if len(ms.Quantiles) > 0 {
			v.add(mp+".quantiles", "only used with agg: quantiles")
		}
		if mart.Agg(ms.Agg).Cond() {
			if strings.TrimSpace(ms.If) == "" {
				v.add(mp+".if", "required for %s (a boolean expression over the mart's row columns, e.g. status == \"paid\")", ms.Agg)
			} else {
				v.exprTyped(mp+".if", ms.If, cols)
			}
		} else if ms.If != "" {
			v.add(mp+".if", "only used with agg: %s", aggNamesWhere(mart.Agg.Cond))
		}
		if d, _ := mart.Agg(ms.Agg).Desc(); !d.By {
			if ms.By != "" {
				v.add(mp+".by", "only used with agg: %s", aggNamesWhere(mart.Agg.By))
			}
		} else if ms.By == "" {
			v.add(mp+".by", "required for %s (the column whose %s value picks the row)", ms.Agg, map[bool]string{true: "largest", false: "smallest"}[d.Extreme > 0])
		} else if _, ok := cols[ms.By]; !ok && len(cols) > 0 {
			v.unknownColumn(mp+".by", ms.By, cols)
		}
	}
	checkTypes := []string{"expr", "not_null", "unique_grain", "row_count_anomaly", "consistency", "null_grain"}
	for i, ck := range m.Checks {
		cp := fmt.Sprintf("%s.checks[%d]", p, i)
		if !slices.Contains(checkTypes, ck.Type) {
			v.add(cp+".type", "must be one of %s, got %q", strings.Join(checkTypes, ", "), ck.Type)
		}
		v.oneOf(cp+".severity", ck.Severity, "critical", "warning")
		switch ck.Type {
		case "expr":
			if v.required(cp+".expr", ck.Expr) {
				v.exprSyntax(cp+".expr", ck.Expr)
			}
		case "not_null":
			if len(ck.Columns) == 0 {
				v.add(cp+".columns", "required for not_null")
			}
			for _, col := range ck.Columns {
				if !outNames[col] {
					v.add(cp+".columns", "%q is not a column of the mart", col)
				}
			}
		case "row_count_anomaly":
			if ck.Trailing < 1 {
				v.add(cp+".trailing", "must be >= 1")
			}
			if ck.Tolerance <= 0 {
				v.add(cp+".tolerance", "must be > 0 (0.5 = ±50%% of the trailing mean)")
			}
		}
	}
	sv := m.Serving
	sp := p + ".serving"
	if !chIdentRe.MatchString(sv.Table) {
		v.add(sp+".table", "invalid ClickHouse identifier %q", sv.Table)
	} else if err := serving.CheckNames(c.ClickHouse.Database, sv.Table); err != nil {
		v.add(sp+".table", "%v", err)
	}
	v.oneOf(sp+".partition_by", sv.PartitionBy, "day", "month")
	if m.Grain.Unit == "month" && sv.PartitionBy == "day" {
		v.add(sp+".partition_by", "a month grain cannot be partitioned by day")
	}
	if sv.HotWindow.D() < 24*time.Hour {
		v.add(sp+".hot_window", "must be at least 1d")
	}
	v.oneOf(sp+".hot_window_anchor", sv.HotWindowAnchor, "clock", "data")
	switch {
	case sv.HotWindowAnchor == "data" && sv.TTL != 0:
		v.add(sp+".ttl", "a TTL counts from the server's clock and would delete what hot_window_anchor: data serves of older data; leave ttl unset")
	case sv.HotWindowAnchor != "data" && sv.TTL < sv.HotWindow:
		v.add(sp+".ttl", "must be at least the hot window (%s)", sv.HotWindow)
	}
	if sv.BatchRows < 1 {
		v.add(sp+".batch_rows", "must be > 0")
	}
	if sv.Parallelism < 1 || sv.Parallelism > 64 {
		v.add(sp+".parallelism", "must be between 1 and 64")
	}
	v.oneOf(sp+".distinct", sv.Distinct, serving.DistinctExact, serving.DistinctApprox, serving.DistinctBitmap)
	if sv.Distinct == serving.DistinctBitmap && c.ClickHouse.Cluster != "" {
		v.add(sp+".distinct", "bitmap needs a single ClickHouse server: each node of cluster %s would number the keys its own way, and bitmaps merged across nodes would mix them; use uniqExact", c.ClickHouse.Cluster)
	}
	c.validateWindows(v, m, sp+".windows")
}

// validateWindows checks a mart's serving.windows (serving.Mart.Windows): a day grain, a
// single ClickHouse server, lengths from 2 to serving.MaxWindowDays days ascending, and
// levels the mart's grouping has.
func (c *Config) validateWindows(v *validator, m Mart, p string) {
	w := m.Serving.Windows
	if len(w.Days) == 0 {
		if len(w.Levels) > 0 {
			v.add(p+".days", "required with levels")
		}
		return
	}
	if m.Grain.Unit != "day" {
		v.add(p, "needs a day grain (grain.unit is %s)", m.Grain.Unit)
	}
	if c.ClickHouse.Cluster != "" || len(c.ClickHouse.Shards) > 0 {
		v.add(p, "needs a single ClickHouse server: the windows are built from the served table on the server that holds it")
	}
	if len(w.Days) > serving.MaxWindows {
		v.add(p+".days", "at most %d windows, got %d", serving.MaxWindows, len(w.Days))
	}
	for i, d := range w.Days {
		switch {
		case d < 2 || d > serving.MaxWindowDays:
			v.add(fmt.Sprintf("%s.days[%d]", p, i), "must be from 2 to %d days, got %d", serving.MaxWindowDays, d)
		case i > 0 && d <= w.Days[i-1]:
			v.add(fmt.Sprintf("%s.days[%d]", p, i), "must be longer than the window before it (ascending, each once)")
		}
	}
	if m.Grain.As == serving.ColWindowDays || slices.Contains(m.Dimensions, serving.ColWindowDays) ||
		slices.ContainsFunc(m.Measures, func(ms Measure) bool { return ms.Name == serving.ColWindowDays }) {
		v.add(p, "the mart has a column named %s, the windows' length column: rename it", serving.ColWindowDays)
	}
	levels, err := mart.Levels(m.Grouping, m.Dimensions, m.GroupingSets)
	if err != nil {
		return // reported with grouping
	}
	for i, l := range w.Levels {
		if !slices.ContainsFunc(levels, func(lv mart.Level) bool { return lv.Name == l }) {
			names := make([]string, len(levels))
			for j, lv := range levels {
				names[j] = lv.Name
			}
			v.add(fmt.Sprintf("%s.levels[%d]", p, i), "%q is not a grouping level of the mart (%s)", l, strings.Join(names, ", "))
		}
	}
}

func (c *Config) validateSchedule(v *validator, name string) {
	p := "schedules." + name
	s := c.Schedules[name]
	if v.required(p+".cron", s.Cron) {
		if _, err := cronParser.Parse(s.Cron); err != nil {
			v.add(p+".cron", "invalid cron spec: %v", err)
		}
	}
	if _, err := time.LoadLocation(s.Timezone); err != nil {
		v.add(p+".timezone", "unknown time zone %q", s.Timezone)
	}
	if len(s.Stages) == 0 {
		v.add(p+".stages", "required (any of %s)", strings.Join(validStages, ", "))
	}
	for i, st := range s.Stages {
		if !slices.Contains(validStages, st) {
			v.add(fmt.Sprintf("%s.stages[%d]", p, i), "must be one of %s, got %q", strings.Join(validStages, ", "), st)
		}
	}
	for i, e := range s.Entities {
		if _, ok := c.Entities[e]; !ok {
			v.add(fmt.Sprintf("%s.entities[%d]", p, i), "unknown entity %q", e)
		}
	}
	for i, m := range s.Marts {
		if _, ok := c.Marts[m]; !ok {
			v.add(fmt.Sprintf("%s.marts[%d]", p, i), "unknown mart %q", m)
		}
	}
}

// piiKeyRe is a top-level payload key as entities.<name>.pii names it.
var piiKeyRe = regexp.MustCompile(`^(\$\.)?[A-Za-z_][A-Za-z0-9_-]*$`)

// columnPathRe is a column path Silver serves: $.a or $.a.b..., no index or wildcard.
var columnPathRe = regexp.MustCompile(`^\$(\.[^.\[\]*]+)+$`)

// PIIKey is the payload key a pii subject or field names ("$.email" -> "email").
func PIIKey(path string) string { return strings.TrimPrefix(path, "$.") }

func (c *Config) validatePII(v *validator, p string, pii *PII) {
	if c.Lakehouse.Catalog.Type == "rest" || catalog.IsPostgresURI(c.Lakehouse.Catalog.URI) {
		v.add(p, "needs the embedded catalog (lakehouse.catalog.type sql with a SQLite file): the keys are kept in its database")
	}
	if v.required(p+".subject", pii.Subject) && !piiKeyRe.MatchString(pii.Subject) {
		v.add(p+".subject", "want a top-level payload key ($.user_id); nested paths are not supported")
	}
	if len(pii.Fields) == 0 {
		v.add(p+".fields", "required (at least one payload key to encrypt)")
	}
	seen := map[string]bool{}
	for i, f := range pii.Fields {
		fp := fmt.Sprintf("%s.fields[%d]", p, i)
		switch k := PIIKey(f); {
		case !piiKeyRe.MatchString(f):
			v.add(fp, "want a top-level payload key ($.email); nested paths are not supported")
		case k == PIIKey(pii.Subject):
			v.add(fp, "the subject cannot be encrypted: it names the key")
		case seen[k]:
			v.add(fp, "duplicate field %s", f)
		default:
			seen[k] = true
		}
	}
}

// validateMaintenance checks the maintenance policy and that each override names a
// table of the pipeline or a layer.
func (c *Config) validateMaintenance(v *validator) {
	m := c.Maintenance
	if m.Every < 0 {
		v.add("maintenance.every", "must not be negative")
	}
	v.maintenancePolicy("maintenance", m.MaintenancePolicy)
	tables := c.TableNames()
	for _, name := range sortedKeys(m.Tables) {
		p := "maintenance.tables." + name
		if !slices.Contains(tables, name) && !slices.Contains([]string{"bronze", "silver", "gold"}, name) {
			v.add(p, "not a table of this pipeline (%s) or a layer (bronze, silver, gold)", strings.Join(tables, ", "))
		}
		v.maintenancePolicy(p, m.Tables[name])
	}
}

func (v *validator) maintenancePolicy(path string, p MaintenancePolicy) {
	if p.RetainAge != nil && *p.RetainAge < 0 {
		v.add(path+".retain_age", "must not be negative")
	}
	for _, f := range []struct {
		key string
		val *int
		min int
	}{{"retain_min", p.RetainMin, 1}, {"max_files", p.MaxFiles, 2}, {"max_delete_files", p.MaxDeleteFiles, 1},
		{"max_manifests", p.MaxManifests, 1}, {"metadata_versions", p.MetadataVersions, 1}} {
		if f.val != nil && *f.val < f.min {
			v.add(path+"."+f.key, "must be at least %d, got %d", f.min, *f.val)
		}
	}
}

// validateFormat checks how an entity's payloads are read: json, or debezium with its
// options (docs/silver.md, "Debezium").
func validateFormat(v *validator, sp string, sv Silver) {
	switch sv.Format {
	case "json":
		if sv.Debezium != nil {
			v.add(sp+".debezium", "only with format: debezium")
		}
		return
	case "debezium":
	default:
		v.add(sp+".format", "must be json or debezium, got %q", sv.Format)
		return
	}
	if sv.Mode != "upsert" {
		v.add(sp+".mode", "a debezium entity is mode upsert (one current row per key)")
	}
	if sv.Op != "" || len(sv.OpValues) > 0 {
		v.add(sp+".op", "not with format: debezium (the op is read from each event: op, __op or __deleted)")
	}
	for i, col := range sv.Columns {
		for _, p := range []string{"$.after.", "$.before.", "$.payload.", "$.source."} {
			if strings.HasPrefix(col.Path, p) {
				v.add(fmt.Sprintf("%s.columns[%d].path", sp, i), "with format: debezium a path is read in the row image (after, or before for a delete): write $.%s, not %s",
					strings.TrimPrefix(col.Path, p), col.Path)
				break
			}
		}
	}
	dp := sp + ".debezium"
	if sv.Debezium == nil {
		v.add(dp, "required with format: debezium (at least connector)")
		return
	}
	switch d := sv.Debezium; {
	case d.Connector == "":
		v.add(dp+".connector", "required (%s)", strings.Join(silver.DebeziumConnectors, ", "))
	case !slices.Contains(silver.DebeziumConnectors, d.Connector):
		v.add(dp+".connector", "must be one of %s, got %q", strings.Join(silver.DebeziumConnectors, ", "), d.Connector)
	}
	if d := sv.Debezium.DecimalHandling; !slices.Contains(silver.DebeziumDecimalModes, d) {
		v.add(dp+".decimal_handling", "must be one of %s, got %q", strings.Join(silver.DebeziumDecimalModes, ", "), d)
	}
}

// silverColumns are the columns of an entity's Silver table a config names, with their
// kinds: the declared ones as the rules retype them, the rules' own, and is_deleted.
func (e Entity) silverColumns() map[string]string {
	cols := map[string]string{}
	for _, col := range e.Silver.Columns {
		cols[col.Name] = ColumnKind(col.Type)
	}
	for _, r := range e.Silver.Rules {
		if r.Kind == "derive" || r.Kind == "normalize" && r.Type != "" {
			cols[r.Column] = ColumnKind(r.Type)
		}
		if r.Kind == "lookup" && r.Lookup != nil {
			for _, lc := range r.Lookup.Columns.Names() {
				cols[lc] = "string"
			}
		}
	}
	if e.Silver.Mode == "upsert" {
		cols["is_deleted"] = "bool" // only upsert entities soft-delete
	}
	return cols
}

// lookupEntity checks the entity a lookup of entity reads (path: its lookup.entity) and
// returns its Silver columns, or nil when there is none to read: itself, an unknown
// entity, or one whose lookups lead back to entity (Silver runs the looked-up entity
// first, so the lookups of a pipeline must not form a cycle).
func (c *Config) lookupEntity(v *validator, path, entity, target string) map[string]string {
	e, ok := c.Entities[target]
	switch {
	case !ok:
		v.add(path, "unknown entity %q", target)
		return nil
	case target == entity:
		v.add(path, "an entity cannot look itself up")
		return nil
	}
	if cycle := c.lookupPath(target, entity, map[string]bool{}); cycle != nil {
		v.add(path, "lookups form a cycle: %s", strings.Join(append([]string{entity}, cycle...), " -> "))
		return nil
	}
	return e.silverColumns()
}

// lookupPath returns the entities from one to target through lookup.entity, or nil.
func (c *Config) lookupPath(from, target string, seen map[string]bool) []string {
	if from == target {
		return []string{from}
	}
	if seen[from] {
		return nil
	}
	seen[from] = true
	for _, dep := range c.LookupEntities(from) {
		if p := c.lookupPath(dep, target, seen); p != nil {
			return append([]string{from}, p...)
		}
	}
	return nil
}

// LookupEntities are the entities whose Silver tables an entity's lookups read.
func (c *Config) LookupEntities(entity string) []string {
	var out []string
	for _, r := range c.Entities[entity].Silver.Rules {
		if r.Kind == "lookup" && r.Lookup != nil && r.Lookup.Entity != "" && !slices.Contains(out, r.Lookup.Entity) {
			out = append(out, r.Lookup.Entity)
		}
	}
	return out
}

// piiColumn reports whether a Silver column of entity holds one of its pii.fields
// (crypto-shredded: decrypted only while Silver parses).
func (c *Config) piiColumn(entity, column string) bool {
	e := c.Entities[entity]
	if e.PII == nil {
		return false
	}
	for _, col := range e.Silver.Columns {
		if col.Name != column {
			continue
		}
		path := col.Path
		if path == "" {
			path = "$." + col.Name
		}
		top, _, _ := strings.Cut(strings.TrimPrefix(path, "$."), ".")
		return slices.ContainsFunc(e.PII.Fields, func(f string) bool { return PIIKey(f) == top })
	}
	return false
}
