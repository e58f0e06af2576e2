package catalog

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Routine table maintenance: the primitives lakehouse/maintain runs on every table so
// that a table's cost does not grow with the number of commits it has seen (expired
// snapshots, merged manifests, a bounded metadata log). Each is one catalog commit (or
// none when there is nothing to do): a crash leaves the table as it was or as it is
// after the step, and the files a crash strands are unreferenced, for the orphan sweep.

// MetadataVersionsKept is the number of previous metadata files a table keeps by default
// (write.metadata.previous-versions-max): the older ones are deleted at each commit.
// Twenty commits cover any reader that resolved the table a moment before.
const MetadataVersionsKept = 20

// MetadataProperties are the table properties that bound a table's metadata log: the
// previous metadata files beyond the newest versions are deleted after each commit.
// Every table goldbridge creates has them; maintenance sets them on older tables.
func MetadataProperties(versions int) iceberg.Properties {
	if versions <= 0 {
		versions = MetadataVersionsKept
	}
	return iceberg.Properties{
		table.MetadataDeleteAfterCommitEnabledKey: "true",
		table.MetadataPreviousVersionsMaxKey:      strconv.Itoa(versions),
	}
}

// EnsureProperties sets on ident the properties of want that it lacks or holds
// otherwise, in one metadata-only commit (no snapshot), and reports whether it did.
func (l *Lakehouse) EnsureProperties(ctx context.Context, ident string, want iceberg.Properties) (bool, error) {
	changed := false
	_, err := l.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		diff := iceberg.Properties{}
		for k, v := range want {
			if have, ok := tbl.Properties()[k]; !ok || have != v {
				diff[k] = v
			}
		}
		changed = len(diff) > 0
		if !changed {
			return nil, nil
		}
		tx := tbl.NewTransaction()
		if err := tx.SetProperties(diff); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return false, fmt.Errorf("set properties of %s: %w", ident, err)
	}
	return changed, nil
}

// Retention says which snapshots of a table an expiry keeps: every snapshot younger
// than Age, at least the Min newest (never fewer than one: the current snapshot), and
// each snapshot of Protect together with every snapshot after it (the snapshots a
// reader still starts from: watermarks, the last commit carrying bookkeeping).
// Batch > 1 expires only once that many snapshots are expirable: an expiry reads the
// manifests of every snapshot it keeps to find the files only the expired ones used,
// so a table committed to by every run pays that every Batch runs, not at each.
type Retention struct {
	Age     time.Duration
	Min     int
	Protect []int64
	Batch   int
}

// Kept returns how many snapshots of the current snapshot's line of descent, newest
// first, ret keeps at now.
func (ret Retention) Kept(tbl *table.Table, now time.Time) int {
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return 0
	}
	ancestry := table.AncestorsOf(cur.SnapshotID, tbl.SnapshotByID)
	keep := min(max(ret.Min, 1), len(ancestry))
	protect := map[int64]bool{}
	for _, id := range ret.Protect {
		protect[id] = true
	}
	for i, s := range ancestry {
		if now.Sub(time.UnixMilli(s.TimestampMs)) < ret.Age || protect[s.SnapshotID] {
			keep = max(keep, i+1)
		}
	}
	return keep
}

// Expired reports what Expire did.
type Expired struct {
	Snapshots int // snapshots expired
	Kept      int // snapshots left
	Files     int // data, delete and metadata files deleted (only the expired snapshots used them)
}

// Expire expires the snapshots of ident that ret does not keep (and snapshots outside
// the current line of descent older than ret.Age), in one commit that also sets the
// table properties fold returns (nil fold: none) for the table as it is before the
// expiry: what exactly-once bookkeeping read from the summaries of the expired
// snapshots must survive in the table. Then it deletes the files only the expired
// snapshots referenced (manifest lists, manifests, data and delete files); a file
// already gone is fine, and one that cannot be deleted is reported and left to the
// orphan sweep. With nothing to expire it commits nothing.
func (l *Lakehouse) Expire(ctx context.Context, ident string, ret Retention, fold func(*table.Table) (iceberg.Properties, error)) (Expired, error) {
	var res Expired
	var before *table.Table
	out, err := l.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		before, res = nil, Expired{Kept: len(tbl.Metadata().Snapshots())}
		keep := ret.Kept(tbl, time.Now())
		if keep == 0 || expirable(tbl, keep, ret.Age) < max(ret.Batch, 1) {
			return nil, nil
		}
		before = tbl
		tx := tbl.NewTransaction()
		if fold != nil {
			props, err := fold(tbl)
			if err != nil {
				return nil, err
			}
			if len(props) > 0 {
				if err := tx.SetProperties(props); err != nil {
					return nil, err
				}
			}
		}
		// The files are deleted below, not by iceberg-go: it deletes again the files an
		// earlier expiry already deleted (listed as DELETED by a manifest kept then) and
		// fails on them.
		if err := tx.ExpireSnapshots(table.WithRetainLast(keep), table.WithOlderThan(ret.Age), table.WithPostCommit(false)); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return res, fmt.Errorf("expire %s: %w", ident, err)
	}
	if out == nil || before == nil { // nothing to expire: nothing committed
		return res, nil
	}
	retained := map[int64]bool{}
	for _, s := range out.Metadata().Snapshots() {
		retained[s.SnapshotID] = true
	}
	res.Snapshots, res.Kept = res.Kept-len(retained), len(retained)
	doomed, _, err := unreferencedAfter(ctx, before, retained)
	if err != nil {
		return res, fmt.Errorf("expire %s: files of the expired snapshots (left to the orphan sweep): %w", ident, err)
	}
	fs, err := before.FS(ctx)
	if err != nil {
		return res, fmt.Errorf("expire %s: %w", ident, err)
	}
	var errs []error
	for p := range doomed {
		removed, err := removeIfThere(fs, p)
		if err != nil {
			errs = append(errs, err)
		} else if removed {
			res.Files++
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("expire %s: %d files of expired snapshots could not be deleted (left to the orphan sweep): %w", ident, len(errs), errors.Join(errs...))
	}
	return res, nil
}

// expirable counts the snapshots an expiry keeping the keep newest ancestors (and
// unreferenced snapshots younger than age) would remove.
func expirable(tbl *table.Table, keep int, age time.Duration) int {
	kept := map[int64]bool{}
	for i, s := range table.AncestorsOf(tbl.CurrentSnapshot().SnapshotID, tbl.SnapshotByID) {
		if i >= keep {
			break
		}
		kept[s.SnapshotID] = true
	}
	cutoff := time.Now().Add(-age).UnixMilli()
	n := 0
	for _, s := range tbl.Metadata().Snapshots() {
		if !kept[s.SnapshotID] && s.TimestampMs < cutoff {
			n++
		}
	}
	return n
}

// RewriteManifests merges the data manifests of ident's current snapshot into
// target-sized ones when it lists more than maxManifests of them, in one REPLACE
// snapshot (no rows change; its summary carries no goldbridge.* key, so readers of the
// bookkeeping walk back past it, and maintenance keeps the snapshot they walk back to).
// It returns the data manifests before and after (equal: nothing done).
func (l *Lakehouse) RewriteManifests(ctx context.Context, ident string, maxManifests int) (before, after int, err error) {
	_, err = l.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		n, err := DataManifests(ctx, tbl)
		if err != nil {
			return nil, err
		}
		before, after = n, n
		if n <= maxManifests {
			return nil, nil
		}
		tx := tbl.NewTransaction()
		res, err := tx.RewriteManifests(ctx)
		if err != nil {
			return nil, err
		}
		if res.IsNoOp() {
			return nil, nil
		}
		out, err := tx.Commit(ctx)
		if err != nil {
			return nil, err
		}
		after, err = DataManifests(ctx, out)
		return out, err
	})
	if err != nil {
		return before, after, fmt.Errorf("rewrite manifests of %s: %w", ident, err)
	}
	return before, after, nil
}

// DataManifests counts the data manifests of tbl's current snapshot.
func DataManifests(ctx context.Context, tbl *table.Table) (int, error) {
	n, _, err := manifests(ctx, tbl)
	return n, err
}

func manifests(ctx context.Context, tbl *table.Table) (data, deletes int, err error) {
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return 0, 0, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0, 0, err
	}
	list, err := cur.Manifests(fs)
	if err != nil {
		return 0, 0, fmt.Errorf("manifest list of snapshot %d: %w", cur.SnapshotID, err)
	}
	for _, m := range list {
		if m.ManifestContent() == iceberg.ManifestContentData {
			data++
		} else {
			deletes++
		}
	}
	return data, deletes, nil
}

// TableStats is what a table costs a reader: what Stats reads.
type TableStats struct {
	Snapshots       int   // snapshots in the metadata
	DataFiles       int64 // live data files (the current snapshot's total-data-files)
	DeleteFiles     int64 // live delete files (total-delete-files)
	DataManifests   int   // manifests of the current snapshot
	DeleteManifests int
	MetadataBytes   int64 // size of the current metadata file
}

// Stats reads tbl's cost: its metadata, the current snapshot's summary and manifest list.
func Stats(ctx context.Context, tbl *table.Table) (TableStats, error) {
	st := TableStats{Snapshots: len(tbl.Metadata().Snapshots())}
	if cur := tbl.CurrentSnapshot(); cur != nil && cur.Summary != nil {
		p := cur.Summary.Properties
		st.DataFiles, _ = strconv.ParseInt(p["total-data-files"], 10, 64)
		st.DeleteFiles, _ = strconv.ParseInt(p["total-delete-files"], 10, 64)
	}
	var err error
	if st.DataManifests, st.DeleteManifests, err = manifests(ctx, tbl); err != nil {
		return st, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return st, err
	}
	f, err := fs.Open(tbl.MetadataLocation())
	if err != nil {
		return st, fmt.Errorf("metadata file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return st, fmt.Errorf("metadata file: %w", err)
	}
	st.MetadataBytes = fi.Size()
	return st, nil
}

// withMetadataProperties adds MetadataProperties to a new table's properties (the
// caller's own keys win).
func withMetadataProperties(props iceberg.Properties) iceberg.Properties {
	out := MetadataProperties(0)
	maps.Copy(out, props)
	return out
}

// removeIfThere deletes path and reports whether it was there (an earlier expiry may
// have deleted a file a kept manifest still lists as DELETED).
func removeIfThere(fs iceio.IO, path string) (bool, error) {
	f, err := fs.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f.Close()
	return true, fs.Remove(path)
}
