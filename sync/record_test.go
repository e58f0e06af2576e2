package sync_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	gbsync "goldbridge/sync"
)

// TestRecordsMatchOnlyWhatWasPushed: a push record answers a sync only for the Gold
// state, mart, target and hot-window cutoff it was written for; Begin (before a push)
// removes it, and a damaged or foreign record never matches.
func TestRecordsMatchOnlyWhatWasPushed(t *testing.T) {
	ctx := context.Background()
	lh, err := catalog.Open(ctx, lakehousetest.Config(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	days := daysFrom(day0, 3)
	tbl := writeGold(t, lh, goldRows(genOrders(1, days, 50)), days)
	now := day0.AddDate(0, 0, 5).Add(7 * time.Hour)
	served := []string{"CREATE TABLE t ..."}
	recs := gbsync.Records{Dir: filepath.Join(t.TempDir(), "pushed"), Definition: func(*serving.Mart) []string { return served }}
	const target = "embedded /ch 1 2 db marts"
	m := testMart("marts", true)
	if _, ok := recs.Unchanged(m, tbl, target, now); ok {
		t.Fatal("matched before any push")
	}
	res := gbsync.Result{Unchanged: 3, Cutoff: gbsync.Cutoff(m, now, nil)}
	if err := recs.Write(m, tbl, target, res, "2026-05-03"); err != nil {
		t.Fatal(err)
	}
	rec, ok := recs.Unchanged(m, tbl, target, now.Add(time.Hour))
	if !ok || rec.Hot != 3 || rec.NewestGrain != "2026-05-03" || !rec.Result().Recorded {
		t.Fatalf("the pushed state does not match: %+v %v", rec, ok)
	}

	newer := writeGold(t, lh, goldRows(genOrders(2, days[:1], 10)), days[:1])
	otherMart := testMart("marts", false)
	window := testMart("marts", true)
	window.HotWindow *= 2
	for _, c := range []struct {
		name string
		miss func() bool
	}{
		{"a newer Gold commit", func() bool { _, ok := recs.Unchanged(m, newer, target, now); return !ok }},
		{"another mart definition", func() bool { _, ok := recs.Unchanged(otherMart, tbl, target, now); return !ok }},
		{"another hot window", func() bool { _, ok := recs.Unchanged(window, tbl, target, now); return !ok }},
		{"another ClickHouse", func() bool { _, ok := recs.Unchanged(m, tbl, "a:9000 db marts cluster ", now); return !ok }},
		{"the next day's cutoff", func() bool { _, ok := recs.Unchanged(m, tbl, target, now.Add(24*time.Hour)); return !ok }},
		{"another served DDL", func() bool {
			other := recs
			other.Definition = func(*serving.Mart) []string { return []string{"CREATE TABLE t ... SETTINGS x = 1"} }
			_, ok := other.Unchanged(m, tbl, target, now)
			return !ok
		}},
	} {
		if !c.miss() {
			t.Errorf("%s: the record still matched", c.name)
		}
	}

	// A crash between push and record: Begin removed it, so nothing matches.
	if err := recs.Begin(m.Name); err != nil {
		t.Fatal(err)
	}
	if _, ok := recs.Unchanged(m, tbl, target, now); ok {
		t.Fatal("matched after Begin")
	}
	if err := recs.Begin(m.Name); err != nil {
		t.Fatalf("Begin without a record: %v", err)
	}
	path := filepath.Join(recs.Dir, m.Name+".json")
	for _, bad := range []string{"", "{", `{"version": 99}`} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, ok := recs.Unchanged(m, tbl, target, now); ok {
			t.Errorf("record %q matched", bad)
		}
	}
}

// TestRecordsKeepACold: the record of a sync that served nothing (ColdError) answers the
// next sync of the same state with that error, exactly, and a plain record carries none.
func TestRecordsKeepACold(t *testing.T) {
	ctx := context.Background()
	lh, err := catalog.Open(ctx, lakehousetest.Config(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	days := daysFrom(day0, 2)
	tbl := writeGold(t, lh, goldRows(genOrders(1, days, 20)), days)
	now := day0.AddDate(1, 0, 0)
	recs := gbsync.Records{Dir: filepath.Join(t.TempDir(), "pushed")}
	const target = "embedded /ch 1 2 db marts"
	m := testMart("marts", true)
	cutoff := gbsync.Cutoff(m, now, nil)
	cold := &gbsync.ColdError{Mart: m.Name, Partitions: 2, Newest: days[1], Cutoff: cutoff}
	if err := recs.WriteCold(m, tbl, target, gbsync.Result{Cutoff: cutoff}, "", cold); err != nil {
		t.Fatal(err)
	}
	rec, ok := recs.Unchanged(m, tbl, target, now)
	if !ok || rec.Cold == nil || rec.Cold.Error() != cold.Error() || *rec.Cold != *cold || rec.Hot != 0 {
		t.Fatalf("cold record: %+v %v, want %+v", rec, ok, cold)
	}
	if err := recs.Write(m, tbl, target, gbsync.Result{Unchanged: 2, Cutoff: cutoff}, ""); err != nil {
		t.Fatal(err)
	}
	if rec, ok := recs.Unchanged(m, tbl, target, now); !ok || rec.Cold != nil {
		t.Fatalf("plain record after a cold one: %+v %v", rec, ok)
	}
}
