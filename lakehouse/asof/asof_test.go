package asof_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/asof"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want asof.Ref
		err  string
	}{
		{in: "3547395809148285433", want: asof.Ref{ID: 3547395809148285433}},
		{in: " 42 ", want: asof.Ref{ID: 42}},
		{in: "2026-12-04T09:00:00Z", want: asof.Ref{At: time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)}},
		{in: "2026-12-04T10:00:00.250+01:00", want: asof.Ref{At: time.Date(2026, 12, 4, 9, 0, 0, 250e6, time.UTC)}},
		{in: "2026-12-04 09:00", err: "want a snapshot id or an RFC 3339 time"},
		{in: "yesterday", err: "want a snapshot id or an RFC 3339 time"},
		{in: "99999999999999999999", err: "want a snapshot id or an RFC 3339 time"},
		{in: strings.Repeat("1", 65), err: "longer than 64 bytes"},
	} {
		got, err := asof.Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got.ID != tc.want.ID || !got.At.Equal(tc.want.At) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestResolve: three ingests make three snapshots. Each is found by its id and by its
// commit time (and a time between two commits names the earlier one); a time before the
// first, an unknown id and a future time are refused. After an expiry that keeps only
// the newest, the older ones are refused by id and by time, as is a snapshot whose
// manifest list is gone: never another snapshot.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	var snaps []table.Snapshot
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(landing, fmt.Sprintf("%d.jsonl", i)), []byte(`{"n":1}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		src := bronze.FileSource{Name: "l", System: "s", Dir: landing}
		res, err := bronze.IngestFiles(ctx, lh, "bronze.t", []bronze.FileSource{src}, bronze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tbl := load(t, lh)
		snaps = append(snaps, *tbl.SnapshotByID(res.SnapshotID))
		time.Sleep(5 * time.Millisecond)
	}
	now := time.Now()
	at := func(s table.Snapshot, d time.Duration) asof.Ref {
		return asof.Ref{At: time.UnixMilli(s.TimestampMs).Add(d)}
	}
	tbl := load(t, lh)
	for i, s := range snaps {
		want(t, tbl, asof.Ref{ID: s.SnapshotID}, now, s.SnapshotID)
		want(t, tbl, at(s, 0), now, s.SnapshotID)
		want(t, tbl, at(s, 999*time.Microsecond), now, s.SnapshotID) // same millisecond
		if i > 0 {
			want(t, tbl, at(s, -time.Millisecond), now, snaps[i-1].SnapshotID)
		}
	}
	refused(t, tbl, at(snaps[0], -time.Millisecond), now, asof.ErrNotKept, "before the oldest snapshot the table keeps (3 snapshots, the oldest")
	refused(t, tbl, asof.Ref{ID: 42}, now, asof.ErrNotKept, "bronze.t as of snapshot 42: no such snapshot among the ones the table keeps")
	refused(t, tbl, asof.Ref{At: now.Add(time.Minute)}, now, asof.ErrFuture, "in the future")

	if _, err := lh.Expire(ctx, "bronze.t", catalog.Retention{Min: 1}, nil); err != nil {
		t.Fatal(err)
	}
	tbl = load(t, lh)
	if n := len(tbl.Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots after the expiry", n)
	}
	refused(t, tbl, asof.Ref{ID: snaps[0].SnapshotID}, now, asof.ErrNotKept, "no such snapshot among the ones the table keeps (1 snapshots")
	refused(t, tbl, at(snaps[1], 0), now, asof.ErrNotKept, "before the oldest snapshot the table keeps")
	want(t, tbl, at(snaps[2], time.Second), now.Add(time.Second), snaps[2].SnapshotID)

	if err := os.Remove(strings.TrimPrefix(snaps[2].ManifestList, "file://")); err != nil {
		t.Fatal(err)
	}
	refused(t, tbl, asof.Ref{ID: snaps[2].SnapshotID}, now, asof.ErrNotKept, "manifest list is gone")
}

func load(t *testing.T, lh *catalog.Lakehouse) *table.Table {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), "bronze.t")
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func want(t *testing.T, tbl *table.Table, r asof.Ref, now time.Time, id int64) {
	t.Helper()
	s, err := asof.Resolve(context.Background(), tbl, r, now)
	if err != nil || s.SnapshotID != id {
		t.Errorf("as of %s: %v, %v; want snapshot %d", r, s, err, id)
	}
}

func refused(t *testing.T, tbl *table.Table, r asof.Ref, now time.Time, sentinel error, msg string) {
	t.Helper()
	s, err := asof.Resolve(context.Background(), tbl, r, now)
	if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), msg) {
		t.Errorf("as of %s: %v, %v; want %v saying %q", r, s, err, sentinel, msg)
	}
}
