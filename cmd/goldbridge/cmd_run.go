package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/sync/pipeline"
)

func (a *app) runCmd() *cobra.Command {
	var entities, marts []string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "One-shot run of the whole chain: ingest → silver → gold → sync, for cron and Kubernetes CronJobs",
		Long: `Runs every stage for all entities and marts once, in data-flow order, and prints a
summary. Each source, entity and mart succeeds or fails on its own: a failing one is
reported (named in the error, exit 1) while the others still go through every stage. A
mart whose circuit opens does not stop the others; its sync is skipped.
Exit codes: 0 success, 1 failure (the failed sources, entities or marts are named),
2 usage or config error, 3 a mart's circuit is open, 4 reconciliation found drift,
5 freshness SLA breached, 6 a Silver quarantine gate stopped an entity.
Metrics go to metrics.textfile (node_exporter textfile collector) or metrics.pushgateway
when configured.
With a PostgreSQL catalog shared by several workers, each entity and mart is leased
(lakehouse.catalog.lease_ttl): one another worker holds is skipped by this run, so
workers started together split the work; --entities and --marts split it by hand.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			unlock, err := pipeline.LockState(a.stateDir, a.log)
			if err != nil {
				return err
			}
			defer unlock()
			err = a.runOnce(cmd.Context(), cfg, allStages, entities, marts)
			if merr := a.writeMetrics(cmd.Context(), cfg); merr != nil {
				a.log.Warn("writing metrics", "err", merr)
			}
			return err
		},
	}
	cmd.Flags().StringSliceVar(&entities, "entities", nil, "only these entities (their sources, Bronze and Silver); default all")
	cmd.Flags().StringSliceVar(&marts, "marts", nil, "only these marts (Gold and serving); default all")
	return cmd
}

var allStages = []string{"ingest", "silver", "gold", "sync"}

// runOnce runs the given stages in data-flow order (nil entities/marts: all of them).
func (a *app) runOnce(ctx context.Context, cfg *config.Config, stages, entities, marts []string) error {
	entities, err := selectNames("entity", cfg.Entities, entities)
	if err != nil {
		return err
	}
	marts, err = selectNames("mart", cfg.Marts, marts)
	if err != nil {
		return err
	}
	j, err := a.newJob(ctx, cfg)
	if err != nil {
		return err
	}
	defer j.close()
	ctx, entities, marts, release, err := a.claimWork(ctx, j.Lake, cfg, entities, marts)
	if err != nil {
		return err
	}
	defer release()
	return j.Run(ctx, stages, entities, marts)
}

// writeMetrics leaves a one-shot run's metrics where the config says.
func (a *app) writeMetrics(ctx context.Context, cfg *config.Config) error {
	if a.metrics == nil {
		return nil
	}
	if path := cfg.Metrics.Textfile; path != "" {
		// Write then rename: the textfile collector must never read a half-written file.
		tmp := path + ".tmp"
		if err := prometheus.WriteToTextfile(tmp, a.metrics.Registry); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("metrics textfile %s: %w", filepath.Base(path), err)
		}
	}
	if url := cfg.Metrics.Pushgateway; url != "" {
		if err := push.New(url, cfg.Metrics.Job).Gatherer(a.metrics.Registry).PushContext(ctx); err != nil {
			return fmt.Errorf("pushgateway: %w", err)
		}
	}
	return nil
}
