package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// A seal is a snapshot that changes no row: operation "replace", the head's manifests
// minus those that list no live file, the head's totals. iceberg-go v0.7.0 has no
// operation that commits one with a summary of ours: a copy-on-write Delete of nothing
// drops those manifests but is labelled "delete" (a Spark stream reading the table stops
// at it), RewriteFiles wants a file changed, RewriteManifests takes no summary
// properties and may leave a single manifest as it is. So the seal's manifest list is
// written here and committed through the catalog with its requirements, like any
// snapshot iceberg-go produces (issue 37).

// CommitSealed commits tx (built on a freshly loaded table; it may stage nothing) and,
// in the same catalog commit, a seal on top of what it staged whose summary holds props
// and the head's total-* counts. The commit is fenced on main's snapshot when tx was
// built (any concurrent commit makes it fail with a conflict, IsConflict), and tx is
// marked committed. Use it inside Commit.
func (l *Lakehouse) CommitSealed(ctx context.Context, tx *table.Transaction, props iceberg.Properties) (*table.Table, error) {
	tc, err := tx.TableCommit()
	if err != nil {
		return nil, err
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return nil, err
	}
	seal, fs, err := writeSeal(ctx, staged.Table, props)
	if err != nil {
		return nil, err
	}
	reqs := tc.Requirements
	if len(tc.Updates) == 0 { // nothing staged: fence the seal on the head it was built on
		reqs = []table.Requirement{
			table.AssertTableUUID(staged.Metadata().TableUUID()),
			table.AssertRefSnapshotID(table.MainBranch, seal.ParentSnapshotID),
		}
	}
	updates := append(tc.Updates, table.NewAddSnapshotUpdate(seal),
		table.NewSetSnapshotRefUpdate(table.MainBranch, seal.SnapshotID, table.BranchRef, 0, 0, 0))
	meta, loc, err := l.cat.CommitTable(ctx, staged.Identifier(), reqs, updates)
	if err != nil {
		if !errors.Is(err, rest.ErrCommitStateUnknown) {
			_ = fs.Remove(seal.ManifestList) // unreferenced; SweepOrphans would find it too
		}
		return nil, err
	}
	tx.MarkCommitted()
	return table.New(staged.Identifier(), meta, loc, staged.FS, l.cat), nil
}

// writeSeal writes the manifest list of a seal on tbl's current snapshot and returns the
// snapshot (not committed) and the file system it is on.
func writeSeal(ctx context.Context, tbl *table.Table, props iceberg.Properties) (*table.Snapshot, iceio.WriteFileIO, error) {
	meta, head := tbl.Metadata(), tbl.CurrentSnapshot()
	if head == nil {
		return nil, nil, errors.New("seal: the table has no snapshot")
	}
	if v := meta.Version(); v > 2 {
		return nil, nil, fmt.Errorf("seal: format version %d is not supported (row lineage)", v)
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, nil, err
	}
	fs, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return nil, nil, errors.New("seal: the table's file system is read-only")
	}
	manifests, err := head.Manifests(fs)
	if err != nil {
		return nil, nil, fmt.Errorf("seal: manifests of snapshot %d: %w", head.SnapshotID, err)
	}
	var live []iceberg.ManifestFile
	for _, m := range manifests {
		if m.HasAddedFiles() || m.HasExistingFiles() { // unknown counts (v1) count as live
			live = append(live, m)
		}
	}
	locs, err := tbl.LocationProvider()
	if err != nil {
		return nil, nil, err
	}
	id, seq := newSnapshotID(meta), meta.LastSequenceNumber()+1
	path := locs.NewMetadataLocation(fmt.Sprintf("snap-%d-0-%s.avro", id, uuid.New()))
	if err := writeManifestList(fs, path, meta.Version(), id, head.SnapshotID, seq, live); err != nil {
		return nil, nil, fmt.Errorf("seal: %w", err)
	}
	schemaID := meta.CurrentSchema().ID
	return &table.Snapshot{
		SnapshotID: id, ParentSnapshotID: &head.SnapshotID, SequenceNumber: seq,
		TimestampMs: time.Now().UnixMilli(), ManifestList: path, SchemaID: &schemaID,
		Summary: &table.Summary{Operation: table.OpReplace, Properties: sealSummary(head, props)},
	}, fs, nil
}

// sealSummary is props plus the head's total-* counts, which a seal does not change.
func sealSummary(head *table.Snapshot, props iceberg.Properties) iceberg.Properties {
	out := iceberg.Properties{}
	if head.Summary != nil {
		for k, v := range head.Summary.Properties {
			if strings.HasPrefix(k, "total-") {
				out[k] = v
			}
		}
	}
	maps.Copy(out, props)
	return out
}

func writeManifestList(fs iceio.WriteFileIO, path string, version int, id, parent, seq int64, manifests []iceberg.ManifestFile) (err error) {
	out, err := fs.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			err = errors.Join(err, fs.Remove(path))
		}
	}()
	return iceberg.WriteManifestList(version, out, id, &parent, &seq, 0, manifests)
}

// newSnapshotID returns a random positive snapshot id that meta does not use.
func newSnapshotID(meta table.Metadata) int64 {
	for {
		u := uuid.New()
		var id int64
		for i := range 8 {
			id = id<<8 | int64(u[i]^u[i+8])
		}
		if id &= 1<<63 - 1; id != 0 {
			if meta.SnapshotByID(id) == nil {
				return id
			}
		}
	}
}
