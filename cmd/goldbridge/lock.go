package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/gofrs/flock"
	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/catalog"
	"goldbridge/sync/pipeline"
)

// lockFileName is the state lock inside --state-dir.
const lockFileName = "goldbridge.lock"

// errStateLocked is returned by lockState when another process holds the state lock.
var errStateLocked = errors.New("state is locked by another goldbridge process")

// lockState takes the exclusive lock <state-dir>/goldbridge.lock, so that two goldbridge
// processes never write the same embedded tables (SQLite catalog, local warehouse, local
// ClickHouse data). Every command that writes (ingest, silver, gold, forget, sync, run,
// replay, serve) takes it for its whole life; read-only commands do not. It does not
// wait: a second writer fails at once with errStateLocked (exit code 1), which is also
// what keeps a cron or systemd timer run from overlapping a slow previous one or a
// running `serve`. The kernel releases the lock when the process dies, however it dies.
//
// The lock is local to one machine: with a REST catalog and an external ClickHouse
// shared by several hosts, run one writer per pipeline (a Kubernetes Deployment with
// one replica, or CronJobs with concurrencyPolicy: Forbid).
func (a *app) lockState() (unlock func(), err error) {
	if err := privateStateDir(a.stateDir, a.log); err != nil {
		return nil, fmt.Errorf("state lock: %w", err)
	}
	path := filepath.Join(a.stateDir, lockFileName)
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("state lock %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w (%s); wait for it to finish or stop `goldbridge serve`", errStateLocked, path)
	}
	// The holder's pid, for people: the lock itself is the flock, not the content.
	_ = os.WriteFile(path, fmt.Appendf(nil, "%d\n", os.Getpid()), 0o600)
	return func() { _ = fl.Unlock() }, nil
}

// privateStateDir creates the state directory 0700, or makes an existing one 0700 (with a
// warning): it holds the catalog, the raw Bronze payloads, the ClickHouse data and the
// generated passwords, none of which other users of the machine may read. Files inside
// are created 0600 (setup sets the umask to 077), and the 0700 directory also guards
// files left readable by an older version.
func privateStateDir(dir string, log *slog.Logger) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 && log != nil {
		log.Warn("state directory was readable by others: made private (0700)", "dir", dir, "was", st.Mode().Perm().String())
	}
	if st.Mode().Perm()&0o077 != 0 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

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
