package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/plan"
	"goldbridge/lakehouse/gold"
)

func (a *app) goldCmd() *cobra.Command {
	var full, rebuild, noDelta bool
	cmd := &cobra.Command{
		Use:   "gold [MART...]",
		Short: "Recompute the Gold partitions touched by Silver changes, through the data-quality gateway",
		Long: `Recomputes, for each mart, only the grain partitions that Silver changes since the last run
touched (both the new and the previous version of every changed row count), checks them
with the mart's data-quality checks and replaces exactly those partitions in one commit.
A failed critical check publishes nothing, opens the mart's circuit (sync then skips the
mart) and exits with code 3; the next passing run closes it. --full recomputes every
partition; --rebuild drops the Gold table and computes it again (what a changed mart
definition does unless its on_change is fail). When Silver only added rows, their
aggregates are merged into the touched partitions' Gold rows; --no-delta recomputes
those partitions whole instead (the same result, the way every other change is done).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.oneStage(cmd.Context(), "mart", args, func(ctx context.Context, p *job, marts []string) error {
				p.Full, p.Rebuild, p.NoDelta = full, rebuild, noDelta
				return p.Gold(ctx, marts)
			})
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "recompute every partition")
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "drop the Gold table and compute it again")
	cmd.Flags().BoolVar(&noDelta, "no-delta", false, "recompute the touched partitions whole even when Silver only added rows")
	return cmd
}

func (a *app) freshnessCmd() *cobra.Command {
	var maxAge time.Duration
	cmd := &cobra.Command{
		Use:   "freshness [MART...]",
		Short: "Print each mart's last successful calculation and newest grain; exit 5 on an SLA breach",
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.readConfig() // the catalog only
			if err != nil {
				return err
			}
			marts, err := selectNames("mart", cfg.Marts, args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			lh, err := plan.OpenLakehouse(ctx, cfg)
			if err != nil {
				return err
			}
			defer lh.Close()
			var stale []string
			fmt.Fprintf(a.stdout, "%-28s %-25s %-12s %-12s %s\n", "MART", "LAST CALCULATED", "AGE", "NEWEST", "CIRCUIT")
			for _, name := range marts {
				f, err := gold.ReadFreshness(ctx, lh, cfg.Marts[name].Table)
				if err != nil {
					return err
				}
				age := time.Since(f.LastCalculated).Round(time.Second)
				last := f.LastCalculated.Format(time.RFC3339)
				if f.LastCalculated.IsZero() {
					last, age = "never", 0
				}
				fmt.Fprintf(a.stdout, "%-28s %-25s %-12s %-12s %s\n", name, last, age, f.NewestGrain, f.Circuit)
				if f.LastCalculated.IsZero() || age > maxAge {
					stale = append(stale, name)
				}
			}
			if len(stale) > 0 {
				return &exitError{exitStale, fmt.Errorf("freshness SLA (%s) breached: %s", maxAge, strings.Join(stale, ", "))}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&maxAge, "max-age", 26*time.Hour, "largest acceptable age of the last successful calculation")
	return cmd
}
