package sync

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/cespare/xxhash/v2"

	"goldbridge/serving"
	"goldbridge/serving/hot"
)

// recordVersion changes whenever what a record's key covers changes: older records
// then never match and the next sync plans against ClickHouse as before.
const recordVersion = 1

// Records keeps, per mart, the record of the last Sync that returned nil: which Gold
// table state (its metadata file, so any commit, property or schema change counts),
// which mart DDL, which ClickHouse target and which hot-window cutoff ClickHouse then
// held exactly. A sync whose four are unchanged has nothing to push or drop, so a run
// with nothing new need not start or reach ClickHouse at all (issue 21).
//
// Crash safety: Begin removes the record before a Sync may change ClickHouse, and
// Write puts the new one in place (temporary file, fsync, rename, fsync of the
// directory) only after Sync returned nil. A crash between the push and the record
// leaves no record or a stale one, so the next sync plans against ClickHouse: it re-pushes
// or finds nothing to do, it never skips. The record trusts that only goldbridge's
// Sync writes the served tables; `check` always compares with ClickHouse itself and
// finds (and `check --repair` mends) changes made behind its back.
type Records struct {
	Dir string // one <mart>.json per mart, 0600 in a 0700 directory
	// Definition is what the target serves m with (ClickHouse: ddl.Statements), part of
	// the key: a goldbridge that serves the same mart differently pushes again.
	Definition func(m *serving.Mart) []string
}

// Record is what Write stores for one mart.
type Record struct {
	Version    int             `json:"version"`
	Key        string          `json:"key"`
	Metadata   string          `json:"gold_metadata"` // for people: the Gold metadata file pushed
	Snapshot   int64           `json:"gold_snapshot"`
	Hot        int             `json:"hot_partitions"`
	Unservable []hot.Partition `json:"unservable,omitempty"`
	// NewestGrain is Gold's newest grain value at that state (gold.Freshness), for the
	// freshness gauges of a sync that the record answers.
	NewestGrain string    `json:"newest_grain,omitempty"`
	PushedAt    time.Time `json:"pushed_at"`
	// Cold is set when that Sync served nothing (ColdError): a sync the record answers
	// fails with it again, without reaching ClickHouse.
	Cold *ColdError `json:"cold,omitempty"`
}

// key identifies what a sync of m planned from: the Gold table state of tbl, the mart
// and how the target serves it (built by serving.NewMart; Definition), the target and
// the hot-window cutoff.
func (r Records) key(m *serving.Mart, tbl *table.Table, target string, cutoff time.Time) (string, error) {
	def, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("record key %s: %w", m.Name, err)
	}
	h := xxhash.New()
	for _, s := range append([]string{fmt.Sprint(recordVersion), tbl.MetadataLocation(), string(def), target,
		cutoff.UTC().Format(time.RFC3339)}, r.definition(m)...) {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// definition is Definition(m), or nothing without one.
func (r Records) definition(m *serving.Mart) []string {
	if r.Definition == nil {
		return nil
	}
	return r.Definition(m)
}

// recordCutoff is the cutoff a record is keyed by: with serving.AnchorData the cutoff
// follows Gold's newest partition, which the metadata location in the key already fixes,
// so only a clock-anchored window adds its cutoff.
func recordCutoff(m *serving.Mart, cutoff time.Time) time.Time {
	if m.HotAnchor == serving.AnchorData {
		return time.Time{}
	}
	return cutoff
}

func (r Records) path(mart string) string { return filepath.Join(r.Dir, mart+".json") }

// Unchanged returns the record of m when it matches the Gold table tbl, the target and
// the cutoff of now: ClickHouse already holds the hot window of tbl.
func (r Records) Unchanged(m *serving.Mart, tbl *table.Table, target string, now time.Time) (Record, bool) {
	if r.Dir == "" || CircuitOpen(tbl) {
		return Record{}, false
	}
	b, err := os.ReadFile(r.path(m.Name))
	if err != nil {
		return Record{}, false
	}
	var rec Record
	if json.Unmarshal(b, &rec) != nil || rec.Version != recordVersion {
		return Record{}, false
	}
	key, err := r.key(m, tbl, target, recordCutoff(m, Cutoff(m, now, nil)))
	if err != nil || key != rec.Key {
		return Record{}, false
	}
	return rec, true
}

// Begin removes m's record: call it before a Sync that may change ClickHouse.
func (r Records) Begin(mart string) error {
	if r.Dir == "" {
		return nil
	}
	if err := os.Remove(r.path(mart)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("push record %s: %w", mart, err)
	}
	return syncDir(r.Dir)
}

// Write records that ClickHouse holds tbl's hot window as res (a Sync of m on tbl that
// returned nil) says; newestGrain is Gold's newest grain value (kept for the gauges).
func (r Records) Write(m *serving.Mart, tbl *table.Table, target string, res Result, newestGrain string) error {
	return r.write(m, tbl, target, res, newestGrain, nil)
}

// WriteCold records a Sync of m on tbl that did all its work and returned cold: ClickHouse
// serves nothing of tbl until the window or Gold changes.
func (r Records) WriteCold(m *serving.Mart, tbl *table.Table, target string, res Result, newestGrain string, cold *ColdError) error {
	return r.write(m, tbl, target, res, newestGrain, cold)
}

func (r Records) write(m *serving.Mart, tbl *table.Table, target string, res Result, newestGrain string, cold *ColdError) error {
	if r.Dir == "" || res.Skipped != "" {
		return nil
	}
	key, err := r.key(m, tbl, target, recordCutoff(m, res.Cutoff))
	if err != nil {
		return err
	}
	rec := Record{Version: recordVersion, Key: key, Metadata: tbl.MetadataLocation(), Hot: len(res.Pushed) + res.Unchanged,
		Unservable: res.Unservable, NewestGrain: newestGrain, PushedAt: time.Now().UTC(), Cold: cold}
	if s := tbl.CurrentSnapshot(); s != nil {
		rec.Snapshot = s.SnapshotID
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("push record %s: %w", m.Name, err)
	}
	if err := writeFileSynced(r.Dir, r.path(m.Name), append(b, '\n')); err != nil {
		return fmt.Errorf("push record %s: %w", m.Name, err)
	}
	return nil
}

// Result is the sync result a matching record stands for: nothing pushed or dropped.
func (rec Record) Result() Result {
	return Result{Unchanged: rec.Hot, Unservable: rec.Unservable, Recorded: true}
}

// writeFileSynced replaces path by data durably: temporary file, fsync, rename, fsync
// of the directory.
func writeFileSynced(dir, path string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+strings.TrimSuffix(filepath.Base(path), ".json")+"-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
