// Package plan reads a validated config as the lakehouse, serving and sync packages
// take it: the Silver spec of an entity, the Gold spec and the serving model of a mart,
// the sources, the pii codec, the catalog to open, and the whole as the stage runner's
// pipeline.Plan. It only translates: what the config says is checked by config's
// Validate (which calls CheckRules), and an error here names the config path.
package plan

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/forget"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/maintain"
	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/pii"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
	"goldbridge/sync/pipeline"
)

// OpenLakehouse opens the Iceberg catalog described by the config.
func OpenLakehouse(ctx context.Context, cfg *config.Config) (*catalog.Lakehouse, error) {
	lh := cfg.Lakehouse
	props := map[string]string{}
	for k, v := range lh.Catalog.Properties {
		props[k] = v.Reveal()
	}
	pathStyle := lh.S3.PathStyle != nil && *lh.S3.PathStyle
	return catalog.Open(ctx, catalog.Config{
		Type:      lh.Catalog.Type,
		URI:       lh.Catalog.URI,
		Name:      lh.Catalog.Name,
		Warehouse: lh.Warehouse,
		S3: catalog.S3Config{
			Endpoint: lh.S3.Endpoint, Region: lh.S3.Region, PathStyle: pathStyle,
			AccessKeyID: lh.S3.AccessKeyID, SecretAccessKey: lh.S3.SecretAccessKey.Reveal(),
		},
		Properties: props,
	})
}

// FileSources returns the file sources of an entity as the bronze package takes them.
func FileSources(cfg *config.Config, entity string) []bronze.FileSource {
	var out []bronze.FileSource
	for _, name := range cfg.Entities[entity].Sources {
		s := cfg.Sources[name]
		if s.Type != "file" {
			continue
		}
		var delim rune
		if s.CSV.Delimiter != "" {
			delim = []rune(s.CSV.Delimiter)[0]
		}
		var nulls []string // nil: bronze.DefaultCSVNulls
		if s.CSV.NullValues != nil {
			nulls = append([]string{}, *s.CSV.NullValues...)
		}
		out = append(out, bronze.FileSource{
			Name: name, System: s.System + "_file", Dir: s.Path, Pattern: s.Pattern,
			Format: s.Format, Compression: s.Compression, CSVDelim: delim, CSVNulls: nulls,
			Settle: s.Settle.D(), TailWait: s.TailWait.D(),
		})
	}
	return out
}

// EntitySpec converts an entity's config into the silver package's spec.
func EntitySpec(cfg *config.Config, name string) (silver.EntitySpec, error) {
	e := cfg.Entities[name]
	sv := e.Silver
	spec := silver.EntitySpec{
		Name: name, Table: sv.Table, QuarantineTable: sv.QuarantineTable, Mode: sv.Mode, Identity: sv.Identity,
		Key: sv.Key, UpdatedAt: sv.UpdatedAt, Op: sv.Op, OpValues: sv.OpValues,
		EventTime: sv.EventTime, Lookback: sv.Lookback.D(), KeysTable: sv.KeysTable, Buckets: sv.Buckets, SortBy: sv.SortBy,
		IgnoredFields:     sv.IgnoredFields,
		WarnQuarantinePct: *sv.Quality.WarnQuarantinePct, WarnDuplicatePct: *sv.Quality.WarnDuplicatePct,
		FailQuarantinePct: *sv.Quality.FailQuarantinePct,
		Severity: silver.Severities{Rows: sv.Quality.Severity.Rows, Schema: sv.Quality.Severity.Schema, Balance: sv.Quality.Severity.Balance,
			Undeclared: sv.Quality.Severity.Undeclared},
	}
	codec, err := catalog.ParseCodec(cfg.Lakehouse.Compression.Silver)
	if err != nil {
		return spec, fmt.Errorf("lakehouse.compression.silver: %w", err)
	}
	spec.Codec = codec
	if sv.Format == "debezium" && sv.Debezium != nil {
		spec.Debezium = &silver.DebeziumSpec{Connector: sv.Debezium.Connector, DecimalHandling: sv.Debezium.DecimalHandling}
	}
	for _, c := range sv.Columns {
		t, err := silver.ParseType(c.Type)
		if err != nil {
			return spec, fmt.Errorf("entities.%s.silver.columns %s: %w", name, c.Name, err)
		}
		spec.Columns = append(spec.Columns, silver.ColumnSpec{
			Name: c.Name, Path: c.Path, Type: t, Required: c.Required, Default: c.Default, Format: c.Format, RenamedFrom: c.RenamedFrom,
		})
	}
	for _, r := range sv.Rules {
		rs := silver.RuleSpec{ID: r.ID, Kind: r.Kind, Expr: r.Expr, Column: r.Column, Type: r.Type, Reason: r.Reason}
		if r.Lookup != nil {
			lk := &silver.LookupSpec{Entity: r.Lookup.Entity, File: r.Lookup.File, On: r.Lookup.On, OnChange: r.Lookup.OnChange}
			if le, ok := cfg.Entities[r.Lookup.Entity]; ok {
				lk.Table = le.Silver.Table
			}
			for _, c := range r.Lookup.Columns {
				lk.Columns, lk.As = append(lk.Columns, c.From), append(lk.As, c.As)
			}
			rs.Lookup = lk
		}
		spec.Rules = append(spec.Rules, rs)
	}
	return spec, nil
}

// CheckRules compiles every entity's Silver rules against its typed columns as the
// Silver stage does (silver.CheckRules), so that a rule a run would refuse (an unknown
// name or function, a result of the wrong type) is a validate problem with its path.
func CheckRules(cfg *config.Config) config.Problems {
	var ps config.Problems
	for _, name := range slices.Sorted(maps.Keys(cfg.Entities)) {
		es, err := EntitySpec(cfg, name)
		if err != nil {
			continue // a column type Validate reports
		}
		for _, p := range silver.CheckRules(es.Rules, es.Columns) {
			path := fmt.Sprintf("entities.%s.silver.rules[%d]", name, p.Index)
			switch {
			case p.Index < 0:
				path = fmt.Sprintf("entities.%s.silver.columns", name)
			case es.Rules[p.Index].Kind == "lookup":
				path += ".lookup"
			default:
				path += ".expr"
			}
			msg, _, _ := strings.Cut(p.Err.Error(), "\n") // expr's error shows the source below
			ps = append(ps, config.Problem{Path: path, Msg: msg})
		}
	}
	return ps
}

// KafkaSources returns the Kafka sources of an entity with their client options.
func KafkaSources(cfg *config.Config, entity string) ([]bronze.KafkaSource, error) {
	var out []bronze.KafkaSource
	for _, name := range cfg.Entities[entity].Sources {
		s := cfg.Sources[name]
		if s.Type != "kafka" {
			continue
		}
		var opts []kgo.Opt
		switch s.SASL.Mechanism {
		case "plain":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.SASL.User, Pass: s.SASL.Password.Reveal()}.AsMechanism()))
		case "scram-sha-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.SASL.User, Pass: s.SASL.Password.Reveal()}.AsSha256Mechanism()))
		case "scram-sha-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.SASL.User, Pass: s.SASL.Password.Reveal()}.AsSha512Mechanism()))
		}
		if s.TLS.Enabled {
			tc, err := TLSConfig(s.TLS)
			if err != nil {
				return nil, fmt.Errorf("sources.%s.tls: %w", name, err)
			}
			opts = append(opts, kgo.DialTLSConfig(tc))
		}
		out = append(out, bronze.KafkaSource{
			Name: name, System: s.System + "_kafka", Brokers: s.Brokers, Topic: s.Topic, Group: s.Group,
			StartOffset: s.StartOffset, Opts: opts,
		})
	}
	return out, nil
}

// TLSConfig builds a client TLS config from files.
func TLSConfig(t config.TLS) (*tls.Config, error) {
	tc := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // opt-in for testing
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificates in %s", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// MartSpec converts a mart's config into the gold package's spec.
func MartSpec(cfg *config.Config, name string) (gold.MartSpec, error) {
	m := cfg.Marts[name]
	ent := cfg.Entities[m.Source]
	es, err := EntitySpec(cfg, m.Source)
	if err != nil {
		return gold.MartSpec{}, err
	}
	cols, err := silverColumns(cfg, m.Source)
	if err != nil {
		return gold.MartSpec{}, err
	}
	spec := gold.MartSpec{
		Name: name, Table: m.Table, SourceTable: ent.Silver.Table, SourceKey: es.KeyColumns(), SourceColumns: cols,
		Mode: m.Mode, OnChange: m.OnChange, Filter: m.Filter, GrainColumn: m.Grain.Column, GrainUnit: m.Grain.Unit, GrainAs: m.Grain.As,
		Grouping: m.Grouping, GroupingSets: m.GroupingSets, PassRows: m.PassRows,
	}
	if spec.Codec, err = catalog.ParseCodec(cfg.Lakehouse.Compression.Gold); err != nil {
		return spec, fmt.Errorf("lakehouse.compression.gold: %w", err)
	}
	// The row's columns: the source's, then each join's (dimension and measure types).
	rowCols := map[string]silver.Type{}
	for c, t := range cols {
		rowCols[c] = t
	}
	for i, j := range m.Joins {
		jcols, err := silverColumns(cfg, j.Entity)
		if err != nil {
			return spec, fmt.Errorf("marts.%s.joins[%d]: %w", name, i, err)
		}
		je := cfg.Entities[j.Entity]
		js := gold.JoinSpec{
			Entity: j.Entity, Table: je.Silver.Table, Type: j.Type, Columns: j.Columns, ColumnTypes: jcols,
			HasDeleted: je.Silver.Mode == "upsert",
		}
		for _, local := range slices.Sorted(maps.Keys(j.On)) {
			js.On = append(js.On, gold.JoinOn{Local: local, Joined: j.On[local]})
		}
		for _, c := range j.Columns {
			rowCols[c] = jcols[c]
		}
		spec.Joins = append(spec.Joins, js)
	}
	for _, d := range m.Dimensions {
		spec.Dims = append(spec.Dims, gold.Dim{Name: d, Type: rowCols[d]})
	}
	for _, ms := range m.Measures {
		spec.Measures = append(spec.Measures, gold.MeasureSpec{
			Name: ms.Name, Agg: mart.Agg(ms.Agg), Column: ms.Column, InputType: rowCols[ms.Column], Quantiles: ms.Quantiles, If: ms.If,
			By: ms.By, ByType: rowCols[ms.By],
		})
	}
	for _, c := range m.Checks {
		spec.Checks = append(spec.Checks, gold.CheckSpec{
			Name: c.Name, Type: c.Type, Expr: c.Expr, Columns: c.Columns, Severity: c.Severity, Trailing: c.Trailing, Tolerance: c.Tolerance,
		})
	}
	return spec, nil
}

// silverColumns are the column types of an entity's Silver table that Gold reads:
// declared columns, rule-added columns, (upsert) is_deleted and (identity: delivery) the
// key _delivery_id, which Gold reads as the key and config offers no mart.
func silverColumns(cfg *config.Config, entity string) (map[string]silver.Type, error) {
	es, err := EntitySpec(cfg, entity)
	if err != nil {
		return nil, err
	}
	cols := map[string]silver.Type{}
	for _, c := range es.Columns {
		cols[c.Name] = c.Type
	}
	for _, r := range es.Rules {
		if r.Kind == "derive" || r.Kind == "normalize" && r.Type != "" {
			if t, err := silver.ParseType(r.Type); err == nil {
				cols[r.Column] = t
			}
		}
		if r.Kind == "lookup" && r.Lookup != nil {
			for _, c := range r.Lookup.SilverNames() {
				cols[c] = silver.Type{Kind: silver.String}
			}
		}
	}
	if cfg.Entities[entity].Silver.Mode == "upsert" {
		cols[silver.ColIsDeleted] = silver.Type{Kind: silver.Bool}
	}
	for _, k := range es.KeyColumns() {
		if k == silver.ColDeliveryID {
			cols[k] = silver.Type{Kind: silver.String}
		}
	}
	return cols, nil
}

// piiCodec is the crypto-shredding codec of an entity (keys in the embedded catalog
// database), or nil when the entity has no pii section.
func piiCodec(ctx context.Context, lh *catalog.Lakehouse, cfg *config.Config, entity string) (*pii.Codec, error) {
	p := cfg.Entities[entity].PII
	if p == nil {
		return nil, nil
	}
	store, err := pii.NewSQLStore(ctx, lh.DB())
	if err != nil {
		return nil, fmt.Errorf("entities.%s.pii: %w", entity, err)
	}
	spec := pii.Spec{Subject: config.PIIKey(p.Subject)}
	for _, f := range p.Fields {
		spec.Fields = append(spec.Fields, config.PIIKey(f))
	}
	c, err := pii.NewCodec(spec, store)
	if err != nil {
		return nil, fmt.Errorf("entities.%s.pii: %w", entity, err)
	}
	return c, nil
}

// PII returns the Bronze transform and the Silver decrypter of an entity (both
// nil without a pii section).
func PII(ctx context.Context, lh *catalog.Lakehouse, cfg *config.Config, entity string) (encrypt, decrypt func([]byte) ([]byte, error), err error) {
	c, err := piiCodec(ctx, lh, cfg, entity)
	if err != nil || c == nil {
		return nil, nil, err
	}
	return func(b []byte) ([]byte, error) { return c.Encrypt(ctx, b) },
		func(b []byte) ([]byte, error) { return c.Decrypt(ctx, b) }, nil
}

// Served builds the serving model of a mart from its Gold spec (MartSpec) and its
// serving keys (serving.NewMart): complete, so nothing fills it in later.
func Served(cfg *config.Config, name string) (*serving.Mart, error) {
	spec, err := MartSpec(cfg, name)
	if err != nil {
		return nil, fmt.Errorf("mart %s: %w", name, err)
	}
	mc := cfg.Marts[name]
	return serving.NewMart(spec, serving.Target{
		Database: cfg.ClickHouse.Database, Table: mc.Serving.Table, Cluster: cfg.ClickHouse.Cluster, Sharded: len(cfg.ClickHouse.Shards) > 0,
		PartitionBy: mc.Serving.PartitionBy, HotWindow: mc.Serving.HotWindow.D(), HotAnchor: mc.Serving.HotWindowAnchor,
		TTL: mc.Serving.TTL.D(), Distinct: mc.Serving.Distinct,
		Windows: serving.Windows{Days: mc.Serving.Windows.Days, Levels: mc.Serving.Windows.Levels},
	})
}

// Plan is the config as the stage runner asks for it (pipeline.Plan).
type Plan struct{ cfg *config.Config }

// New is the pipeline.Plan of cfg.
func New(cfg *config.Config) Plan { return Plan{cfg} }

func (p Plan) Entities() []string { return slices.Sorted(maps.Keys(p.cfg.Entities)) }
func (p Plan) Marts() []string    { return slices.Sorted(maps.Keys(p.cfg.Marts)) }

func (p Plan) Entity(name string) (pipeline.Entity, error) {
	spec, err := EntitySpec(p.cfg, name)
	if err != nil {
		return pipeline.Entity{}, err
	}
	codec, err := catalog.ParseCodec(p.cfg.Lakehouse.Compression.Bronze)
	if err != nil {
		return pipeline.Entity{}, fmt.Errorf("lakehouse.compression.bronze: %w", err)
	}
	e := p.cfg.Entities[name]
	return pipeline.Entity{
		Bronze: e.Bronze.Table, BronzeCodec: codec, BatchRows: e.Bronze.BatchRows, Files: FileSources(p.cfg, name),
		Silver: spec, PassRows: e.Silver.PassRows, PassBytes: int64(e.Silver.PassBytes), Lookups: p.cfg.LookupEntities(name),
	}, nil
}

func (p Plan) Kafka(name string) ([]bronze.KafkaSource, error) { return KafkaSources(p.cfg, name) }

func (p Plan) PII(ctx context.Context, lh *catalog.Lakehouse, name string) (encrypt, decrypt func([]byte) ([]byte, error), err error) {
	return PII(ctx, lh, p.cfg, name)
}

func (p Plan) Mart(name string) (pipeline.Mart, error) {
	spec, err := MartSpec(p.cfg, name)
	if err != nil {
		return pipeline.Mart{}, err
	}
	m := p.cfg.Marts[name]
	reads := []string{m.Source}
	for _, j := range m.Joins {
		reads = append(reads, j.Entity)
	}
	return pipeline.Mart{Gold: spec, Reads: reads, Serving: m.Serving.IsEnabled(),
		Parallelism: m.Serving.Parallelism, BatchRows: m.Serving.BatchRows}, nil
}

func (p Plan) Served(name string) (*serving.Mart, error) { return Served(p.cfg, name) }

func (p Plan) Maintenance() pipeline.Maintenance {
	mc := p.cfg.Maintenance
	return pipeline.Maintenance{
		Enabled: mc.IsEnabled(), Every: mc.Every.D(),
		Policy: func(ident, layer string) maintain.Policy {
			if layer == maintain.LayerQuarantine || layer == maintain.LayerKeys { // configured as Silver's
				layer = maintain.LayerSilver
			}
			c := p.cfg.MaintenanceOf(ident, layer)
			return maintain.Policy{
				RetainAge: c.RetainAge.D(), RetainMin: *c.RetainMin, MaxFiles: *c.MaxFiles, MaxDeleteFiles: *c.MaxDeleteFiles,
				MaxManifests: *c.MaxManifests, MetadataVersions: *c.MetadataVersions,
			}
		},
	}
}

// ForgetTarget is what a forget of entity reaches: the entity and the marts it feeds
// (as source or join).
func ForgetTarget(cfg *config.Config, entity string) (forget.Target, error) {
	spec, err := EntitySpec(cfg, entity)
	if err != nil {
		return forget.Target{}, err
	}
	t := forget.Target{Entity: entity, Bronze: cfg.Entities[entity].Bronze.Table, Silver: spec}
	var names []string
	for name, m := range cfg.Marts {
		if m.Source == entity || slices.ContainsFunc(m.Joins, func(j config.Join) bool { return j.Entity == entity }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		ms, err := MartSpec(cfg, name)
		if err != nil {
			return forget.Target{}, err
		}
		t.Marts = append(t.Marts, ms)
	}
	return t, nil
}

// HotName names the ClickHouse a push went to: a record of one target never stands for
// another.
func HotName(cfg *config.Config) string {
	ch := cfg.ClickHouse
	if ch.IsEmbedded() {
		return fmt.Sprintf("embedded %s %d %d db %s", ch.Local.Path, ch.Local.TCPPort, ch.Local.HTTPPort, ch.Database)
	}
	if len(ch.Shards) > 0 {
		var shards []string
		for _, nodes := range ch.Shards {
			shards = append(shards, strings.Join(nodes, ","))
		}
		return fmt.Sprintf("shards %s db %s cluster %s", strings.Join(shards, ";"), ch.Database, ch.Cluster)
	}
	return fmt.Sprintf("%s db %s cluster %s", strings.Join(ch.Addresses, ","), ch.Database, ch.Cluster)
}

// TableLayer is the maintenance.tables key of one of the pipeline's tables (a
// quarantine or keys table is Silver's), or "".
func TableLayer(cfg *config.Config, ident string) string {
	for _, e := range cfg.Entities {
		switch ident {
		case e.Bronze.Table:
			return maintain.LayerBronze
		case e.Silver.Table, e.Silver.QuarantineTable, e.Silver.KeysTable:
			return maintain.LayerSilver
		}
	}
	for _, m := range cfg.Marts {
		if ident == m.Table {
			return maintain.LayerGold
		}
	}
	return ""
}

// RetentionNote says how far back maintenance keeps a table's snapshots.
func RetentionNote(cfg *config.Config, name string) string {
	p := cfg.MaintenanceOf(name, TableLayer(cfg, name))
	return fmt.Sprintf("maintenance expires the snapshots of %s older than maintenance.retain_age (%s for it) beyond its %d newest (retain_min): docs/operations.md, \"Maintenance\"; raise retain_age to reach further back",
		name, p.RetainAge, *p.RetainMin)
}

// QueryPossible says why goldbridge query cannot read the lake of cfg, or nil.
func QueryPossible(cfg *config.Config) error {
	if !cfg.ClickHouse.IsEmbedded() {
		return fmt.Errorf("query reads the lake through the embedded ClickHouse; clickhouse.addresses names an external server, which cannot read the warehouse %s of this machine (use clickhouse query for the served marts)", cfg.Lakehouse.Warehouse)
	}
	w := cfg.Lakehouse.Warehouse
	if catalog.LocalDir(w) == "" {
		return fmt.Errorf("query reads local (file://) warehouses only; lakehouse.warehouse is %s: query it with ClickHouse's icebergS3", w)
	}
	if cfg.Lakehouse.Catalog.Type == "rest" && !strings.HasPrefix(w, "file://") {
		// A REST catalog's warehouse may be a name (SeaweedFS: its table bucket), not a
		// directory: the server decides where the tables live.
		return fmt.Errorf("query reads local (file://) warehouses only; lakehouse.warehouse is %s, a REST catalog's warehouse whose tables the server places (s3://): query it with ClickHouse's icebergS3", w)
	}
	return nil
}

// LookupCopies are the entities whose Silver rows carry columns of entity through a
// lookup (lookup.entity), sorted: a forget of entity does not rebuild them, their next
// run does (the lookup changed under their rows: docs/silver.md "Lookups"), and their
// older snapshots go with maintenance's retention (docs/privacy.md).
func LookupCopies(cfg *config.Config, entity string) []string {
	var deps []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Entities)) {
		if slices.Contains(cfg.LookupEntities(name), entity) {
			deps = append(deps, name)
		}
	}
	return deps
}
