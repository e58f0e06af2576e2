package catalog

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"strings"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Garbage of failed writes. A write puts its Parquet files (and, while committing, its
// manifests, manifest list and metadata file) under the table's location before the
// catalog points at them; if it fails, nothing references them and they only take space.
// WriteAttempt.End deletes them as soon as the failure is seen; SweepOrphans deletes what a write
// killed midway (SIGKILL, OOM, power loss) left, on the next run (docs/operations.md,
// "Failed writes and disk space").

// SweepAge is the safety age of SweepOrphans as run by every goldbridge run: an
// unreferenced file younger than this may belong to a write still in progress on
// another host sharing the catalog, so it is kept.
const SweepAge = time.Hour

// discardSlack widens a failed write's window backwards: object stores keep
// modification times at a second's resolution.
const discardSlack = 2 * time.Second

// WriteAttempt is one write to a table in progress; see BeginWrite.
type WriteAttempt struct {
	l      *Lakehouse
	idents []string
	start  time.Time
	// Guarded by l.writesMu: after is set if another write to one of the tables was in
	// progress when this one began; until is when the first write to one of the tables
	// that began after this one did.
	after bool
	until time.Time
}

// BeginWrite starts a write to the tables idents (files written, then committed) and
// returns it; end it with End on every path.
func (l *Lakehouse) BeginWrite(idents ...string) *WriteAttempt {
	w := &WriteAttempt{l: l, idents: idents, start: time.Now()}
	l.writesMu.Lock()
	defer l.writesMu.Unlock()
	if l.writes == nil {
		l.writes = map[string]map[*WriteAttempt]bool{}
	}
	for _, ident := range idents {
		if l.writes[ident] == nil {
			l.writes[ident] = map[*WriteAttempt]bool{}
		}
		for other := range l.writes[ident] {
			w.after = true
			if other.until.IsZero() {
				other.until = w.start
			}
		}
		l.writes[ident][w] = true
	}
	return w
}

// End ends the write with its outcome err and returns err. If err is not nil, End
// deletes the files created under each table's location since BeginWrite that the
// table's metadata does not reference (the failed attempt's data files, manifests and
// metadata file), except those created after another write to the same table in this
// process began. It leaves them all to SweepOrphans if another write to the same table
// was in progress when this one began (its files could not be told apart), if the
// commit's outcome is unknown (a REST 5xx), or if the catalog is shared (Postgres, REST):
// a writer on another host may have files of its own in flight under the same location,
// and only the state lock beside a SQLite catalog rules that out. The deletion runs even if ctx is cancelled
// (SIGTERM), for at most a minute; if it fails, the returned error says so and wraps err.
func (w *WriteAttempt) End(ctx context.Context, err error) error {
	l := w.l
	defer func() { // registered until the deletion is over: a write beginning meanwhile sets until
		l.writesMu.Lock()
		defer l.writesMu.Unlock()
		for _, ident := range w.idents {
			delete(l.writes[ident], w)
			if len(l.writes[ident]) == 0 {
				delete(l.writes, ident)
			}
		}
	}()
	l.writesMu.Lock()
	after := w.after
	l.writesMu.Unlock()
	if err == nil || after || !l.embedded || errors.Is(err, rest.ErrCommitStateUnknown) {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	since := w.start.Add(-discardSlack)
	ours := func(mod time.Time) bool {
		l.writesMu.Lock()
		until := w.until
		l.writesMu.Unlock()
		return !mod.Before(since) && (until.IsZero() || mod.Before(until.Add(-discardSlack)))
	}
	var derrs []error
	for _, ident := range w.idents {
		if ident == "" {
			continue
		}
		if _, _, derr := l.removeUnreferenced(cctx, ident, 0, ours); derr != nil {
			derrs = append(derrs, derr)
		}
	}
	if len(derrs) > 0 {
		return fmt.Errorf("%w (removing the files of the failed write: %v)", err, errors.Join(derrs...))
	}
	return err
}

// writing reports whether a Write to ident is in progress in this process.
func (l *Lakehouse) writing(ident string) bool {
	l.writesMu.Lock()
	defer l.writesMu.Unlock()
	return len(l.writes[ident]) > 0
}

// Sweep reports what SweepOrphans deleted.
type Sweep struct {
	Files int   // files deleted
	Bytes int64 // their size
}

// SweepOrphans deletes, in every table of the catalog, the files under the table's
// location that its metadata does not reference and that are older than olderThan:
// leftovers of writes that were killed before they could clean up. Tables with a write
// in progress in this process are skipped. It goes on past a failing table and returns
// what it deleted with the failures joined.
func (l *Lakehouse) SweepOrphans(ctx context.Context, olderThan time.Duration) (Sweep, error) {
	var out Sweep
	idents, err := l.Tables(ctx)
	if err != nil {
		return out, fmt.Errorf("sweep orphan files: %w", err)
	}
	var errs []error
	for _, ident := range idents {
		if l.writing(ident) {
			continue
		}
		n, b, err := l.removeUnreferenced(ctx, ident, olderThan, nil)
		out.Files += n
		out.Bytes += b
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("sweep orphan files: %w", errors.Join(errs...))
	}
	return out, nil
}

// removeUnreferenced deletes the files under ident's location that the table's metadata,
// loaded fresh, does not reference, that are older than olderThan and, unless doomed is
// nil, for whose modification time doomed is true. As a safeguard against a path mix-up in iceberg-go's orphan listing it never
// deletes a file that a snapshot references. A missing table has nothing to delete.
func (l *Lakehouse) removeUnreferenced(ctx context.Context, ident string, olderThan time.Duration, doomed func(mod time.Time) bool) (files int, bytes int64, err error) {
	tbl, err := l.LoadTable(ctx, ident)
	if errors.Is(err, icecat.ErrNoSuchTable) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", ident, err)
	}
	plan, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(olderThan))
	if err != nil {
		return 0, 0, fmt.Errorf("list orphan files of %s: %w", ident, err)
	}
	if len(plan.OrphanFiles()) == 0 {
		return 0, 0, nil
	}
	all, _, err := unreferencedAfter(ctx, tbl, nil) // nothing retained: every referenced file
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", ident, err)
	}
	norm := func(p string) string { return strings.TrimPrefix(p, "file://") }
	referenced := map[string]bool{norm(tbl.MetadataLocation()): true}
	for p := range all {
		referenced[norm(p)] = true
	}
	var errs []error
	for _, f := range plan.OrphanFiles() {
		if referenced[norm(f.Path)] {
			continue
		}
		if doomed != nil {
			mod, err := modTime(fs, f.Path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if mod.IsZero() || !doomed(mod) {
				continue
			}
		}
		if err := fs.Remove(f.Path); err != nil {
			errs = append(errs, err)
			continue
		}
		files++
		bytes += f.SizeBytes
	}
	if len(errs) > 0 {
		return files, bytes, fmt.Errorf("remove orphan files of %s: %w", ident, errors.Join(errs...))
	}
	return files, bytes, nil
}

// modTime is path's modification time, or zero if it is gone.
func modTime(fs iceio.IO, path string) (time.Time, error) {
	f, err := fs.Open(path)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return time.Time{}, nil
		}
		return time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return time.Time{}, err
	}
	return st.ModTime(), nil
}
