package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/hotconn"
	"goldbridge/cmd/goldbridge/internal/plan"
	"goldbridge/lakehouse/asof"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/lakesql"
	"goldbridge/sync/pipeline"
)

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
			cfg, err := a.readConfig() // a ClickHouse of its own (hotconn.Opener.StartLake), not the embedded one
			if err != nil {
				return err
			}
			if err := plan.QueryPossible(cfg); err != nil {
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
			base, pw, stop, err := a.ch().StartLake(ctx, cfg)
			if err != nil {
				return fmt.Errorf("query: %w", err)
			}
			defer stop()
			return hotconn.HTTPQuery(ctx, base, chlocal.DefaultUser, pw, sql, lakesql.QuerySettings(), a.stdout)
		},
	}
	cmd.Flags().StringVar(&asOf, "as-of", "", "read the lake tables as of an RFC 3339 time (the snapshot current then), or one table at a snapshot id")
	return cmd
}

// lakeSQL rewrites a query's lake table names to ClickHouse's Iceberg reader
// (lakesql.ForLake), a snapshot maintenance no longer keeps named with its retention.
func (a *app) lakeSQL(ctx context.Context, cfg *config.Config, query string, opt lakesql.AsOf) (string, error) {
	lh, err := plan.OpenLakehouse(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer lh.Close()
	sql, used, err := lakesql.ForLake(ctx, lh, query, opt, func(name string) string { return plan.RetentionNote(cfg, name) })
	if errors.Is(err, lakesql.ErrQuery) {
		return "", &exitError{exitUsage, fmt.Errorf("query: %w", err)}
	} else if err != nil {
		return "", fmt.Errorf("query: %w", err)
	}
	a.log.Debug("query", "lake_tables", strings.Join(used, ","))
	return sql, nil
}
