package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"goldbridge/lakehouse/silver"
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
			return a.oneStage(cmd.Context(), "entity", args, func(ctx context.Context, p *pipeline, names []string) error {
				return a.replay(ctx, p, names[0])
			})
		},
	}
}

// replay rebuilds one entity's Silver from Bronze (silver.Replay) and prints the result.
func (a *app) replay(ctx context.Context, p *pipeline, name string) error {
	cfg := p.cfg
	spec, err := entitySpec(cfg, name)
	if err != nil {
		return err
	}
	_, decrypt, err := piiOptions(ctx, p.lh, cfg, name)
	if err != nil {
		return err
	}
	res, err := silver.Replay(ctx, p.lh, spec, cfg.Entities[name].Bronze.Table, silver.Options{
		Log: a.log.With("stage", "replay", "entity", name), Decrypt: decrypt, PassRows: cfg.Entities[name].Silver.PassRows,
	})
	p.observeQuality(name, res)
	if errors.Is(err, silver.ErrCriticalCheck) {
		a.printSilverResult("replay", spec, res) // which check failed, on what
	}
	if err != nil {
		return fmt.Errorf("replay %s: %w", name, err)
	}
	a.printSilverResult("replay", spec, res)
	return nil
}
