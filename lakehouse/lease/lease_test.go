package lease_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/lease"
)

// dbs are the two databases a lease can live in: an SQLite file, and (not under -short)
// a real PostgreSQL started by scripts/postgres.sh.
func dbs(t *testing.T) map[string]func(t *testing.T) (*sql.DB, lease.Dialect) {
	return map[string]func(t *testing.T) (*sql.DB, lease.Dialect){
		"sqlite": func(t *testing.T) (*sql.DB, lease.Dialect) {
			db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "leases.db")+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db, lease.SQLite
		},
		"postgres": func(t *testing.T) (*sql.DB, lease.Dialect) {
			pg := lakehousetest.StartPostgres(t)
			db, err := sql.Open("pgx", pg.URI(true))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db, lease.Postgres
		},
	}
}

func open(t *testing.T, db *sql.DB, d lease.Dialect, holder string, ttl time.Duration) *lease.Store {
	t.Helper()
	s, err := lease.Open(context.Background(), db, d, holder, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func acquire(t *testing.T, s *lease.Store, names ...string) (*lease.Set, map[string]string) {
	t.Helper()
	set, busy, err := s.Acquire(context.Background(), names)
	if err != nil {
		t.Fatal(err)
	}
	return set, busy
}

// TestLease: one holder per name; the other worker is told who holds it; a released or
// expired lease is taken over with a higher token; the old holder's Check then fails
// with ErrLost; a renewed lease does not expire.
func TestLease(t *testing.T) {
	ctx := context.Background()
	for name, mk := range dbs(t) {
		t.Run(name, func(t *testing.T) {
			db, d := mk(t)
			const ttl = 600 * time.Millisecond
			a := open(t, db, d, "worker-a", ttl)
			b := open(t, db, d, "worker-b", ttl)

			setA, busy := acquire(t, a, "entity/orders", "mart/daily")
			if len(busy) != 0 || len(setA.Held()) != 2 || setA.Held()[0].Token != 1 {
				t.Fatalf("first acquire: held %v busy %v", setA.Held(), busy)
			}
			setB, busy := acquire(t, b, "entity/orders", "entity/customers")
			if got := busy["entity/orders"]; got != "worker-a" {
				t.Errorf("busy = %v, want entity/orders held by worker-a", busy)
			}
			if !setB.Has("entity/customers") || setB.Has("entity/orders") {
				t.Errorf("b holds %v, want only entity/customers", setB.Held())
			}

			// Renewed by Check, A keeps the names past the TTL.
			for range 3 {
				time.Sleep(ttl / 2)
				if err := setA.Check(ctx); err != nil {
					t.Fatalf("renewing a live lease: %v", err)
				}
			}
			if _, busy := acquire(t, b, "mart/daily"); busy["mart/daily"] != "worker-a" {
				t.Errorf("a renewed lease was taken: busy %v", busy)
			}

			// Released: B takes it at once, with the next token.
			if err := setA.Release(ctx); err != nil {
				t.Fatal(err)
			}
			setB2, busy := acquire(t, b, "mart/daily")
			if len(busy) != 0 || setB2.Held()[0].Token != 2 {
				t.Fatalf("after release: held %v busy %v", setB2.Held(), busy)
			}

			// Expired: A takes B's lease over after the TTL; B's Check fails.
			time.Sleep(ttl + 200*time.Millisecond)
			setA2, busy := acquire(t, a, "mart/daily")
			if len(busy) != 0 || setA2.Held()[0].Token != 3 {
				t.Fatalf("after expiry: held %v busy %v", setA2.Held(), busy)
			}
			if err := setB2.Check(ctx); !errors.Is(err, lease.ErrLost) {
				t.Errorf("check of a lease taken over = %v, want ErrLost", err)
			}
			// Expired and not taken: lost too, even though nobody else holds it.
			if err := setB.Check(ctx); !errors.Is(err, lease.ErrLost) {
				t.Errorf("check of an expired lease = %v, want ErrLost", err)
			}
		})
	}
}

// TestLeaseLookup: Lookup tells a worker that could not take a name who holds it and
// until when (by the database's clock); a released lease reads as expired, a name never
// leased as absent.
func TestLeaseLookup(t *testing.T) {
	ctx := context.Background()
	for name, mk := range dbs(t) {
		t.Run(name, func(t *testing.T) {
			db, d := mk(t)
			const ttl = 30 * time.Second
			a := open(t, db, d, "worker-a", ttl)
			b := open(t, db, d, "worker-b", ttl)
			if l, ok, err := b.Lookup(ctx, "mart/daily"); err != nil || ok || l.Name != "mart/daily" || l.Holder != "" {
				t.Fatalf("lookup of a name never leased: %+v %v %v", l, ok, err)
			}
			before := time.Now()
			set, _ := acquire(t, a, "mart/daily")
			l, ok, err := b.Lookup(ctx, "mart/daily")
			if err != nil || !ok || l.Holder != "worker-a" || l.Token != 1 {
				t.Fatalf("lookup of a held lease: %+v %v %v", l, ok, err)
			}
			if l.Remaining <= ttl-5*time.Second || l.Remaining > ttl {
				t.Errorf("remaining %s, want just under the TTL %s", l.Remaining, ttl)
			}
			if got := l.Expires.Sub(before); got < ttl-5*time.Second || got > ttl+5*time.Second {
				t.Errorf("expires %s, %s after the acquire; want about the TTL %s", l.Expires, got, ttl)
			}
			if err := set.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if l, ok, err := b.Lookup(ctx, "mart/daily"); err != nil || !ok || l.Holder != "worker-a" || l.Remaining > 0 {
				t.Fatalf("lookup of a released lease: %+v %v %v, want it expired", l, ok, err)
			}
		})
	}
}

// TestLeaseRace: many workers opening the store (creating its table) and racing for one
// name at once: every open succeeds and exactly one wins.
func TestLeaseRace(t *testing.T) {
	for name, mk := range dbs(t) {
		t.Run(name, func(t *testing.T) {
			db, d := mk(t)
			const workers = 8
			var wg sync.WaitGroup
			won := make(chan string, workers)
			for i := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := lease.Open(context.Background(), db, d, lease.NewHolder(), time.Minute)
					if err != nil {
						t.Errorf("worker %d: open: %v", i, err)
						return
					}
					set, _, err := s.Acquire(context.Background(), []string{"mart/daily"})
					if err != nil {
						t.Errorf("worker %d: %v", i, err)
						return
					}
					if set.Has("mart/daily") {
						won <- s.Holder()
					}
				}()
			}
			wg.Wait()
			close(won)
			var winners []string
			for w := range won {
				winners = append(winners, w)
			}
			if len(winners) != 1 {
				t.Errorf("%d winners, want 1: %v", len(winners), winners)
			}
		})
	}
}

// TestLeaseKeep: Keep renews in the background past several TTLs, and reports the loss
// when the lease is taken away (here: expired by hand, as a paused worker's would be).
func TestLeaseKeep(t *testing.T) {
	db, d := dbs(t)["sqlite"](t)
	const ttl = 300 * time.Millisecond
	s := open(t, db, d, "worker-a", ttl)
	set, _ := acquire(t, s, "entity/orders")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost := make(chan error, 1)
	go set.Keep(ctx, func(err error) { lost <- err })
	time.Sleep(4 * ttl)
	if err := set.Check(ctx); err != nil {
		t.Fatalf("kept lease lost: %v", err)
	}
	if _, err := db.Exec(`UPDATE ` + lease.Table + ` SET holder = 'worker-b'`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, lease.ErrLost) {
			t.Errorf("lost with %v, want ErrLost", err)
		}
	case <-time.After(2 * ttl):
		t.Error("Keep did not report the lost lease")
	}
}
