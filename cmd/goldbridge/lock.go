package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lease"
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

// claimWork takes the cross-machine leases (lakehouse/lease) of the entities and marts a
// run is about to work on, when the catalog is shared (PostgreSQL): a name another worker
// holds is left out of this run (logged), so two workers sharing a catalog never ingest,
// build or push the same entity or mart at once. The returned context makes every catalog
// commit check the leases first and ends when a lease is lost; release gives the leases
// up. With an embedded or REST catalog it returns its input: the state lock guards it.
// The one-stage commands use its strict variant, claimAll.
func (p *pipeline) claimWork(ctx context.Context, entities, marts []string) (context.Context, []string, []string, func(), error) {
	store, err := p.a.leaseStore(ctx, p.lh, p.cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if store == nil {
		return ctx, entities, marts, func() {}, nil
	}
	set, busy, err := store.Acquire(ctx, leaseNames(entities, marts))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keep := func(kind string, in []string) []string {
		var out []string
		for _, n := range in {
			if holder, ok := busy[kind+"/"+n]; ok {
				p.a.log.Info("skipped: another worker holds its lease", kind, n, "holder", holder)
				continue
			}
			out = append(out, n)
		}
		return out
	}
	ctx, release := p.a.fence(ctx, set, "run")
	return ctx, keep("entity", entities), keep("mart", marts), release, nil
}

// errLeaseHeld is returned (as exit code exitLeaseHeld) by claimAll when another worker
// holds the lease of an entity or mart the command would touch.
var errLeaseHeld = errors.New("another worker holds the lease")

// leaseWaitPoll is how often claimAll tries again while it waits (--wait).
const leaseWaitPoll = 500 * time.Millisecond

// leased gives a one-stage command that writes (one that calls claimAll) its --wait flag.
func (a *app) leased(cmd *cobra.Command) *cobra.Command {
	cmd.Flags().DurationVar(&a.leaseWait, "wait", 0, "with a shared PostgreSQL catalog: wait up to this long for another worker's lease on an entity or mart this command touches (default: fail at once, exit 7)")
	return cmd
}

// claimAll is claimWork's strict variant, for the one-stage commands that write (ingest,
// silver, replay, compact, forget, gold, sync, check): the command touches every entity
// and mart given or none. With a shared (PostgreSQL) catalog it leases them all for the
// command's whole life, with claimWork's fencing (the returned context checks the leases
// before every catalog commit and ends when one is lost; release gives them up). If
// another worker holds one of them, it fails at once with errLeaseHeld (exit code
// exitLeaseHeld) naming each such entity or mart, its holder and when its lease expires;
// with --wait (a.leaseWait > 0) it gives back what it took and tries again every
// leaseWaitPoll until it gets them all or the wait is over. It never holds some names
// while it waits for the others, so two waiting commands cannot block each other. With an
// embedded or REST catalog it returns ctx and the command runs as before: the state lock
// guards it.
func (a *app) claimAll(ctx context.Context, lh *catalog.Lakehouse, cfg *config.Config, entities, marts []string) (context.Context, func(), error) {
	store, err := a.leaseStore(ctx, lh, cfg)
	if err != nil {
		return nil, nil, err
	}
	if store == nil {
		return ctx, func() {}, nil
	}
	names := leaseNames(entities, marts)
	waited := time.Now()
	for tries := 0; ; tries++ {
		set, busy, err := store.Acquire(ctx, names)
		if err != nil {
			return nil, nil, err
		}
		if len(busy) == 0 {
			ctx, release := a.fence(ctx, set, "command")
			return ctx, release, nil
		}
		if err := set.Release(context.WithoutCancel(ctx)); err != nil {
			return nil, nil, err
		}
		held, free, err := describeLeases(ctx, store, names, busy)
		if err != nil {
			return nil, nil, err
		}
		if free && tries < 3 {
			continue // released between the two statements: try again at once
		}
		left := a.leaseWait - time.Since(waited)
		if left <= 0 {
			msg := "wait for it to finish or pass --wait DURATION"
			if a.leaseWait > 0 {
				msg = fmt.Sprintf("still held after waiting %s", a.leaseWait)
			}
			return nil, nil, &exitError{exitLeaseHeld, fmt.Errorf("%w: %s; %s", errLeaseHeld, held, msg)}
		}
		if tries == 0 {
			a.log.Info("waiting for another worker's lease", "leases", held, "wait", a.leaseWait.String())
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for a lease (%s): %w", held, context.Cause(ctx))
		case <-time.After(min(leaseWaitPoll, left)):
		}
	}
}

// describeLeases names the busy leases among names, in their order, with their holders
// and expiries; free is true if every one of them turned out free by now.
func describeLeases(ctx context.Context, store *lease.Store, names []string, busy map[string]string) (string, bool, error) {
	var parts []string
	free := true
	for _, name := range names {
		if _, ok := busy[name]; !ok {
			continue
		}
		l, ok, err := store.Lookup(ctx, name)
		if err != nil {
			return "", false, err
		}
		kind, n, _ := strings.Cut(name, "/")
		if !ok || l.Remaining <= 0 {
			parts = append(parts, fmt.Sprintf("%s %s (released just now)", kind, n))
			continue
		}
		free = false
		parts = append(parts, fmt.Sprintf("%s %s (holder %s, lease expires %s, in %s, unless renewed)",
			kind, n, l.Holder, l.Expires.Format(time.RFC3339), l.Remaining.Round(time.Second)))
	}
	return strings.Join(parts, "; "), free, nil
}

// leaseStore opens the lease table of a shared catalog as this state dir's worker
// (workerID); nil, without an error, when the catalog is not shared.
func (a *app) leaseStore(ctx context.Context, lh *catalog.Lakehouse, cfg *config.Config) (*lease.Store, error) {
	db := lh.SharedDB()
	if db == nil {
		return nil, nil
	}
	holder, err := workerID(a.stateDir)
	if err != nil {
		return nil, fmt.Errorf("lease holder: %w", err)
	}
	return lease.Open(ctx, db, lease.Postgres, holder, cfg.Lakehouse.Catalog.LeaseTTL.D())
}

// leaseNames are the lease names of entities and marts: entity/<name>, mart/<name>.
func leaseNames(entities, marts []string) []string {
	var names []string
	for _, e := range entities {
		names = append(names, "entity/"+e)
	}
	for _, m := range marts {
		names = append(names, "mart/"+m)
	}
	return names
}

// fence keeps set renewed in the background and returns the context of the work it
// guards (what: "run" or "command", for the log): every catalog commit made with it
// checks the leases first, and it ends as soon as one is lost, with that loss as its
// cause, which a commit refused afterwards reports too. release gives the leases up.
func (a *app) fence(ctx context.Context, set *lease.Set, what string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	check := func(ctx context.Context) error {
		err := set.Check(ctx)
		if cause := context.Cause(ctx); cause != nil {
			return cause // lease.ErrLost once Keep found the loss, not "context canceled"
		}
		return err
	}
	go set.Keep(ctx, func(err error) {
		a.log.Error("lease lost: stopping the "+what, "err", err)
		cancel(err)
	})
	release := func() {
		cancel(nil)
		if err := set.Release(context.WithoutCancel(ctx)); err != nil {
			a.log.Warn("releasing leases", "err", err)
		}
	}
	return catalog.WithFence(ctx, check), release
}

// workerIDFile keeps this state dir's lease holder id.
const workerIDFile = "worker-id"

// workerID is the lease holder id of this state dir: the host name and a random id made
// once and kept in <state-dir>/worker-id. The state lock makes it unique among live
// processes, so a worker restarted on the same state dir (a crashed pod's container, a
// cron run after a failed one) takes its own leases back at once instead of waiting for
// their TTL, while another machine's worker never shares it.
func workerID(stateDir string) (string, error) {
	path := filepath.Join(stateDir, workerIDFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		host, _ := os.Hostname()
		id := host + "/" + rand.Text()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, path); err != nil {
			return "", err
		}
		return id, nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
