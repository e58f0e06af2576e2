// Package asof resolves a reference to a lake table's past, a snapshot id or a point in
// time, to the one snapshot of the table it names, or says why it cannot: a snapshot the
// table no longer keeps is an error (ErrNotKept), never a read of another snapshot.
//
// A point in time names the snapshot that was the table's current one then: the newest
// entry of the table's snapshot log (its main branch's history) committed at or before
// it, to the millisecond. Iceberg drops the log's entries up to the newest expired
// snapshot when snapshots expire, so a time before the oldest entry left is refused
// whether the table did not exist yet or its snapshots of then were expired.
package asof

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// Ref is a snapshot id (At zero) or a point in time.
type Ref struct {
	ID int64
	At time.Time
}

// IsTime reports whether r is a point in time.
func (r Ref) IsTime() bool { return !r.At.IsZero() }

func (r Ref) String() string {
	if r.IsTime() {
		return r.At.UTC().Format(time.RFC3339Nano)
	}
	return "snapshot " + strconv.FormatInt(r.ID, 10)
}

// maxRefText bounds the text Parse reads.
const maxRefText = 64

// ErrNotKept means the table keeps no snapshot for the reference: it was expired, it is
// another table's, or the time is before the table's oldest kept snapshot.
var ErrNotKept = errors.New("not kept")

// ErrFuture means the time is after now: what the table will hold then is not known.
var ErrFuture = errors.New("in the future")

// Parse reads a snapshot id (a decimal integer) or an RFC 3339 time with its offset
// (2026-12-04T09:00:00Z, 2026-12-04T09:00:00.250+01:00).
func Parse(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if len(s) > maxRefText {
		return Ref{}, fmt.Errorf("as of %.20q…: longer than %d bytes", s, maxRefText)
	}
	if id, err := strconv.ParseInt(s, 10, 64); err == nil {
		return Ref{ID: id}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Ref{}, fmt.Errorf("as of %q: want a snapshot id or an RFC 3339 time (2026-12-04T09:00:00Z)", s)
	}
	return Ref{At: t}, nil
}

// Resolve returns the snapshot of tbl that r names, checked to be kept: listed in the
// table's metadata, with its manifest list still in place. now is the present (a time
// after it is ErrFuture).
func Resolve(ctx context.Context, tbl *table.Table, r Ref, now time.Time) (*table.Snapshot, error) {
	name := strings.Join(tbl.Identifier(), ".")
	snap, err := pick(tbl, r, now)
	if err != nil {
		return nil, fmt.Errorf("%s as of %s: %w", name, r, err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f, err := fs.Open(snap.ManifestList)
	if err != nil {
		return nil, fmt.Errorf("%s as of %s: snapshot %d's manifest list is gone (%w): %w", name, r, snap.SnapshotID, err, ErrNotKept)
	}
	_ = f.Close()
	return snap, nil
}

// pick finds the snapshot r names among those tbl keeps.
func pick(tbl *table.Table, r Ref, now time.Time) (*table.Snapshot, error) {
	md := tbl.Metadata()
	if len(md.Snapshots()) == 0 {
		return nil, fmt.Errorf("the table has no snapshot yet: %w", ErrNotKept)
	}
	if !r.IsTime() {
		if s := tbl.SnapshotByID(r.ID); s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("no such snapshot among the ones the table keeps (%s): %w", kept(tbl), ErrNotKept)
	}
	if r.At.After(now) {
		return nil, fmt.Errorf("%w (now is %s)", ErrFuture, now.UTC().Format(time.RFC3339))
	}
	at := r.At.UnixMilli()
	var id int64
	found := false
	for e := range md.SnapshotLogs() {
		if e.TimestampMs > at {
			break
		}
		id, found = e.SnapshotID, true
	}
	if !found {
		return nil, fmt.Errorf("before the oldest snapshot the table keeps (%s): %w", kept(tbl), ErrNotKept)
	}
	if s := tbl.SnapshotByID(id); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("snapshot %d, current then, is no longer kept (%s): %w", id, kept(tbl), ErrNotKept)
}

// kept describes the oldest and newest snapshots of tbl.
func kept(tbl *table.Table) string {
	snaps := tbl.Metadata().Snapshots()
	oldest, newest := snaps[0], snaps[0]
	for _, s := range snaps {
		if s.TimestampMs < oldest.TimestampMs {
			oldest = s
		}
		if s.TimestampMs > newest.TimestampMs {
			newest = s
		}
	}
	at := func(s table.Snapshot) string { return time.UnixMilli(s.TimestampMs).UTC().Format(time.RFC3339Nano) }
	return fmt.Sprintf("%d snapshots, the oldest %d committed %s, the newest %d committed %s",
		len(snaps), oldest.SnapshotID, at(oldest), newest.SnapshotID, at(newest))
}
