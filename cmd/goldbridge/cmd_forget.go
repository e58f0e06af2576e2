package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"goldbridge/lakehouse/bronze"
)

func (a *app) forgetCmd() *cobra.Command {
	var (
		where   string
		confirm bool
	)
	cmd := &cobra.Command{
		Use:   "forget ENTITY --where 'field = value' --confirm",
		Short: "Right to be forgotten: delete matching rows from Bronze and expire the history that holds them",
		Long: `The one exception to append-only Bronze, and the last resort after tokenising before the
lake and crypto-shredding (docs/bronze.md). Rewrites the Bronze data files that hold rows
whose payload field equals the value, then expires every earlier snapshot and deletes
the files only they used, so no time travel can serve the rows again. The value is never
logged or stored (only its SHA-256). Without --confirm it only counts the matches.
Silver, Gold and ClickHouse are not touched: rebuild them with replay.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, done, err := a.openWriter(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			cfg := p.cfg
			if _, err := selectNames("entity", cfg.Entities, args); err != nil {
				return err
			}
			req, err := bronze.ParseForgetWhere(where)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("--where: %w", err)}
			}
			ctx := cmd.Context()
			lh := p.lh
			res, err := bronze.Forget(ctx, lh, cfg.Entities[args[0]].Bronze.Table, req, confirm)
			if errors.Is(err, bronze.ErrNotConfirmed) {
				return &exitError{exitUsage, err}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "forget %s: %d rows removed from %d data files, snapshot %d; %d earlier snapshots expired, %d files deleted\n",
				args[0], res.Matched, res.FilesRewritten, res.DeleteSnapshotID, res.ExpiredSnapshots, res.RemovedFiles)
			return nil
		},
	}
	cmd.Flags().StringVar(&where, "where", "", "payload field and value: 'user_id = u-42' (required)")
	cmd.Flags().BoolVar(&confirm, "confirm", false, "really delete (without it: count matches only)")
	_ = cmd.MarkFlagRequired("where")
	return cmd
}
