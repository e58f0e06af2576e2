package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// History maintenance for the right to be forgotten: a table whose rows were rewritten
// without a person's data still serves them by time travel, and its old files still hold
// them, until every older snapshot is expired and the files only they used are deleted.
// Seal, ExpireBefore and RemoveOrphans do that for any table; bronze.Forget and the
// forget cascade (lakehouse/forget) use them.

// Expiry reports what ExpireBefore did.
type Expiry struct {
	Snapshots     int // snapshots expired
	DataFiles     int // data (and delete) files deleted
	MetadataFiles int // manifests and manifest lists deleted
}

// CheckMainOnly refuses a table with branches or tags other than main: they keep old
// snapshots alive, so its history cannot be fully expired.
func CheckMainOnly(tbl *table.Table) error {
	var refs []string
	for name := range tbl.Metadata().Refs() {
		if name != table.MainBranch {
			refs = append(refs, name)
		}
	}
	if len(refs) > 0 {
		slices.Sort(refs)
		return fmt.Errorf("the table has branches or tags (%s) that keep old snapshots alive; remove them first", strings.Join(refs, ", "))
	}
	return nil
}

// TaggedSnapshot returns the newest snapshot in the current snapshot's line of descent
// whose summary has key = value, or 0.
func TaggedSnapshot(tbl *table.Table, key, value string) int64 {
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return 0
	}
	for _, s := range table.AncestorsOf(cur.SnapshotID, tbl.SnapshotByID) {
		if s.Summary != nil && s.Summary.Properties[key] == value {
			return s.SnapshotID
		}
	}
	return 0
}

// NewestWithKey returns the newest snapshot in the current snapshot's line of descent
// whose summary has key, or 0: the commit a reader of that bookkeeping walks back to.
func NewestWithKey(tbl *table.Table, key string) int64 {
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return 0
	}
	for _, s := range table.AncestorsOf(cur.SnapshotID, tbl.SnapshotByID) {
		if s.Summary != nil {
			if _, ok := s.Summary.Properties[key]; ok {
				return s.SnapshotID
			}
		}
	}
	return 0
}

// Seal commits a data-less snapshot, operation "replace", on top of ident whose summary
// holds props and every goldbridge.* key of the current snapshot's summary (watermarks
// and bookkeeping, which must survive the expiry of the snapshot that wrote them), and
// returns its id. A copy-on-write commit leaves a manifest of DELETED entries that keep
// the removed files' column bounds (value prefixes); the sealing snapshot drops it, so
// that once the older snapshots are expired no manifest lists the removed files. It
// changes no row, so a streaming reader (Spark) passes over it (CommitSealed).
func (l *Lakehouse) Seal(ctx context.Context, ident string, props iceberg.Properties) (int64, error) {
	tbl, err := l.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		all := iceberg.Properties{}
		if cur := tbl.CurrentSnapshot(); cur != nil && cur.Summary != nil {
			for k, v := range cur.Summary.Properties {
				if strings.HasPrefix(k, "goldbridge.") {
					all[k] = v
				}
			}
		}
		maps.Copy(all, props)
		return l.CommitSealed(ctx, tbl.NewTransaction(), all)
	})
	if err != nil {
		return 0, fmt.Errorf("seal %s: %w", ident, err)
	}
	return tbl.CurrentSnapshot().SnapshotID, nil
}

// ExpireBefore expires every snapshot of ident that is not keep or a descendant of it,
// lets iceberg-go delete the files only they referenced, then checks that those files
// are gone (deleting any left behind), that no older snapshot survived, and that no
// remaining manifest still lists a removed file. keep must be an ancestor of (or) the
// current snapshot. Running it again after an error finishes the job.
func (l *Lakehouse) ExpireBefore(ctx context.Context, ident string, keep int64) (Expiry, error) {
	var (
		res     Expiry
		doomed  map[string]bool // path -> is a data file
		postErr error
		expired []int64
		// DELETED entries that retained manifests still hold: they carry the deleted
		// files' column bounds.
		tombstones int
		before     *table.Table
	)
	_, err := l.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		before, doomed, expired, postErr, tombstones = tbl, nil, nil, nil, 0
		if err := CheckMainOnly(tbl); err != nil {
			return nil, err
		}
		cur := tbl.CurrentSnapshot()
		if cur == nil {
			return nil, fmt.Errorf("snapshot %d is gone", keep)
		}
		// Snapshots from the head back to keep are retained; everything else goes.
		retain := 0
		var keepSnap *table.Snapshot
		ancestry := table.AncestorsOf(cur.SnapshotID, tbl.SnapshotByID)
		for _, s := range ancestry {
			retain++
			if s.SnapshotID == keep {
				keepSnap = &s
				break
			}
		}
		if keepSnap == nil {
			return nil, fmt.Errorf("snapshot %d is not an ancestor of the current snapshot %d", keep, cur.SnapshotID)
		}
		retained := map[int64]bool{}
		for _, s := range ancestry[:retain] {
			retained[s.SnapshotID] = true
		}
		for _, s := range tbl.Metadata().Snapshots() {
			if !retained[s.SnapshotID] {
				expired = append(expired, s.SnapshotID)
			}
		}
		if len(expired) == 0 {
			return nil, nil
		}
		var err error
		if doomed, tombstones, err = unreferencedAfter(ctx, tbl, retained); err != nil {
			return nil, err
		}
		// ExpireSnapshots keeps what is younger than the age limit; make sure the kept
		// snapshot is strictly in the past at millisecond resolution.
		if wait := time.Until(time.UnixMilli(keepSnap.TimestampMs + 2)); wait > 0 {
			time.Sleep(wait)
		}
		tx := tbl.NewTransaction()
		if err := tx.ExpireSnapshots(table.WithRetainLast(retain), table.WithOlderThan(0)); err != nil {
			return nil, err
		}
		out, err := tx.Commit(ctx)
		if out != nil && err != nil {
			// Committed; only the post-commit file deletion failed. Finished below.
			postErr, err = err, nil
		}
		return out, err
	})
	if err != nil {
		return res, fmt.Errorf("expire %s: %w", ident, err)
	}
	if len(expired) == 0 {
		return res, nil
	}
	after, err := l.LoadTable(ctx, ident)
	if err != nil {
		return res, fmt.Errorf("expire %s: %w", ident, err)
	}
	remaining := map[int64]bool{}
	for _, s := range after.Metadata().Snapshots() {
		remaining[s.SnapshotID] = true
	}
	for _, id := range expired {
		if remaining[id] {
			return res, fmt.Errorf("expire %s: snapshot %d older than snapshot %d was not expired (a ref or min-snapshots-to-keep setting on main keeps it)", ident, id, keep)
		}
		res.Snapshots++
	}
	fs, err := before.FS(ctx)
	if err != nil {
		return res, fmt.Errorf("expire %s: %w", ident, err)
	}
	var failed []string
	for _, p := range slices.Sorted(maps.Keys(doomed)) {
		if err := ensureGone(fs, p); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		if doomed[p] {
			res.DataFiles++
		} else {
			res.MetadataFiles++
		}
	}
	if len(failed) > 0 {
		// postErr, if any, is iceberg-go's own failure to delete them after the commit.
		return res, fmt.Errorf("expire %s: %w", ident, errors.Join(fmt.Errorf("%d expired files could not be deleted: %s", len(failed), strings.Join(failed, "; ")), postErr))
	}
	if tombstones > 0 {
		return res, fmt.Errorf("expire %s: the remaining manifests still list %d deleted data files with their column bounds (seal the table first; is write.delete.mode merge-on-read?)", ident, tombstones)
	}
	return res, nil
}

// unreferencedAfter returns the files that the snapshots of tbl reference and that the
// retained snapshots do not reference as live (path -> whether it is a data file):
// manifest lists, manifests and data files, including those that retained manifests
// only list as DELETED (counted in tombstones).
func unreferencedAfter(ctx context.Context, tbl *table.Table, retained map[int64]bool) (doomed map[string]bool, tombstones int, err error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, 0, err
	}
	all := map[string]bool{}
	live := map[string]bool{}
	seenManifest := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		keep := retained[s.SnapshotID]
		if keep {
			live[s.ManifestList] = true
		}
		all[s.ManifestList] = false
		mans, err := s.Manifests(fs)
		if err != nil {
			return nil, 0, fmt.Errorf("snapshot %d manifests: %w", s.SnapshotID, err)
		}
		for _, man := range mans {
			if keep {
				live[man.FilePath()] = true
			}
			all[man.FilePath()] = false
			key := fmt.Sprintf("%t %s", keep, man.FilePath())
			if seenManifest[key] {
				continue
			}
			seenManifest[key] = true
			for entry, err := range man.Entries(fs, false) {
				if err != nil {
					return nil, 0, fmt.Errorf("manifest %s: %w", man.FilePath(), err)
				}
				p := entry.DataFile().FilePath()
				all[p] = true
				switch {
				case !keep:
				case entry.Status() == iceberg.EntryStatusDELETED:
					tombstones++
				default:
					live[p] = true
				}
			}
		}
	}
	for p := range live {
		delete(all, p)
	}
	return all, tombstones, nil
}

// RemoveOrphans deletes the unreferenced files older than olderThan under the table's
// data location (leftovers of crashed writes) and counts the younger ones, which may
// belong to a write in progress. As a safeguard against a path mix-up in the orphan
// listing, it never deletes a file that the table metadata references.
func (l *Lakehouse) RemoveOrphans(ctx context.Context, ident string, olderThan time.Duration) (removed, kept int, err error) {
	tbl, err := l.LoadTable(ctx, ident)
	if err != nil {
		return 0, 0, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0, 0, err
	}
	all, _, err := unreferencedAfter(ctx, tbl, nil) // nothing retained: every referenced file
	if err != nil {
		return 0, 0, err
	}
	norm := func(p string) string { return strings.TrimPrefix(p, "file://") }
	referenced := map[string]bool{}
	for p := range all {
		referenced[norm(p)] = true
	}
	orphans, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(0))
	if err != nil {
		return 0, 0, fmt.Errorf("list orphan files of %s: %w", ident, err)
	}
	out, err := tbl.DeleteOrphanFiles(ctx, table.WithFilesOlderThan(olderThan), table.WithDeleteFunc(func(p string) error {
		if referenced[norm(p)] {
			return fmt.Errorf("refusing to delete %s: the table references it", p)
		}
		return fs.Remove(p)
	}))
	if err != nil {
		return len(out.DeletedFiles), 0, fmt.Errorf("delete orphan files of %s: %w", ident, err)
	}
	return len(out.DeletedFiles), len(orphans.Files()) - len(out.DeletedFiles), nil
}

// ensureGone deletes path if it still exists.
func ensureGone(fs iceio.IO, path string) error {
	_, err := removeIfThere(fs, path)
	return err
}
