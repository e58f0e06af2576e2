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

	"github.com/gofrs/flock"

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
func (p *pipeline) claimWork(ctx context.Context, entities, marts []string) (context.Context, []string, []string, func(), error) {
	db := p.lh.SharedDB()
	if db == nil {
		return ctx, entities, marts, func() {}, nil
	}
	holder, err := workerID(p.a.stateDir)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("lease holder: %w", err)
	}
	store, err := lease.Open(ctx, db, lease.Postgres, holder, p.cfg.Lakehouse.Catalog.LeaseTTL.D())
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var names []string
	for _, e := range entities {
		names = append(names, "entity/"+e)
	}
	for _, m := range marts {
		names = append(names, "mart/"+m)
	}
	set, busy, err := store.Acquire(ctx, names)
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
	ctx, cancel := context.WithCancelCause(ctx)
	go set.Keep(ctx, func(err error) {
		p.a.log.Error("lease lost: stopping the run", "err", err)
		cancel(err)
	})
	release := func() {
		cancel(nil)
		if err := set.Release(context.WithoutCancel(ctx)); err != nil {
			p.a.log.Warn("releasing leases", "err", err)
		}
	}
	return catalog.WithFence(ctx, set.Check), keep("entity", entities), keep("mart", marts), release, nil
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
