package catalog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
)

// ErrConflict is wrapped by the error Commit returns when every attempt lost
// to a concurrent writer. Errors straight from iceberg-go do not wrap it; use
// IsConflict to classify those.
var ErrConflict = errors.New("commit conflict: table changed concurrently")

// IsConflict reports whether err is a lost optimistic-concurrency race, after
// which reloading the table and re-running the commit may succeed. It matches:
//
//   - ErrConflict;
//   - table.ErrCommitFailed and everything wrapping it: the REST catalog's
//     HTTP 409 (rest.ErrCommitFailed), the SQL catalog's lost compare-and-swap
//     ("metadata-location moved underneath us"), table.ErrConflictingDataFiles,
//     table.ErrConflictingDeleteFiles, table.ErrDataFilesMissing;
//   - table.ErrCommitDiverged (the base snapshot left the branch: rebuild from
//     a fresh handle);
//   - the unwrapped requirement failures the SQL catalog returns when a
//     commit is made from a stale handle, e.g.
//     `requirement failed: branch "main" has changed: expected id 1, found 2`
//     (also "current schema id has changed", "last assigned field id has
//     changed", `branch "main" was created concurrently`).
//
// rest.ErrCommitStateUnknown (5xx on commit) is not a conflict: the commit may
// have been applied, so re-running it could apply it twice.
func IsConflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, rest.ErrCommitStateUnknown) {
		return false
	}
	if errors.Is(err, ErrConflict) || errors.Is(err, table.ErrCommitFailed) || errors.Is(err, table.ErrCommitDiverged) {
		return true
	}
	// iceberg-go v0.7.0 formats these with fmt.Errorf and no sentinel
	// (table/requirements.go), with both "requirement failed" and
	// "Requirement failed" capitalisations.
	msg := strings.ToLower(err.Error())

	return strings.Contains(msg, "requirement failed") &&
		(strings.Contains(msg, "has changed") || strings.Contains(msg, "was created concurrently"))
}

// retryPolicy bounds Commit's retries: attempt n (n ≥ 1) waits a random
// duration in [d/2, d] with d = min(base·2^(n-1), max).
type retryPolicy struct {
	attempts int
	base     time.Duration
	max      time.Duration
}

// defaultRetry: 8 attempts, waiting at most ~2.3 s in total.
var defaultRetry = retryPolicy{attempts: 8, base: 20 * time.Millisecond, max: time.Second}

func (p retryPolicy) backoff(retry int) time.Duration {
	d := p.max
	if retry-1 < 30 {
		d = min(p.base<<(retry-1), p.max)
	}
	half := d / 2

	return half + rand.N(d-half+1)
}

// Fence is checked by Commit before every attempt; an error stops the commit. A worker
// holding leases (lakehouse/lease) fences its commits with the leases' check, so a
// worker that lost a lease commits nothing more.
type Fence func(ctx context.Context) error

type fenceKey struct{}

// WithFence returns a context whose commits (Commit) check fence first.
func WithFence(ctx context.Context, fence Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence)
}

// CommitFunc builds and commits one transaction on tbl, a freshly loaded
// handle, and returns the table the commit produced.
type CommitFunc func(ctx context.Context, tbl *table.Table) (*table.Table, error)

// Commit commits to "ns.table" with optimistic-concurrency retries: it loads
// the table fresh, calls fn, and if fn fails with a conflict (see IsConflict)
// waits with bounded exponential backoff and jitter (8 attempts, 20 ms to 1 s)
// and does it again. Other errors are returned at once, wrapped with the
// identifier. When all attempts conflict, the error wraps both ErrConflict and
// the last conflict.
//
// This is needed because iceberg-go's SQL catalog rejects a commit made from a
// stale handle without retrying, and its built-in retry
// (commit.retry.num-retries) is off by default for every catalog.
//
// fn may run several times, so it must be safe to re-run: it must derive
// everything from the tbl it is given (start with tbl.NewTransaction()) and
// not write data. Write the data files once beforehand (table.WriteRecords)
// and let fn only add them (tx.AddDataFiles, tx.ReplaceDataFilesWithDataFiles,
// ...) together with the snapshot properties, so a retry repeats only the
// metadata commit. A fn calling tx.Append rewrites its data on every attempt
// and leaves the files of failed attempts orphaned.
//
// If fn returns (nil, nil), nothing was committed and Commit returns the
// freshly loaded table.
func (l *Lakehouse) Commit(ctx context.Context, ident string, fn CommitFunc) (*table.Table, error) {
	id, err := ParseIdent(ident)
	if err != nil {
		return nil, err
	}

	var lastErr error
	for attempt := range l.retry.attempts {
		if attempt > 0 {
			t := time.NewTimer(l.retry.backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()

				return nil, fmt.Errorf("commit %s: %w (after conflict: %w)", ident, context.Cause(ctx), lastErr)
			case <-t.C:
			}
		}

		if fence, ok := ctx.Value(fenceKey{}).(Fence); ok {
			if err := fence(ctx); err != nil {
				return nil, fmt.Errorf("commit %s: %w", ident, err)
			}
		}
		tbl, err := l.loadTable(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("commit %s: load table: %w", ident, err)
		}
		out, err := fn(ctx, tbl)
		if err == nil {
			if out == nil {
				return tbl, nil
			}

			return out, nil
		}
		if !IsConflict(err) {
			return nil, fmt.Errorf("commit %s: %w", ident, err)
		}
		lastErr = err
	}

	return nil, fmt.Errorf("commit %s: %w; gave up after %d attempts: %w", ident, ErrConflict, l.retry.attempts, lastErr)
}
