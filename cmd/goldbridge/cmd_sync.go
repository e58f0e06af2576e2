package main

import (
	"context"

	"github.com/spf13/cobra"

	"goldbridge/sync/pipeline"
)

func (a *app) syncCmd() *cobra.Command {
	var force, rebuild bool
	cmd := &cobra.Command{
		Use:   "sync [MART...]",
		Short: "Push the hot window of each mart's Gold table into ClickHouse, exactly once",
		Long: `For each mart (all by default), creates or checks the ClickHouse tables, pushes every hot
partition whose Gold content changed since its last push (or that is missing in ClickHouse)
with an atomic REPLACE PARTITION, and drops partitions that left the hot window. A mart whose
circuit is open is skipped. Safe to interrupt and re-run: each partition is old or new.
--rebuild MART drops the mart's ClickHouse tables and pushes the window again.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.stageCmd(cmd.Context(), "sync", args, pipeline.ServeOptions{Force: force, Rebuild: rebuild})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "push every hot partition even if unchanged")
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "drop and recreate the mart's ClickHouse tables, then push the hot window")
	return cmd
}

func (a *app) checkCmd() *cobra.Command {
	var repair bool
	cmd := &cobra.Command{
		Use:   "check [MART...]",
		Short: "Compare every hot partition between Gold and ClickHouse; exit 4 on drift",
		Long: `Compares, per hot partition and grouping level, the row count, an order-independent
fingerprint of every served row (every dimension and finished measure value) and the sum of
every numeric measure between the Gold Iceberg table and ClickHouse, and the served table's
columns with the mart's DDL; prints the partitions that differ and exits with status 4 if
any do. --repair re-pushes them (rebuilding a drifted table) and checks again.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.stageCmd(cmd.Context(), "check", args, pipeline.ServeOptions{Repair: repair})
		},
	}
	cmd.Flags().BoolVar(&repair, "repair", false, "re-push the drifting partitions")
	return cmd
}

// stageCmd runs the sync or check stage (pipeline.Runner.Serve) for the marts named in args (all by
// default), as a command: with the config loaded, the state lock taken and the
// lakehouse open (openWriter).
func (a *app) stageCmd(ctx context.Context, stage string, args []string, o pipeline.ServeOptions) error {
	p, done, err := a.openWriter(ctx)
	if err != nil {
		return err
	}
	defer done()
	marts, err := selectNames("mart", p.cfg.Marts, args)
	if err != nil {
		return err
	}
	ctx, release, err := a.claimAll(ctx, p.Lake, p.cfg, nil, marts)
	if err != nil {
		return err
	}
	defer release()
	return p.Serve(ctx, stage, marts, o)
}
