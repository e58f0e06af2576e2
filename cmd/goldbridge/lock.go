package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/catalog"
	"goldbridge/sync/pipeline"
)

// leases are the cross-machine leases (pipeline.Leases) of cfg's catalog, held as this
// state dir's worker; with an embedded or REST catalog they claim nothing (the state
// lock guards it).
func (a *app) leases(ctx context.Context, lh *catalog.Lakehouse, cfg *config.Config) (pipeline.Leases, error) {
	return pipeline.OpenLeases(ctx, lh, a.stateDir, cfg.Lakehouse.Catalog.LeaseTTL.D(), a.leaseWait, a.log)
}

// claimWork leases the entities and marts a run is about to work on, leaving out those
// another worker holds (pipeline.Leases.ClaimFree).
func (a *app) claimWork(ctx context.Context, lh *catalog.Lakehouse, cfg *config.Config, entities, marts []string) (context.Context, []string, []string, func(), error) {
	l, err := a.leases(ctx, lh, cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return l.ClaimFree(ctx, entities, marts)
}

// leased gives a one-stage command that writes (one that calls claimAll) its --wait flag.
func (a *app) leased(cmd *cobra.Command) *cobra.Command {
	cmd.Flags().DurationVar(&a.leaseWait, "wait", 0, "with a shared PostgreSQL catalog: wait up to this long for another worker's lease on an entity or mart this command touches (default: fail at once, exit 7)")
	return cmd
}

// claimAll leases every entity and mart a one-stage command that writes touches, for its
// whole life, or fails with exit code exitLeaseHeld after --wait (pipeline.Leases.ClaimAll).
func (a *app) claimAll(ctx context.Context, lh *catalog.Lakehouse, cfg *config.Config, entities, marts []string) (context.Context, func(), error) {
	l, err := a.leases(ctx, lh, cfg)
	if err != nil {
		return nil, nil, err
	}
	ctx, release, err := l.ClaimAll(ctx, entities, marts)
	if errors.Is(err, pipeline.ErrLeaseHeld) {
		return nil, nil, &exitError{exitLeaseHeld, err}
	}
	return ctx, release, err
}
