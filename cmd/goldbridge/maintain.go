package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"
)

func (a *app) maintainCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "maintain [TABLE...]",
		Short: "Expire old snapshots, compact small files and merge manifests of every lake table (run and serve do it by themselves)",
		Long: `Keeps what each lake table costs independent of how many runs it has seen
(docs/operations.md, "Maintenance"): snapshots outside maintenance.retain_age and
retain_min are expired and the files only they used deleted, never one that a
watermark or a Gold mart still starts from; small files are compacted (Bronze per
partition once every consumer has read them, Silver's merge-on-read debt, quarantine
and keys tables); manifests are merged; old metadata files are bounded. Rows, run ids
and watermarks never change: gold recomputes nothing and sync pushes nothing because of it.
With TABLE arguments (e.g. silver.orders) only those tables are maintained.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, done, err := a.openWriter(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			names := p.cfg.TableNames()
			for _, t := range args {
				if !slices.Contains(names, t) {
					return &exitError{exitUsage, fmt.Errorf("maintain: %q is not a table of this pipeline (%v)", t, names)}
				}
			}
			entities, marts := slices.Sorted(maps.Keys(p.cfg.Entities)), slices.Sorted(maps.Keys(p.cfg.Marts))
			ctx, release, err := a.claimAll(cmd.Context(), p.Lake, p.cfg, entities, marts)
			if err != nil {
				return err
			}
			defer release()
			return p.Maintain(ctx, entities, marts, args)
		},
	}
}
