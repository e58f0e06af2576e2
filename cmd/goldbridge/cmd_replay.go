package main

import (
	"context"

	"github.com/spf13/cobra"
)

func (a *app) replayCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "replay ENTITY",
		Short: "Rebuild silver.<entity> and its quarantine from all of Bronze",
		Long: `Reads every row of the entity's Bronze table at its current snapshot and rebuilds the
Silver table, its quarantine table and (append mode) its keys table from them, replacing
each table's contents in one commit. The result equals what the incremental runs would
have produced (run ids and timestamps aside). Each commit records the Bronze snapshot as
the new watermark and goldbridge.replay=true, which tells Gold to recompute fully.

Use it when silver fails because the Bronze snapshots it still needed were expired, or
after changing the entity's rules. Replaying again is safe.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.oneStage(cmd.Context(), "entity", args, func(ctx context.Context, p *job, names []string) error {
				return p.Replay(ctx, names[0])
			})
		},
	}
}
