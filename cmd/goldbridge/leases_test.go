package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/lease"
)

// TestSharedCatalogOneStageLeases: on a shared PostgreSQL catalog, each one-stage command
// that writes leases every entity and mart it touches (claimAll). While another worker
// holds one of them, the command from a second state dir fails at once with exit 7,
// naming the entity or mart, its holder and when the lease expires, and leaves the lease
// alone; once the holder releases it, the command runs, under its own worker's lease,
// and gives the lease back. With --wait it waits for the holder instead and succeeds once
// the holder releases; a --wait that runs out fails with exit 7 as well.
func TestSharedCatalogOneStageLeases(t *testing.T) {
	e := newSharedEnv(t, 800, 31)
	ctx := context.Background()
	if code, logs := e.worker("a", "run"); code != exitOK {
		t.Fatalf("first run: exit %d\n%s", code, tail(logs, 3000))
	}
	db, err := sql.Open("pgx", e.pg.URI(true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	foreign, err := lease.Open(ctx, db, lease.Postgres, "foreign-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A first command on state dir b makes its worker id, the holder its leases show.
	if code, logs := e.worker("b", "gold", "daily_revenue_kpi"); code != exitOK {
		t.Fatalf("gold on b: exit %d\n%s", code, tail(logs, 3000))
	}
	idB, err := os.ReadFile(filepath.Join(e.dir, "b", "worker-id"))
	if err != nil {
		t.Fatal(err)
	}
	holderB := strings.TrimSpace(string(idB))

	hold := func(t *testing.T, name string) (*lease.Set, lease.Lease) {
		t.Helper()
		set, busy, err := foreign.Acquire(ctx, []string{name})
		if err != nil || !set.Has(name) {
			t.Fatalf("foreign lease %s: %v, busy %v", name, err, busy)
		}
		l, _, err := foreign.Lookup(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return set, l
	}
	release := func(t *testing.T, set *lease.Set) {
		t.Helper()
		if err := set.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name  string
		args  []string
		lease string // held by the foreign worker
		shown string // how the error names it
	}{
		{"ingest", []string{"ingest", "orders"}, "entity/orders", "entity orders"},
		{"silver", []string{"silver"}, "entity/orders", "entity orders"},
		{"replay", []string{"replay", "orders"}, "entity/orders", "entity orders"},
		{"compact", []string{"compact", "orders"}, "entity/orders", "entity orders"},
		{"gold", []string{"gold", "revenue_by_country"}, "mart/revenue_by_country", "mart revenue_by_country"},
		{"gold all marts", []string{"gold"}, "mart/daily_revenue_kpi", "mart daily_revenue_kpi"},
		{"sync", []string{"sync", "revenue_by_country"}, "mart/revenue_by_country", "mart revenue_by_country"},
		{"check", []string{"check", "daily_revenue_kpi"}, "mart/daily_revenue_kpi", "mart daily_revenue_kpi"},
		// forget leases the marts the entity feeds as well as the entity.
		{"forget", []string{"forget", "orders", "--where", "order_id = no-such-order", "--confirm"}, "mart/revenue_by_country", "mart revenue_by_country"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, l := hold(t, tc.lease)
			code, logs := e.worker("b", tc.args...)
			want := "goldbridge: another worker holds the lease: " + tc.shown + " (holder foreign-worker, lease expires " +
				l.Expires.Format(time.RFC3339) + ", in "
			if code != exitLeaseHeld || !strings.Contains(logs, want) || !strings.Contains(logs, "; wait for it to finish or pass --wait DURATION\n") {
				t.Fatalf("%s beside a foreign lease: exit %d, want %d and %q\n%s", tc.name, code, exitLeaseHeld, want, tail(logs, 3000))
			}
			t.Logf("refused: %s", lineOf(logs, "goldbridge:"))
			if now, _, err := foreign.Lookup(ctx, tc.lease); err != nil || now.Holder != "foreign-worker" || now.Token != l.Token || now.Remaining <= 0 {
				t.Fatalf("the foreign lease after a refused %s: %+v %v, want it untouched (%+v)", tc.name, now, err, l)
			}
			release(t, set)
			if code, logs := e.worker("b", tc.args...); code != exitOK {
				t.Fatalf("%s after the release: exit %d\n%s", tc.name, code, tail(logs, 3000))
			}
			after, _, err := foreign.Lookup(ctx, tc.lease)
			if err != nil || after.Holder != holderB || after.Token != l.Token+1 || after.Remaining > 0 {
				t.Fatalf("%s lease after %s: %+v %v, want taken by %s (token %d) and released", tc.lease, tc.name, after, err, holderB, l.Token+1)
			}

			// --wait: the command waits while the lease is held, and runs once it is released.
			set, _ = hold(t, tc.lease)
			var out bytes.Buffer
			var errs lockedBuffer
			done := make(chan int, 1)
			go func() {
				args := append(append([]string{"-c", e.cfg, "--state-dir", filepath.Join(e.dir, "b")}, tc.args...), "--wait", "2m")
				done <- run(ctx, args, &out, &errs)
			}()
			waiting := `msg="waiting for another worker's lease" leases="` + tc.shown + ` (holder foreign-worker`
			for !strings.Contains(errs.String(), waiting) {
				select {
				case code := <-done:
					t.Fatalf("%s --wait ended while the lease was held: exit %d\n%s", tc.name, code, tail(errs.String(), 3000))
				case <-time.After(50 * time.Millisecond):
				}
			}
			time.Sleep(1500 * time.Millisecond) // it keeps waiting
			select {
			case code := <-done:
				t.Fatalf("%s --wait ended while the lease was held: exit %d\n%s", tc.name, code, tail(errs.String(), 3000))
			default:
			}
			release(t, set)
			select {
			case code := <-done:
				if code != exitOK {
					t.Fatalf("%s --wait after the release: exit %d\n%s", tc.name, code, tail(errs.String(), 3000))
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("%s --wait did not finish after the release", tc.name)
			}
			if after, _, err := foreign.Lookup(ctx, tc.lease); err != nil || after.Holder != holderB || after.Remaining > 0 {
				t.Fatalf("%s lease after %s --wait: %+v %v, want taken by %s and released", tc.lease, tc.name, after, err, holderB)
			}
		})
	}

	// A wait that runs out fails like no wait, and says how long it waited.
	set, l := hold(t, "mart/revenue_by_country")
	start := time.Now()
	code, logs := e.worker("b", "gold", "--wait", "1500ms", "revenue_by_country")
	want := "goldbridge: another worker holds the lease: mart revenue_by_country (holder foreign-worker, lease expires " + l.Expires.Format(time.RFC3339)
	if code != exitLeaseHeld || !strings.Contains(logs, want) || !strings.Contains(logs, "; still held after waiting 1.5s\n") || time.Since(start) < 1500*time.Millisecond {
		t.Fatalf("gold --wait 1500ms beside a held lease: exit %d after %s, want %d and %q\n%s", code, time.Since(start), exitLeaseHeld, want, tail(logs, 3000))
	}
	release(t, set)
}

// TestSharedCatalogClaimAllFence: the context claimAll returns is fenced like a run's:
// once its lease is taken away (here by hand, as a paused worker's would be taken over),
// its next catalog commit is refused before anything is written, and the context ends
// within a renewal period with the lease's loss as its cause.
func TestSharedCatalogClaimAllFence(t *testing.T) {
	ctx := context.Background()
	pg := lakehousetest.StartPostgres(t)
	lh, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: pg.URI(true), Warehouse: "file://" + filepath.Join(t.TempDir(), "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	const ttl = 900 * time.Millisecond
	cfg := &config.Config{}
	cfg.Lakehouse.Catalog.LeaseTTL = config.Duration(ttl)
	a := &app{stateDir: t.TempDir(), log: slog.New(slog.DiscardHandler)}
	fenced, release, err := a.claimAll(ctx, lh, cfg, []string{"orders"}, []string{"daily"})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	time.Sleep(ttl) // renewed meanwhile
	if err := fenced.Err(); err != nil {
		t.Fatalf("a kept lease ended the context: %v", context.Cause(fenced))
	}
	if _, err := lh.SharedDB().ExecContext(ctx, `UPDATE `+lease.Table+` SET holder = 'thief' WHERE name = 'mart/daily'`); err != nil {
		t.Fatal(err)
	}
	_, err = lh.Commit(fenced, "bronze.orders", func(context.Context, *table.Table) (*table.Table, error) {
		t.Fatal("committed past a lost lease")
		return nil, nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("commit after the lease was lost: %v, want lease.ErrLost", err)
	}
	select {
	case <-fenced.Done():
		if !errors.Is(context.Cause(fenced), lease.ErrLost) {
			t.Fatalf("context ended with %v, want lease.ErrLost", context.Cause(fenced))
		}
	case <-time.After(ttl):
		t.Fatal("the context did not end after its lease was lost")
	}
}
