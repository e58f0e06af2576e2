// Package catalog opens the Iceberg catalog and owns table loading, table
// creation and the commit-retry pattern.
//
// Two catalog types are supported:
//
//   - "sql" (default): the catalog rows in a database, chosen by the URI: a plain
//     path is an embedded SQLite file (pure Go, modernc.org/sqlite); a
//     postgres:// (or postgresql://) URI is a PostgreSQL database shared by
//     several workers (pure Go, pgx). Table data and metadata live under a
//     file:// or s3:// warehouse.
//   - "rest": any Iceberg REST catalog (Polaris, Lakekeeper, Nessie, Gravitino,
//     SeaweedFS, ...).
//
// Every write to an Iceberg table is an optimistic compare-and-swap of the
// table's metadata pointer. The SQL catalog of iceberg-go v0.7.0 does not retry a
// commit made from a stale table handle, so all writers should go through
// [Lakehouse.Commit], which reloads the table and re-runs the commit on
// conflicts.
package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	// Registers the s3:// (and s3a://, s3n://) file IO. Only S3 is linked:
	// io/gocloud would also pull in the GCS and Azure SDKs.
	_ "github.com/apache/iceberg-go/io/gocloud/s3"
	// Registers the "pgx" database/sql driver (PostgreSQL, pure Go).
	_ "github.com/jackc/pgx/v5/stdlib"
	// Registers the "sqlite" database/sql driver (pure Go, no cgo).
	_ "modernc.org/sqlite"

	// Replaces arrow-go's zstd Parquet codec: encoders sized for pages, kept across GCs.
	_ "goldbridge/lakehouse/parquetzstd"
)

// Catalog types accepted in Config.Type.
const (
	TypeSQL  = "sql"
	TypeREST = "rest"
)

// DefaultName is the catalog name used when Config.Name is empty. With the SQL
// catalog the name is part of every catalog row's key, so changing it later
// hides existing tables.
const DefaultName = "goldbridge"

// ErrNoSuchTable is iceberg-go's catalog.ErrNoSuchTable, re-exported so callers
// need not import both packages. Errors from LoadTable and Commit for a missing
// table (or missing namespace) match it with errors.Is.
var ErrNoSuchTable = icecat.ErrNoSuchTable

// Config selects and configures the catalog. It is a plain struct; parsing and
// defaults from YAML live in cmd/.
type Config struct {
	// Type is "sql" (embedded SQLite, the default when empty) or "rest".
	Type string
	// URI is, for sql, the path of the SQLite file (e.g. <state>/catalog.db;
	// relative paths are made absolute, the parent directory is created) or a
	// postgres:// URI (its password may also come from PGPASSWORD); for rest,
	// the base URL of the catalog (without the /v1 suffix).
	URI string
	// Name is the catalog name; DefaultName when empty.
	Name string
	// Warehouse is where table data and metadata live: "file:///abs/path"
	// (a plain or relative path is accepted too) or "s3://bucket/prefix".
	// For SQLite it defaults to a "warehouse" directory next to the SQLite file;
	// for Postgres it is required.
	// For rest it is passed through as is: some servers expect a warehouse
	// name rather than a URL, and it may be empty.
	Warehouse string
	// S3 configures the S3 file IO (AWS S3, MinIO, R2, ...).
	S3 S3Config
	// Properties are extra catalog properties, e.g. for rest "credential"
	// (client_id:client_secret), "token", "scope", "oauth2-server-uri",
	// "prefix", "header.X-Foo". Typed fields above win over keys set here.
	Properties map[string]string
}

// S3Config maps onto iceberg-go's "s3.*" file IO properties.
type S3Config struct {
	Endpoint        string // s3.endpoint, e.g. http://localhost:9000 for MinIO
	Region          string // s3.region
	AccessKeyID     string // s3.access-key-id
	SecretAccessKey string // s3.secret-access-key (never echoed in errors)
	// PathStyle forces path-style addressing (http://host/bucket/key), as
	// MinIO needs. When false, iceberg-go's default applies: path style when
	// Endpoint is set, virtual-hosted style otherwise.
	PathStyle bool
}

// props returns the iceberg-go property map for the S3 settings.
func (c S3Config) props() map[string]string {
	p := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			p[k] = v
		}
	}
	set(iceio.S3EndpointURL, c.Endpoint)
	set(iceio.S3Region, c.Region)
	set(iceio.S3AccessKeyID, c.AccessKeyID)
	set(iceio.S3SecretAccessKey, c.SecretAccessKey)
	if c.PathStyle {
		p[iceio.S3ForceVirtualAddressing] = "false"
	}

	return p
}

// Lakehouse is an open Iceberg catalog. It is safe for concurrent use.
type Lakehouse struct {
	cat icecat.Catalog
	db  *sql.DB // owned SQLite or Postgres handle; nil for rest
	// embedded is true for the SQLite catalog (a file of this machine).
	embedded bool
	typ      string
	name     string
	// warehouseDir is the local warehouse directory for file:// warehouses,
	// checked by Ping; empty otherwise.
	warehouseDir string
	retry        retryPolicy

	writesMu sync.Mutex
	writes   map[string]map[*WriteAttempt]bool // writes in progress (BeginWrite), by table

	closeOnce sync.Once
	closeErr  error
}

// Open validates cfg and opens the catalog. For sql it creates the SQLite file,
// its parent directory and a file:// warehouse directory as needed; for rest it
// contacts the server (GET /v1/config), so the server must be reachable.
//
// Errors never contain secret values from cfg (S3 secret key, credentials,
// tokens, URI passwords): they are replaced by "***".
func Open(ctx context.Context, cfg Config) (*Lakehouse, error) {
	if cfg.Type == "" {
		cfg.Type = TypeSQL
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	secrets := secretValues(cfg)

	var (
		l   *Lakehouse
		err error
	)
	switch cfg.Type {
	case TypeSQL:
		l, err = openSQL(ctx, cfg)
	case TypeREST:
		l, err = openREST(ctx, cfg)
	default:
		return nil, fmt.Errorf("open catalog: unknown type %q (want %q or %q)", cfg.Type, TypeSQL, TypeREST)
	}
	if err != nil {
		return nil, redact(fmt.Errorf("open %s catalog %q: %w", cfg.Type, cfg.Name, err), secrets)
	}
	l.typ, l.name, l.retry = cfg.Type, cfg.Name, defaultRetry

	return l, nil
}

// IsPostgresURI reports whether a sql catalog URI names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgresURI(uri string) bool {
	return strings.HasPrefix(uri, "postgres://") || strings.HasPrefix(uri, "postgresql://")
}

func openSQL(ctx context.Context, cfg Config) (*Lakehouse, error) {
	if cfg.URI == "" {
		return nil, errors.New("uri (path of the SQLite file, or a postgres:// URI) is required")
	}
	if IsPostgresURI(cfg.URI) {
		return openPostgres(ctx, cfg)
	}
	if strings.HasPrefix(cfg.URI, "file:") || cfg.URI == ":memory:" {
		return nil, fmt.Errorf("sqlite uri %q must be a plain file path", cfg.URI)
	}
	dbPath, err := filepath.Abs(cfg.URI)
	if err != nil {
		return nil, fmt.Errorf("sqlite path: %w", err)
	}

	if cfg.Warehouse == "" {
		cfg.Warehouse = filepath.Join(filepath.Dir(dbPath), "warehouse")
	}
	warehouse, localDir, err := normalizeWarehouse(cfg.Warehouse)
	if err != nil {
		return nil, err
	}

	// Private by default: the catalog and the warehouse (raw payloads, personal data)
	// are created for this user only; SQLite gives its -wal and -shm files the mode of
	// the database file, so that file is created 0600 before SQLite opens it.
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o700); err != nil {
		return nil, fmt.Errorf("create catalog directory: %w", err)
	}
	if localDir != "" {
		if err := os.MkdirAll(localDir, 0o700); err != nil {
			return nil, fmt.Errorf("create warehouse directory: %w", err)
		}
	}
	f, err := os.OpenFile(dbPath, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create catalog %s: %w", dbPath, err)
	}
	_ = f.Close()

	// WAL lets readers proceed during a commit; busy_timeout makes concurrent
	// writers (several goroutines or processes) wait for the write lock
	// instead of failing with SQLITE_BUSY. _txlock=immediate takes that lock
	// at BEGIN of every read-write transaction: a deferred one that reads
	// and then writes cannot upgrade while another writer holds the lock,
	// and SQLite answers SQLITE_BUSY at once, without waiting (concurrent
	// CreateTable failed so under load). Read-only transactions stay
	// deferred. All are set in the DSN so they apply to every pooled
	// connection. SQLite decodes %HH in file: URIs and ends the path at '?'
	// or '#', so those are escaped.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	dsn := "file:" + esc.Replace(filepath.ToSlash(dbPath)) +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", dbPath, err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()

		return nil, fmt.Errorf("open sqlite %s: %w", dbPath, err)
	}

	props := iceberg.Properties{}
	maps.Copy(props, cfg.Properties)
	maps.Copy(props, cfg.S3.props())
	props["warehouse"] = warehouse

	// Constructed directly rather than through catalog.Load, which would also
	// read ~/.iceberg-go.yaml.
	cat, err := sqlcat.NewCatalog(cfg.Name, db, sqlcat.SQLite, props)
	if err != nil {
		_ = db.Close()

		return nil, fmt.Errorf("init sql catalog in %s: %w", dbPath, err)
	}
	if err := refuseOrphanedWarehouse(ctx, db, cfg.Name, dbPath, localDir); err != nil {
		_ = db.Close()

		return nil, err
	}

	return &Lakehouse{cat: cat, db: db, embedded: true, warehouseDir: localDir}, nil
}

// openPostgres opens a SQL catalog whose rows live in PostgreSQL (through pgx's
// database/sql driver). The warehouse must be given: there is no local directory
// the rows belong next to.
func openPostgres(ctx context.Context, cfg Config) (*Lakehouse, error) {
	u, err := url.Parse(cfg.URI)
	if err != nil || u.Host == "" {
		return nil, errors.New("postgres uri must be postgres://user@host:port/database")
	}
	if cfg.Warehouse == "" {
		return nil, errors.New("a postgres catalog needs a warehouse (s3://bucket/prefix, or file:// on a shared filesystem)")
	}
	warehouse, localDir, err := normalizeWarehouse(cfg.Warehouse)
	if err != nil {
		return nil, err
	}
	if localDir != "" {
		if err := os.MkdirAll(localDir, 0o700); err != nil {
			return nil, fmt.Errorf("create warehouse directory: %w", err)
		}
	}
	db, err := sql.Open("pgx", cfg.URI)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", u.Redacted(), err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()

		return nil, fmt.Errorf("open postgres %s: %w", u.Redacted(), err)
	}
	props := iceberg.Properties{}
	maps.Copy(props, cfg.Properties)
	maps.Copy(props, cfg.S3.props())
	props["warehouse"] = warehouse
	cat, err := newPostgresCatalog(ctx, cfg.Name, db, props)
	if err != nil {
		_ = db.Close()

		return nil, fmt.Errorf("init sql catalog in postgres %s: %w", u.Redacted(), err)
	}

	return &Lakehouse{cat: cat, db: db, warehouseDir: localDir}, nil
}

// initLockKey is the PostgreSQL advisory lock taken while the catalog's tables are
// created ("goldbridge" in ASCII, as a bigint).
const initLockKey = 0x676f6c64627269

// newPostgresCatalog is sqlcat.NewCatalog under a session advisory lock: it creates the
// catalog tables with CREATE TABLE IF NOT EXISTS, which is not safe against itself in
// PostgreSQL (two workers starting together on a fresh database: "duplicate key value
// violates unique constraint pg_type_typname_nsp_index"), so workers take turns.
func newPostgresCatalog(ctx context.Context, name string, db *sql.DB, props iceberg.Properties) (*sqlcat.Catalog, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", initLockKey); err != nil {
		return nil, fmt.Errorf("advisory lock: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", initLockKey)
	}()

	return sqlcat.NewCatalog(name, db, sqlcat.Postgres, props)
}

// ErrOrphanedWarehouse reports a catalog without tables beside a local warehouse that
// holds table metadata: a lost, emptied or replaced catalog.db. Opening it would create
// fresh tables over the old ones, re-ingest every landing file and orphan the old files.
var ErrOrphanedWarehouse = errors.New("the catalog has no tables but the warehouse holds some")

// refuseOrphanedWarehouse returns ErrOrphanedWarehouse (wrapped, with what to do) when
// the catalog name has no table in db while the local warehouse has Iceberg metadata
// (<warehouse>/<namespace>.db/<table>/metadata/*.metadata.json). An s3:// warehouse is
// not listed.
func refuseOrphanedWarehouse(ctx context.Context, db *sql.DB, name, dbPath, localDir string) error {
	if localDir == "" {
		return nil
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM iceberg_tables WHERE catalog_name = ?", name).Scan(&n); err != nil {
		return fmt.Errorf("count catalog tables in %s: %w", dbPath, err)
	}
	if n > 0 {
		return nil
	}
	found, err := filepath.Glob(filepath.Join(localDir, "*", "*", "metadata", "*.metadata.json"))
	if err != nil || len(found) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s has no table of catalog %q, and %s holds %d metadata file(s) (e.g. %s); restore catalog.db from a backup, or move the warehouse away to start afresh",
		ErrOrphanedWarehouse, dbPath, name, localDir, len(found), found[0])
}

// restOptions turns the properties that affect the very first request
// (GET /v1/config: authentication) into options; iceberg-go reads the rest
// from the merged configuration only after that request.
func restOptions(props map[string]string) ([]rest.Option, error) {
	var opts []rest.Option
	for k, v := range props {
		if v == "" {
			continue
		}
		switch k {
		case "credential":
			opts = append(opts, rest.WithCredential(v))
		case "token":
			opts = append(opts, rest.WithOAuthToken(v))
		case "scope":
			opts = append(opts, rest.WithScope(v))
		case "audience":
			opts = append(opts, rest.WithAudience(v))
		case "resource":
			opts = append(opts, rest.WithResource(v))
		case "oauth2-server-uri", "rest.authorization-url":
			u, err := url.Parse(v)
			if err != nil || u.Scheme == "" || u.Host == "" {
				return nil, fmt.Errorf("property %s: not an absolute URL", k)
			}
			opts = append(opts, rest.WithAuthURI(u))
		case "rest.sigv4-enabled":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("property %s: %q is not a boolean", k, v)
			}
			if on {
				opts = append(opts, rest.WithSigV4RegionSvc(props["rest.signing-region"], props["rest.signing-name"]))
			}
		}
	}

	return opts, nil
}

func openREST(ctx context.Context, cfg Config) (*Lakehouse, error) {
	if cfg.URI == "" {
		return nil, errors.New("uri (base URL of the REST catalog) is required")
	}
	// Parse here so a malformed URI is reported without echoing it (it may
	// carry a password).
	u, err := url.Parse(cfg.URI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("uri must be an absolute http(s) URL")
	}

	props := iceberg.Properties{}
	maps.Copy(props, cfg.Properties)
	maps.Copy(props, cfg.S3.props())
	if cfg.Warehouse != "" {
		props["warehouse"] = cfg.Warehouse
	}

	opts, err := restOptions(props)
	if err != nil {
		return nil, err
	}
	if cfg.Warehouse != "" {
		opts = append(opts, rest.WithWarehouseLocation(cfg.Warehouse))
	}
	// Everything else (s3.*, header.*, prefix, ...) goes through as
	// properties: iceberg-go re-parses the merged client and server
	// configuration after GET /v1/config, and passes s3.* on to table IO.
	opts = append(opts, rest.WithAdditionalProps(props))

	cat, err := rest.NewCatalog(ctx, cfg.Name, cfg.URI, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", u.Redacted(), err)
	}

	return &Lakehouse{cat: cat}, nil
}

// normalizeWarehouse returns the warehouse as a URL iceberg-go understands and,
// for local warehouses, the directory it designates.
func normalizeWarehouse(w string) (warehouse, localDir string, err error) {
	if !strings.Contains(w, "://") && !strings.HasPrefix(w, "file:") {
		dir, err := filepath.Abs(w)
		if err != nil {
			return "", "", fmt.Errorf("warehouse path: %w", err)
		}

		return fileURL(dir), dir, nil
	}

	u, err := url.Parse(w)
	if err != nil {
		return "", "", fmt.Errorf("warehouse %q is not a valid URL", w)
	}
	switch u.Scheme {
	case "file":
		if (u.Host != "" && u.Host != "localhost") || u.Path == "" || !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return "", "", fmt.Errorf("warehouse %q: file URLs must be absolute (file:///abs/path)", w)
		}
		dir := filepath.Clean(filepath.FromSlash(u.Path))

		return fileURL(dir), dir, nil
	case "s3", "s3a", "s3n":
		if u.Host == "" {
			return "", "", fmt.Errorf("warehouse %q: missing bucket", w)
		}

		return strings.TrimRight(w, "/"), "", nil
	default:
		return "", "", fmt.Errorf("warehouse %q: unsupported scheme %q (want file or s3)", w, u.Scheme)
	}
}

// LocalDir returns the directory of a local (file:// or plain path) warehouse, or ""
// for a remote one (s3://) or an invalid one.
func LocalDir(warehouse string) string {
	_, dir, err := normalizeWarehouse(warehouse)
	if err != nil {
		return ""
	}
	return dir
}

// fileURL returns the file:// URL of an absolute path, percent-escaping
// characters such as space, '%', '#' and '?' (iceberg-go decodes them).
func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// Catalog returns the underlying iceberg-go catalog.
func (l *Lakehouse) Catalog() icecat.Catalog { return l.cat }

// Type returns the catalog type, "sql" or "rest".
func (l *Lakehouse) Type() string { return l.typ }

// DB is the embedded catalog's database (the SQLite file), or nil for a REST or
// Postgres catalog (its SQL dialect is not the one DB's callers speak).
func (l *Lakehouse) DB() *sql.DB {
	if !l.embedded {
		return nil
	}
	return l.db
}

// SharedDB is the PostgreSQL database of a shared SQL catalog, where the workers that
// commit to it also keep their leases (lakehouse/lease); nil for SQLite and REST.
func (l *Lakehouse) SharedDB() *sql.DB {
	if l.embedded || l.typ == TypeREST {
		return nil
	}
	return l.db
}

// Embedded reports whether the catalog is the embedded SQLite file, which only
// this machine's processes can share.
func (l *Lakehouse) Embedded() bool { return l.embedded }

// Name returns the catalog name.
func (l *Lakehouse) Name() string { return l.name }

// Close releases the catalog and, for sql, closes the SQLite database. Tables
// loaded from the catalog must not be committed afterwards. Close is
// idempotent.
func (l *Lakehouse) Close() error {
	l.closeOnce.Do(func() {
		var errs []error
		if c, ok := l.cat.(icecat.Closer); ok {
			errs = append(errs, c.Close())
		}
		if l.db != nil {
			errs = append(errs, l.db.Close())
		}
		l.closeErr = errors.Join(errs...)
	})

	return l.closeErr
}

// pingNamespace is looked up (not created) by Ping.
var pingNamespace = table.Identifier{"goldbridge_ping"}

// Ping is a cheap reachability check for readiness probes: it runs one
// catalog lookup (a SQLite query, or one HTTP request for rest) and, for a
// local warehouse, checks that its directory exists.
func (l *Lakehouse) Ping(ctx context.Context) error {
	if _, err := l.cat.CheckNamespaceExists(ctx, pingNamespace); err != nil {
		return fmt.Errorf("ping catalog %q: %w", l.name, err)
	}
	if l.warehouseDir != "" {
		fi, err := os.Stat(l.warehouseDir)
		if err != nil {
			return fmt.Errorf("ping warehouse: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("ping warehouse: %s is not a directory", l.warehouseDir)
		}
	}

	return nil
}

// ParseIdent splits "ns.table" (or "a.b.table" for nested namespaces) into an
// Iceberg identifier.
func ParseIdent(ident string) (table.Identifier, error) {
	parts := strings.Split(ident, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("table identifier %q: want namespace.table", ident)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("table identifier %q: empty part", ident)
		}
	}

	return parts, nil
}

func parseNamespace(ns string) (table.Identifier, error) {
	parts := strings.Split(ns, ".")
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("namespace %q: empty part", ns)
		}
	}

	return parts, nil
}

// EnsureNamespace creates the namespace unless it exists. It is idempotent and
// tolerates a concurrent creator.
func (l *Lakehouse) EnsureNamespace(ctx context.Context, ns string) error {
	id, err := parseNamespace(ns)
	if err != nil {
		return err
	}
	if err := l.ensureNamespace(ctx, id); err != nil {
		return fmt.Errorf("ensure namespace %s: %w", ns, err)
	}

	return nil
}

func (l *Lakehouse) ensureNamespace(ctx context.Context, ns table.Identifier) error {
	exists, err := l.cat.CheckNamespaceExists(ctx, ns)
	if err != nil {
		return err
	}
	if exists {
		return nil
	}
	err = l.cat.CreateNamespace(ctx, ns, nil)
	if err != nil && !errors.Is(err, icecat.ErrNamespaceAlreadyExists) {
		return err
	}

	return nil
}

// loadTable loads id, making a missing namespace match ErrNoSuchTable too.
func (l *Lakehouse) loadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := l.cat.LoadTable(ctx, id)
	if err != nil && errors.Is(err, icecat.ErrNoSuchNamespace) && !errors.Is(err, icecat.ErrNoSuchTable) {
		return nil, fmt.Errorf("%w: %w", icecat.ErrNoSuchTable, err)
	}

	return tbl, err
}

// LoadTable loads "ns.table". A missing table or namespace gives an error
// matching ErrNoSuchTable.
func (l *Lakehouse) LoadTable(ctx context.Context, ident string) (*table.Table, error) {
	id, err := ParseIdent(ident)
	if err != nil {
		return nil, err
	}
	tbl, err := l.loadTable(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", ident, err)
	}

	return tbl, nil
}

// LoadOrCreateTable loads "ns.table", or creates it (and its namespace) with
// the given schema, partition spec, table properties (plus MetadataProperties) and
// extra create options (a sort order). created reports whether this call created it. Concurrent creators
// are tolerated: the loser loads the winner's table. An existing table's schema and spec are not
// compared with the arguments; when props name a codec (PropCodec) and the table has another, the
// table is set to props' codec (EnsureCodec) and returned as committed.
func (l *Lakehouse) LoadOrCreateTable(ctx context.Context, ident string, sch *iceberg.Schema, spec iceberg.PartitionSpec, props iceberg.Properties,
	extra ...icecat.CreateTableOpt) (*table.Table, bool, error) {
	id, err := ParseIdent(ident)
	if err != nil {
		return nil, false, err
	}
	tbl, err := l.loadTable(ctx, id)
	if err == nil {
		if c, ok := codecOf(props); ok {
			tbl, err = l.EnsureCodec(ctx, ident, tbl, c)
		}
		return tbl, false, err
	}
	if !errors.Is(err, icecat.ErrNoSuchTable) {
		return nil, false, fmt.Errorf("load table %s: %w", ident, err)
	}
	if sch == nil {
		return nil, false, fmt.Errorf("create table %s: nil schema", ident)
	}

	if err := l.ensureNamespace(ctx, icecat.NamespaceFromIdent(id)); err != nil {
		return nil, false, fmt.Errorf("create table %s: namespace: %w", ident, err)
	}
	opts := []icecat.CreateTableOpt{icecat.WithPartitionSpec(&spec), icecat.WithProperties(withMetadataProperties(props))}
	opts = append(opts, extra...)
	tbl, err = l.cat.CreateTable(ctx, id, sch, opts...)
	if errors.Is(err, icecat.ErrTableAlreadyExists) {
		// Lost a race with another creator: use its table.
		if tbl, err = l.loadTable(ctx, id); err != nil {
			return nil, false, fmt.Errorf("load table %s: %w", ident, err)
		}

		return tbl, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("create table %s: %w", ident, err)
	}

	return tbl, true, nil
}
