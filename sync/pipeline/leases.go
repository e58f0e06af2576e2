package pipeline

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

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lease"
)

// ErrLeaseHeld is returned by Leases.ClaimAll when another worker holds the lease of an
// entity or mart the work would touch.
var ErrLeaseHeld = errors.New("another worker holds the lease")

// leaseWaitPoll is how often ClaimAll tries again while it waits.
const leaseWaitPoll = 500 * time.Millisecond

// Leases claims the entities and marts of one piece of work in a shared catalog's lease
// table (lakehouse/lease), so that two workers sharing a catalog never ingest, build or
// push the same entity or mart at once. A nil Store (an embedded or REST catalog, which
// the state lock guards) claims nothing and lets everything through.
type Leases struct {
	Store *lease.Store
	Wait  time.Duration // how long ClaimAll waits for held leases (0: it fails at once)
	Log   *slog.Logger
}

// OpenLeases opens the lease table of lh's catalog, if it is shared, as the worker of
// stateDir (WorkerID), with leases of ttl.
func OpenLeases(ctx context.Context, lh *catalog.Lakehouse, stateDir string, ttl, wait time.Duration, log *slog.Logger) (Leases, error) {
	db := lh.SharedDB()
	if db == nil {
		return Leases{Log: log}, nil
	}
	holder, err := WorkerID(stateDir)
	if err != nil {
		return Leases{}, fmt.Errorf("lease holder: %w", err)
	}
	store, err := lease.Open(ctx, db, lease.Postgres, holder, ttl)
	if err != nil {
		return Leases{}, err
	}
	return Leases{Store: store, Wait: wait, Log: log}, nil
}

// ClaimFree leases the entities and marts of a run: a name another worker holds is left
// out (logged), so workers started together split the work. The returned context makes
// every catalog commit check the leases first and ends when a lease is lost; release
// gives the leases up.
func (l Leases) ClaimFree(ctx context.Context, entities, marts []string) (context.Context, []string, []string, func(), error) {
	if l.Store == nil {
		return ctx, entities, marts, func() {}, nil
	}
	set, busy, err := l.Store.Acquire(ctx, leaseNames(entities, marts))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keep := func(kind string, in []string) []string {
		var out []string
		for _, n := range in {
			if holder, ok := busy[kind+"/"+n]; ok {
				l.Log.Info("skipped: another worker holds its lease", kind, n, "holder", holder)
				continue
			}
			out = append(out, n)
		}
		return out
	}
	ctx, release := l.fence(ctx, set, "run")
	return ctx, keep("entity", entities), keep("mart", marts), release, nil
}

// ClaimAll is ClaimFree's strict variant, for the one-stage commands that write: the
// work touches every entity and mart given or none. It leases them all, with
// ClaimFree's fencing. If another worker holds one of them, it fails with ErrLeaseHeld
// naming each such entity or mart, its holder and when its lease expires; with Wait it
// gives back what it took and tries again every leaseWaitPoll until it gets them all or
// the wait is over. It never holds some names while it waits for the others, so two
// waiting workers cannot block each other.
func (l Leases) ClaimAll(ctx context.Context, entities, marts []string) (context.Context, func(), error) {
	if l.Store == nil {
		return ctx, func() {}, nil
	}
	names := leaseNames(entities, marts)
	waited := time.Now()
	for tries := 0; ; tries++ {
		set, busy, err := l.Store.Acquire(ctx, names)
		if err != nil {
			return nil, nil, err
		}
		if len(busy) == 0 {
			ctx, release := l.fence(ctx, set, "command")
			return ctx, release, nil
		}
		if err := set.Release(context.WithoutCancel(ctx)); err != nil {
			return nil, nil, err
		}
		held, free, err := describeLeases(ctx, l.Store, names, busy)
		if err != nil {
			return nil, nil, err
		}
		if free && tries < 3 {
			continue // released between the two statements: try again at once
		}
		left := l.Wait - time.Since(waited)
		if left <= 0 {
			msg := "wait for it to finish or pass --wait DURATION"
			if l.Wait > 0 {
				msg = fmt.Sprintf("still held after waiting %s", l.Wait)
			}
			return nil, nil, fmt.Errorf("%w: %s; %s", ErrLeaseHeld, held, msg)
		}
		if tries == 0 {
			l.Log.Info("waiting for another worker's lease", "leases", held, "wait", l.Wait.String())
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
func (l Leases) fence(ctx context.Context, set *lease.Set, what string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	check := func(ctx context.Context) error {
		err := set.Check(ctx)
		if cause := context.Cause(ctx); cause != nil {
			return cause // lease.ErrLost once Keep found the loss, not "context canceled"
		}
		return err
	}
	go set.Keep(ctx, func(err error) {
		l.Log.Error("lease lost: stopping the "+what, "err", err)
		cancel(err)
	})
	release := func() {
		cancel(nil)
		if err := set.Release(context.WithoutCancel(ctx)); err != nil {
			l.Log.Warn("releasing leases", "err", err)
		}
	}
	return catalog.WithFence(ctx, check), release
}

// workerIDFile keeps a state dir's lease holder id.
const workerIDFile = "worker-id"

// WorkerID is the lease holder id of stateDir: the host name and a random id made once
// and kept in <state-dir>/worker-id. The state lock makes it unique among live
// processes, so a worker restarted on the same state dir (a crashed pod's container, a
// cron run after a failed one) takes its own leases back at once instead of waiting for
// their TTL, while another machine's worker never shares it.
func WorkerID(stateDir string) (string, error) {
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
