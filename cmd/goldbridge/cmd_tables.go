package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/plan"
	"goldbridge/lakehouse/asof"
	"goldbridge/lakehouse/catalog"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/lakesql"
	"goldbridge/sync/pipeline"
)

// localPath is the local path of a file:// location; ok is false for other schemes.
func localPath(loc string) (string, bool) {
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "file" {
		return "", false
	}
	return filepath.FromSlash(u.Path), true
}

func (a *app) tablesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "tables",
		Short: "List every table of the lake with its snapshot, rows, files and watermark",
		Long: `Lists every Iceberg table of the catalog: its current snapshot and commit time, the
records in its data files, its delete records (an upsert's replaced versions), its data
files, its watermark (the Bronze or Silver snapshot it is processed up to), and for a
Silver table the undeclared payload fields its last run met (goldbridge.quality).
Reads the catalog only: no ClickHouse is needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.readConfig()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			lh, err := plan.OpenLakehouse(ctx, cfg)
			if err != nil {
				return err
			}
			defer lh.Close()
			tables, err := pipeline.DescribeTables(ctx, lh)
			if err != nil {
				return fmt.Errorf("tables: %w", err)
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TABLE\tSNAPSHOT\tCOMMITTED\tRECORDS\tDELETES\tFILES\tWATERMARK\tUNDECLARED")
			for _, t := range tables {
				snap, at := "-", "-"
				if t.Snapshot != 0 {
					snap, at = strconv.FormatInt(t.Snapshot, 10), t.Committed.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, snap, at, t.Records, t.Deletes, t.Files, orDash(t.Watermark), orDash(t.Undeclared))
			}
			return w.Flush()
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) queryCmd() *cobra.Command {
	var asOf string
	cmd := &cobra.Command{
		Use:   "query SQL",
		Short: "Run SQL over the lake's tables by name (silver.orders, gold.daily_revenue_kpi) in the embedded ClickHouse",
		Long: `Runs one SQL statement in ClickHouse, where every lake table named as namespace.table
(e.g. silver.orders_quarantine) reads that table's current snapshot through ClickHouse's
Iceberg reader. Other names (the served marts, system tables) are ClickHouse's own.

  goldbridge query "SELECT error_reason, count() FROM silver.orders_quarantine GROUP BY 1"

Past snapshots, within what maintenance keeps (maintenance.retain_age): --as-of reads
every lake table of the query as of a time (the snapshot current then), or one table at
a snapshot id; a table name followed by FOR TIMESTAMP AS OF '<RFC 3339>' or FOR VERSION
AS OF <snapshot id> reads that table so:

  goldbridge query --as-of 2026-12-04T09:00:00Z "SELECT * FROM gold.daily_revenue_kpi"
  goldbridge query "SELECT count() FROM bronze.orders FOR VERSION AS OF 3547395809148285433"

A snapshot the table no longer keeps, or a time before its oldest one, is refused (exit 2).

It runs in a ClickHouse of its own, started for the query and confined to reading the
warehouse (the embedded server cannot read it: docs/operations.md), so the served marts
are not visible here (use clickhouse query). It needs a local (file://) warehouse:
an external ClickHouse cannot read this machine's warehouse, and an s3:// warehouse is
not read yet (query it with ClickHouse's icebergS3).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.readConfig() // a ClickHouse of its own (lakeServer), not the embedded one
			if err != nil {
				return err
			}
			if err := queryPossible(cfg); err != nil {
				return &exitError{exitUsage, err}
			}
			opt := lakesql.AsOf{}
			if cmd.Flags().Changed("as-of") {
				r, err := asof.Parse(asOf)
				if err != nil {
					return &exitError{exitUsage, fmt.Errorf("query: --as-of: %w", err)}
				}
				opt.Global = &r
			}
			ctx := cmd.Context()
			sql, err := a.lakeSQL(ctx, cfg, args[0], opt)
			if err != nil {
				return err
			}
			base, pw, stop, err := a.lakeServer(ctx, cfg)
			if err != nil {
				return fmt.Errorf("query: %w", err)
			}
			defer stop()
			return httpQuery(ctx, base, chlocal.DefaultUser, pw, sql, lakesql.QuerySettings(), a.stdout)
		},
	}
	cmd.Flags().StringVar(&asOf, "as-of", "", "read the lake tables as of an RFC 3339 time (the snapshot current then), or one table at a snapshot id")
	return cmd
}

// lakeSQL rewrites a query's lake table names to ClickHouse's Iceberg reader of their
// current metadata, resolving the snapshots opt and the query's FOR ... AS OF clauses
// name against the same metadata.
func (a *app) lakeSQL(ctx context.Context, cfg *config.Config, query string, opt lakesql.AsOf) (string, error) {
	lh, err := plan.OpenLakehouse(ctx, cfg)
	if err != nil {
		return "", err
	}
	tables, err := pipeline.DescribeTables(ctx, lh)
	lh.Close()
	if err != nil {
		return "", fmt.Errorf("query: %w", err)
	}
	byName := map[string]lakesql.Table{}
	loaded := map[string]*table.Table{}
	for _, t := range tables {
		var lt lakesql.Table
		lt.Dir, _ = localPath(t.Table.Location())
		lt.Metadata, _ = localPath(t.Table.MetadataLocation())
		byName[t.Name], loaded[t.Name] = lt, t.Table
	}
	now := time.Now()
	opt.Resolve = func(name string, r asof.Ref) (int64, error) {
		s, err := asof.Resolve(ctx, loaded[name], r, now)
		if errors.Is(err, asof.ErrNotKept) {
			err = fmt.Errorf("%w; %s", err, retentionNote(cfg, name))
		}
		if err != nil {
			return 0, err
		}
		a.log.Debug("query as of", "table", name, "as_of", r.String(), "snapshot", s.SnapshotID)
		return s.SnapshotID, nil
	}
	sql, used, err := lakesql.Rewrite(query, byName, opt)
	if err != nil {
		return "", &exitError{exitUsage, fmt.Errorf("query: %w", err)}
	}
	for _, t := range tables {
		if slices.Contains(used, t.Name) && byName[t.Name].Dir == "" {
			return "", &exitError{exitUsage, fmt.Errorf("query reads local (file://) tables only; %s lives at %s: query it with ClickHouse's icebergS3", t.Name, t.Table.Location())}
		}
	}
	a.log.Debug("query", "lake_tables", strings.Join(used, ","))
	return sql, nil
}

// retentionNote says how far back maintenance keeps a table's snapshots.
func retentionNote(cfg *config.Config, name string) string {
	p := cfg.MaintenanceOf(name, plan.TableLayer(cfg, name))
	return fmt.Sprintf("maintenance expires the snapshots of %s older than maintenance.retain_age (%s for it) beyond its %d newest (retain_min): docs/operations.md, \"Maintenance\"; raise retain_age to reach further back",
		name, p.RetainAge, *p.RetainMin)
}

// queryPossible says why goldbridge query cannot read the lake of cfg, or nil.
func queryPossible(cfg *config.Config) error {
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

// lakeServer starts a private ClickHouse for goldbridge query: a temporary data directory
// under the state dir, free loopback ports, a one-time admin password, the warehouse as
// its working directory and the one directory it may read besides its own. It returns
// the HTTP base URL, the admin's password and the function that stops and removes it.
func (a *app) lakeServer(ctx context.Context, cfg *config.Config) (string, string, func(), error) {
	dir, err := os.MkdirTemp(cfg.StateDir, "query-clickhouse-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	ports, err := chlocal.FreePorts(2)
	if err != nil {
		cleanup()
		return "", "", nil, err
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		cleanup()
		return "", "", nil, err
	}
	pw := hex.EncodeToString(raw)
	lake := catalog.LocalDir(cfg.Lakehouse.Warehouse)
	srv, stopSrv, err := a.ch().StartServer(ctx, chlocal.Options{
		Path: filepath.Join(dir, "data"), TCPPort: ports[0], HTTPPort: ports[1], Password: pw,
		Dir: lake, ReadDirs: []string{lake}, MaxServerMemory: cfg.ClickHouse.Local.MaxServerMemory,
	})
	if err != nil {
		cleanup()
		return "", "", nil, fmt.Errorf("lake clickhouse: %w", err)
	}
	return srv.HTTPURL(), pw, func() {
		stopSrv()
		cleanup()
	}, nil
}
