// Package lease lets several goldbridge workers on different machines share one Iceberg
// catalog without ever working on the same entity or mart at once. A lease is a row in
// the catalog's own database (PostgreSQL for a shared SQL catalog; SQLite works the same
// for tests), so it is exactly as available as the catalog the work commits to.
//
// The promise: at any instant of the database's clock, each name (say "entity/orders")
// has at most one live holder. A lease lives for its TTL and is extended by Set.Check,
// which the holder calls in the background and before every catalog commit; a holder
// that stops renewing (killed, paused, partitioned) loses the name when the TTL runs out,
// and its next Check fails with ErrLost, so it commits nothing more. Each acquisition of a
// name increments its token (a fencing token, for the logs and metrics). Every time is the
// database's (now()), never a worker's, so clock skew between hosts does not matter.
//
// The residual window, stated honestly: Check and the commit that follows it are two
// round trips, so a holder paused for longer than the TTL between them could still
// commit once after losing the lease. The TTL (default 60 s) is chosen to be far longer
// than a commit; the commit is an optimistic compare-and-swap, so the new holder's commit
// conflicts, reloads and re-runs on top of it rather than being overwritten.
package lease

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// ErrLost is returned by Check when a lease of the set has expired or was taken over.
var ErrLost = errors.New("lease lost")

// Dialect is the SQL dialect of the lease database.
type Dialect int

// The dialects: the shared catalog's PostgreSQL, or SQLite.
const (
	Postgres Dialect = iota
	SQLite
)

// DefaultTTL is how long a lease lives without a renewal.
const DefaultTTL = time.Minute

// Table is the table holding the leases, beside iceberg-go's catalog tables.
const Table = "goldbridge_leases"

// Store hands out leases from one database.
type Store struct {
	db      *sql.DB
	dialect Dialect
	ttl     time.Duration
	holder  string
}

// Open creates the lease table if needed. holder names this worker in the table (its
// host and pid plus a random suffix, see NewHolder); ttl ≤ 0 means DefaultTTL.
func Open(ctx context.Context, db *sql.DB, dialect Dialect, holder string, ttl time.Duration) (*Store, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	s := &Store{db: db, dialect: dialect, ttl: ttl, holder: holder}
	ddl := `CREATE TABLE IF NOT EXISTS ` + Table + ` (
	name TEXT PRIMARY KEY,
	holder TEXT NOT NULL,
	token BIGINT NOT NULL,
	expires_ms BIGINT NOT NULL)`
	if err := s.create(ctx, ddl); err != nil {
		return nil, fmt.Errorf("lease table: %w", err)
	}
	return s, nil
}

// create runs the DDL; in PostgreSQL under a transaction-scoped advisory lock, because
// CREATE TABLE IF NOT EXISTS is not safe against itself there (workers starting together
// get "duplicate key value violates unique constraint pg_type_typname_nsp_index").
func (s *Store) create(ctx context.Context, ddl string) error {
	if s.dialect != Postgres {
		_, err := s.db.ExecContext(ctx, ddl)
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", ddlLockKey); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return err
	}
	return tx.Commit()
}

// ddlLockKey is the advisory lock of the lease table's creation ("gbleases" in ASCII).
const ddlLockKey = 0x67626c6561736573

// NewHolder returns a holder id unique to this process: host, pid and 8 random bytes.
func NewHolder() string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Holder is this store's holder id.
func (s *Store) Holder() string { return s.holder }

// nowMs is the database's clock in Unix milliseconds.
func (s *Store) nowMs() string {
	if s.dialect == SQLite {
		return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
	}
	return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`
}

var placeholder = regexp.MustCompile(`\$([0-9]+)`)

// q writes a query for the dialect: $n placeholders become ?n for SQLite, NOW the
// database's clock in milliseconds.
func (s *Store) q(query string) string {
	query = strings.ReplaceAll(query, "NOW", s.nowMs())
	if s.dialect == SQLite {
		query = placeholder.ReplaceAllString(query, "?$1")
	}
	return query
}

// Held is a lease a Set holds: its name and fencing token.
type Held struct {
	Name  string
	Token int64
}

// Set is the leases one worker holds for one run.
type Set struct {
	s    *Store
	held []Held
}

// Acquire takes every name that no other holder has a live lease on, and returns them
// with the names held by others (and their holders) for the caller to skip. It never
// waits. A name this store's holder already holds is renewed.
func (s *Store) Acquire(ctx context.Context, names []string) (*Set, map[string]string, error) {
	set := &Set{s: s}
	busy := map[string]string{}
	upsert := s.q(`INSERT INTO ` + Table + ` (name, holder, token, expires_ms) VALUES ($1, $2, 1, NOW + $3)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = ` + Table + `.token + 1, expires_ms = excluded.expires_ms
WHERE ` + Table + `.expires_ms <= NOW OR ` + Table + `.holder = excluded.holder
RETURNING token`)
	for _, name := range names {
		var token int64
		err := s.db.QueryRowContext(ctx, upsert, name, s.holder, s.ttl.Milliseconds()).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			var other string
			if err := s.db.QueryRowContext(ctx, s.q(`SELECT holder FROM `+Table+` WHERE name = $1`), name).Scan(&other); err != nil {
				other = "another worker"
			}
			busy[name] = other
			continue
		}
		if err != nil {
			_ = set.Release(context.WithoutCancel(ctx))
			return nil, nil, fmt.Errorf("acquire lease %s: %w", name, err)
		}
		set.held = append(set.held, Held{Name: name, Token: token})
	}
	return set, busy, nil
}

// Lease is a name's row in the lease table, as a worker that could not take the name
// reports it: who holds it and until when, by the database's clock.
type Lease struct {
	Name    string
	Holder  string
	Token   int64
	Expires time.Time
	// Remaining is Expires minus the database's now: ≤ 0 once the lease expired or was
	// released (the name is then free). The holder renews it every TTL/3, so Expires moves
	// on while it works.
	Remaining time.Duration
}

// Lookup returns the lease of name; ok is false if no worker ever took the name.
func (s *Store) Lookup(ctx context.Context, name string) (l Lease, ok bool, err error) {
	var expires, now int64
	err = s.db.QueryRowContext(ctx, s.q(`SELECT holder, token, expires_ms, NOW FROM `+Table+` WHERE name = $1`), name).
		Scan(&l.Holder, &l.Token, &expires, &now)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{Name: name}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("look up lease %s: %w", name, err)
	}
	l.Name, l.Expires, l.Remaining = name, time.UnixMilli(expires).UTC(), time.Duration(expires-now)*time.Millisecond
	return l, true, nil
}

// Held lists the leases of the set.
func (set *Set) Held() []Held { return set.held }

// Has reports whether the set holds name.
func (set *Set) Has(name string) bool {
	for _, h := range set.held {
		if h.Name == name {
			return true
		}
	}
	return false
}

// Check extends every lease of the set by the TTL, in one statement, and returns ErrLost
// (naming the leases) if any of them expired or is held by someone else now. Call it
// before every commit and at least every TTL/3.
func (set *Set) Check(ctx context.Context) error {
	if len(set.held) == 0 {
		return nil
	}
	s := set.s
	args := []any{s.holder, s.ttl.Milliseconds()}
	var conds []string
	for _, h := range set.held {
		conds = append(conds, fmt.Sprintf("(name = $%d AND token = $%d)", len(args)+1, len(args)+2))
		args = append(args, h.Name, h.Token)
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE `+Table+` SET expires_ms = NOW + $2
WHERE holder = $1 AND expires_ms > NOW AND (`+strings.Join(conds, " OR ")+`)`), args...)
	if err != nil {
		return fmt.Errorf("renew leases: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("renew leases: %w", err)
	}
	if int(n) != len(set.held) {
		return fmt.Errorf("%w: %d of %d leases (%s) expired or were taken over", ErrLost, len(set.held)-int(n), len(set.held), set.names())
	}
	return nil
}

func (set *Set) names() string {
	var b []string
	for _, h := range set.held {
		b = append(b, h.Name)
	}
	return strings.Join(b, ", ")
}

// Keep renews the set every TTL/3 until ctx ends; on the first failed renewal it calls
// lost with the error and stops. Run it in its own goroutine.
func (set *Set) Keep(ctx context.Context, lost func(error)) {
	t := time.NewTicker(set.s.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := set.Check(ctx); err != nil {
				if ctx.Err() == nil {
					lost(err)
				}
				return
			}
		}
	}
}

// Release gives the set's leases up at once (they would expire anyway), so another
// worker can take them without waiting for the TTL.
func (set *Set) Release(ctx context.Context) error {
	var errs []error
	for _, h := range set.held {
		_, err := set.s.db.ExecContext(ctx, set.s.q(`UPDATE `+Table+` SET expires_ms = 0 WHERE name = $1 AND holder = $2 AND token = $3`),
			h.Name, set.s.holder, h.Token)
		if err != nil {
			errs = append(errs, fmt.Errorf("release lease %s: %w", h.Name, err))
		}
	}
	set.held = nil
	return errors.Join(errs...)
}
