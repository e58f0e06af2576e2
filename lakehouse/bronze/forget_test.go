package bronze

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

const forgotten = "u-42"

var forgetReq = ForgetRequest{Field: "user_id", Value: forgotten}

// payloadHasValue tells whether a stored raw_payload holds the forgotten value anywhere,
// in its delivered bytes or JSON-escaped.
func payloadHasValue(raw string) bool {
	b, err := DecodePayload(raw)
	if err != nil {
		return true
	}
	return bytes.Contains(b, []byte(forgotten)) || bytes.Contains(b, []byte(`u\u002d42`))
}

func snapshotIDs(t *testing.T, lh *catalog.Lakehouse) []int64 {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, s := range tbl.Metadata().Snapshots() {
		ids = append(ids, s.SnapshotID)
	}
	return ids
}

// parquetPayloads reads the raw_payload column of a Parquet file directly (zstd
// decompressed by the reader), bypassing Iceberg.
func parquetPayloads(t *testing.T, path string) []string {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer tbl.Release()
	idx := tbl.Schema().FieldIndices(ColPayload)
	if len(idx) != 1 {
		t.Fatalf("%s: no %s column", path, ColPayload)
	}
	var out []string
	for _, chunk := range tbl.Column(idx[0]).Data().Chunks() {
		switch a := chunk.(type) {
		case *array.String:
			for i := range a.Len() {
				out = append(out, a.Value(i))
			}
		case *array.LargeString:
			for i := range a.Len() {
				out = append(out, a.Value(i))
			}
		default:
			t.Fatalf("%s: payload type %T", path, chunk)
		}
	}
	return out
}

// warehouseFiles lists the files under dir by extension.
func warehouseFiles(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		out[filepath.Ext(p)] = append(out[filepath.Ext(p)], p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func localPath(p string) string { return strings.TrimPrefix(p, "file://") }

func TestForget(t *testing.T) {
	ctx := context.Background()
	state, landing := t.TempDir(), t.TempDir()
	lh := lakehousetest.OpenDir(t, state)
	src := []FileSource{source(landing)}
	ingest := func(name string, lines ...string) {
		t.Helper()
		writeFile(t, filepath.Join(landing, name), []byte(strings.Join(lines, "\n")+"\n"))
		res, err := IngestFiles(ctx, lh, ident, src, Options{})
		if err != nil || res.Rows != int64(len(lines)) {
			t.Fatalf("ingest %s: %+v %v", name, res, err)
		}
	}
	// Run 1: one data file mixing matching rows with others.
	ingest("a.jsonl",
		`{"user_id":"u-1","order":"o-1"}`,
		`{"user_id":"u-42","order":"o-2"}`,
		`{"order":"o-3","user_id":"u-43"}`,
		`{"user_id":"u-4","note":"x"}`,
		`not json`,
	)
	// Run 2: escaped, spaced and non-UTF-8 (stored as base64) matches beside others.
	ingest("b.jsonl",
		`{"user_id":"u\u002d42","order":"o-4"}`,
		`{ "user_id" : "u-42" , "order":"o-5"}`,
		"{\"user_id\":\"u-42\",\"name\":\"caf\xe9\"}",
		`{"user_id":"u-5","order":"o-6"}`,
		`{"user_id":42}`,
	)
	// Run 3: a data file in which every row matches (dropped, not rewritten).
	ingest("c.jsonl",
		`{"user_id":"u-42","order":"o-7"}`,
		`{"user_id":"u-42","order":"o-8"}`,
	)
	const matches = 1 + 3 + 2

	before := scanAll(t, lh)
	var wantKept []row
	for _, r := range before {
		if !payloadHasValue(r.payload) {
			wantKept = append(wantKept, r)
		}
	}
	if len(before) != 12 || len(wantKept) != 12-matches {
		t.Fatalf("setup: %d rows, %d without the value", len(before), len(wantKept))
	}
	// The data files holding the value, read straight from disk.
	var heldValue []string
	for _, p := range warehouseFiles(t, state)[".parquet"] {
		if slices.ContainsFunc(parquetPayloads(t, p), payloadHasValue) {
			heldValue = append(heldValue, p)
		}
	}
	if len(heldValue) != 3 {
		t.Fatalf("setup: %d data files hold the value, want 3", len(heldValue))
	}
	snapsBefore := snapshotIDs(t, lh)

	// Without confirm: a dry run.
	res, err := Forget(ctx, lh, ident, forgetReq, false)
	if !errors.Is(err, ErrNotConfirmed) {
		t.Fatalf("unconfirmed forget: %v", err)
	}
	if res.Matched != matches || res.FilesRewritten != 3 || res.DeleteSnapshotID != 0 {
		t.Fatalf("dry run result %+v", res)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d rows in 3 data files", matches)) || strings.Contains(err.Error(), forgotten) {
		t.Fatalf("dry run error: %v", err)
	}
	if !slices.Equal(snapshotIDs(t, lh), snapsBefore) || len(scanAll(t, lh)) != len(before) {
		t.Fatal("the dry run changed the table")
	}

	res, err = Forget(ctx, lh, ident, forgetReq, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("forget: %+v", res)
	if res.Matched != matches || res.FilesRewritten != 3 || res.DeleteSnapshotID == 0 ||
		res.ExpiredSnapshots != len(snapsBefore)+1 || res.RemovedFiles != 3 || res.RemovedMetadataFiles == 0 {
		t.Fatalf("result %+v", res)
	}
	if s := fmt.Sprintf("%+v %#v", res, res); strings.Contains(s, forgotten) {
		t.Fatalf("result shows the value: %s", s)
	}

	// The current snapshot: every other row intact, audit columns included.
	after := scanAll(t, lh)
	key := func(r row) string { return r.eventID }
	slices.SortFunc(after, func(a, b row) int { return strings.Compare(key(a), key(b)) })
	slices.SortFunc(wantKept, func(a, b row) int { return strings.Compare(key(a), key(b)) })
	if len(after) != len(wantKept) {
		t.Fatalf("%d rows left, want %d", len(after), len(wantKept))
	}
	for i := range after {
		if after[i] != wantKept[i] {
			t.Errorf("row changed:\n got %+v\nwant %+v", after[i], wantKept[i])
		}
	}

	// History: only the forget snapshot is left, and it serves no match either.
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	snaps := tbl.Metadata().Snapshots()
	if len(snaps) != 1 || snaps[0].SnapshotID != res.DeleteSnapshotID || tbl.CurrentSnapshot().SnapshotID != res.DeleteSnapshotID {
		t.Fatalf("snapshots after forget: %+v", snaps)
	}
	// The snapshot kept is the seal, which changes no row: "replace", not "delete", at
	// which a streaming reader (Spark) would stop (issue 37).
	if op := snaps[0].Summary.Operation; op != table.OpReplace {
		t.Errorf("the forget's seal is a %q snapshot, want %q", op, table.OpReplace)
	}
	for _, s := range snaps {
		_, recs, err := tbl.Scan(table.WithSnapshotID(s.SnapshotID)).ToArrowRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			get, err := payloads(rec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range int(rec.NumRows()) {
				if payloadHasValue(get(i)) {
					t.Errorf("snapshot %d still serves %q", s.SnapshotID, get(i))
				}
			}
			rec.Release()
		}
		for k, v := range s.Summary.Properties {
			if strings.Contains(v, forgotten) {
				t.Errorf("snapshot summary %s holds the value: %s", k, v)
			}
		}
	}
	for _, id := range snapsBefore {
		if _, _, err := tbl.Scan(table.WithSnapshotID(id)).ToArrowRecords(ctx); err == nil {
			t.Errorf("time travel to expired snapshot %d still works", id)
		}
	}
	props := tbl.CurrentSnapshot().Summary.Properties
	if props[PropForgetField] != "user_id" || props[PropForgetHash] != ValueHash(forgotten) ||
		props[PropForgetMatched] != fmt.Sprint(matches) || props[PropForgetFiles] != "3" || props[PropForgetTime] == "" || props[PropFileLog] == "" {
		t.Fatalf("forget summary: %v", props)
	}

	// The warehouse: the old data files are gone; every remaining data file is live,
	// readable and free of the value; no stale manifest is left, and no manifest entry
	// carries the value in its column bounds; no other file holds it in its bytes.
	for _, p := range heldValue {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("data file %s that held the value still exists (%v)", p, err)
		}
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	referenced := map[string]bool{}
	for _, s := range snaps {
		referenced[localPath(s.ManifestList)] = true
		mans, err := s.Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mans {
			referenced[localPath(m.FilePath())] = true
			for e, err := range m.Entries(fs, false) {
				if err != nil {
					t.Fatal(err)
				}
				if e.Status() == iceberg.EntryStatusDELETED {
					t.Errorf("manifest %s keeps a DELETED entry for %s", m.FilePath(), e.DataFile().FilePath())
				}
				live[localPath(e.DataFile().FilePath())] = true
				for _, b := range [](map[int][]byte){e.DataFile().LowerBoundValues(), e.DataFile().UpperBoundValues()} {
					for _, v := range b {
						if bytes.Contains(v, []byte(forgotten)) {
							t.Errorf("manifest bound %q of %s may hold the value", v, e.DataFile().FilePath())
						}
					}
				}
			}
		}
	}
	files := warehouseFiles(t, state)
	for _, p := range files[".parquet"] {
		if !live[p] {
			t.Errorf("unreferenced data file left: %s", p)
		}
		if slices.ContainsFunc(parquetPayloads(t, p), payloadHasValue) {
			t.Errorf("data file %s holds the value", p)
		}
	}
	if len(files[".parquet"]) != len(live) {
		t.Errorf("%d data files on disk, %d referenced", len(files[".parquet"]), len(live))
	}
	for _, p := range files[".avro"] {
		if !referenced[p] {
			t.Errorf("stale manifest (list) left: %s", p)
		}
	}
	for ext, ps := range files {
		if ext == ".parquet" || ext == ".avro" {
			continue
		}
		for _, p := range ps {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(forgotten)) {
				t.Errorf("%s holds the value", p)
			}
		}
	}

	// The ingest log survived the expiry: the same landing files are not read again.
	again, err := IngestFiles(ctx, lh, ident, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Rows != 0 || again.SnapshotID != 0 || again.Skipped != 3 || len(again.Changed) != 0 {
		t.Fatalf("ingest after forget: %+v", again)
	}
	ingest("d.jsonl", `{"user_id":"u-9"}`)
	if n := len(scanAll(t, lh)); n != len(wantKept)+1 {
		t.Fatalf("%d rows after a new ingest, want %d", n, len(wantKept)+1)
	}

	// Forgetting again finds nothing and changes nothing.
	snapsNow := snapshotIDs(t, lh)
	res, err = Forget(ctx, lh, ident, forgetReq, true)
	if err != nil || res.Matched != 0 || res.ExpiredSnapshots != 0 || !slices.Equal(snapshotIDs(t, lh), snapsNow) {
		t.Fatalf("second forget: %+v, %v", res, err)
	}
}

// TestForgetReplansAfterConcurrentIngest: rows ingested between the plan and the commit
// are forgotten too.
func TestForgetReplansAfterConcurrentIngest(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	src := []FileSource{source(landing)}
	writeFile(t, filepath.Join(landing, "a.jsonl"), []byte("{\"user_id\":\"u-42\"}\n{\"user_id\":\"u-1\"}\n"))
	if _, err := IngestFiles(ctx, lh, ident, src, Options{}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	beforeForgetCommit = func() {
		calls++
		if calls == 1 {
			writeFile(t, filepath.Join(landing, "b.jsonl"), []byte("{\"user_id\":\"u-42\",\"late\":true}\n{\"user_id\":\"u-2\"}\n"))
			if _, err := IngestFiles(ctx, lh, ident, src, Options{}); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { beforeForgetCommit = nil })
	res, err := Forget(ctx, lh, ident, forgetReq, true)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || res.Matched != 2 || res.ExpiredSnapshots != 3 {
		t.Fatalf("calls %d, result %+v", calls, res)
	}
	var got []string
	for _, r := range scanAll(t, lh) {
		got = append(got, r.payload)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{`{"user_id":"u-1"}`, `{"user_id":"u-2"}`}) {
		t.Fatalf("rows left: %q", got)
	}
	again, err := IngestFiles(ctx, lh, ident, src, Options{})
	if err != nil || again.Rows != 0 || again.Skipped != 2 {
		t.Fatalf("ingest after forget: %+v, %v", again, err)
	}
}

// TestForgetFinishesInterruptedExpiry: when the rows were removed but the history was
// not expired (a crash between the two commits), forgetting again finishes the job.
func TestForgetFinishesInterruptedExpiry(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	src := []FileSource{source(landing)}
	writeFile(t, filepath.Join(landing, "a.jsonl"), []byte("{\"user_id\":\"u-42\"}\n{\"user_id\":\"u-1\"}\n"))
	if _, err := IngestFiles(ctx, lh, ident, src, Options{}); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	first := tbl.CurrentSnapshot().SnapshotID
	path, _ := forgetReq.path()
	m := newPayloadMatcher(path, forgotten)
	plan, err := planForget(ctx, tbl, m)
	if err != nil || plan.matched != 1 {
		t.Fatalf("plan: %+v, %v", plan, err)
	}
	snap, err := rewriteWithout(ctx, lh, ident, tbl, plan, m, iceberg.Properties{
		PropForgetField: "user_id", PropForgetHash: ValueHash(forgotten),
	})
	plan.close()
	if err != nil {
		t.Fatal(err)
	}
	// A later ingest lands on top before the operator re-runs forget.
	writeFile(t, filepath.Join(landing, "b.jsonl"), []byte("{\"user_id\":\"u-2\"}\n"))
	if _, err := IngestFiles(ctx, lh, ident, src, Options{}); err != nil {
		t.Fatal(err)
	}
	tbl, _ = lh.LoadTable(ctx, ident)
	if _, _, err := tbl.Scan(table.WithSnapshotID(first)).ToArrowRecords(ctx); err != nil {
		t.Fatalf("history should still be there: %v", err)
	}
	// Files of writes that never committed: an old one (a crash long ago) is deleted, a
	// young one (maybe a write in progress) is kept.
	dataDir := filepath.Join(localPath(tbl.Location()), "data")
	oldOrphan, newOrphan := filepath.Join(dataDir, "crashed.parquet"), filepath.Join(dataDir, "in-flight.parquet")
	writeFile(t, oldOrphan, []byte(forgotten))
	writeFile(t, newOrphan, []byte("x"))
	longAgo := time.Now().Add(-OrphanAge - time.Hour)
	if err := os.Chtimes(oldOrphan, longAgo, longAgo); err != nil {
		t.Fatal(err)
	}

	res, err := Forget(ctx, lh, ident, forgetReq, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 0 || res.DeleteSnapshotID != snap || res.ExpiredSnapshots != 2 || res.RemovedFiles != 1 ||
		res.RemovedOrphanFiles != 1 || res.OrphanFilesKept != 1 {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(oldOrphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old orphan file left: %v", err)
	}
	if _, err := os.Stat(newOrphan); err != nil {
		t.Errorf("young orphan file deleted: %v", err)
	}
	ids := snapshotIDs(t, lh)
	if len(ids) != 2 || ids[0] != snap {
		t.Fatalf("snapshots left: %v (forget snapshot %d)", ids, snap)
	}
	if n := len(scanAll(t, lh)); n != 2 {
		t.Fatalf("%d rows", n)
	}
}

func TestForgetEveryRow(t *testing.T) {
	ctx := context.Background()
	state, landing := t.TempDir(), t.TempDir()
	lh := lakehousetest.OpenDir(t, state)
	writeFile(t, filepath.Join(landing, "a.jsonl"), []byte("{\"user_id\":\"u-42\"}\n{\"user_id\":\"u-42\",\"n\":2}\n"))
	if _, err := IngestFiles(ctx, lh, ident, []FileSource{source(landing)}, Options{}); err != nil {
		t.Fatal(err)
	}
	res, err := Forget(ctx, lh, ident, forgetReq, true)
	if err != nil || res.Matched != 2 || res.FilesRewritten != 1 || res.RemovedFiles != 1 {
		t.Fatalf("forget: %+v, %v", res, err)
	}
	if n := len(scanAll(t, lh)); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	if ps := warehouseFiles(t, state)[".parquet"]; len(ps) != 0 {
		t.Fatalf("data files left: %v", ps)
	}
}

// TestForgetKeepsKafkaOffsets: the offsets Kafka ingestion resumes from survive the
// expiry of the snapshots that recorded them.
func TestForgetKeepsKafkaOffsets(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	commit := func(payload, offsets string) {
		t.Helper()
		run, err := NewRun(ctx, lh, ident, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Write(ctx, func(emit Emit) error {
			return emit([]byte(payload), "shop_kafka", "orders:0:1", 1, time.Time{})
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := run.Commit(ctx, iceberg.Properties{PropOffsets: offsets}, nil); err != nil {
			t.Fatal(err)
		}
	}
	commit(`{"user_id":"u-42"}`, `{"orders:0":10,"orders:1":5,"refunds:0":3}`)
	commit(`{"user_id":"u-1"}`, `{"orders:0":12,"orders:1":7}`)
	if _, err := Forget(ctx, lh, ident, forgetReq, true); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if len(tbl.Metadata().Snapshots()) != 1 {
		t.Fatalf("%d snapshots", len(tbl.Metadata().Snapshots()))
	}
	got := tbl.CurrentSnapshot().Summary.Properties[PropOffsets]
	if want := `{"orders:0":12,"orders:1":7,"refunds:0":3}`; got != want {
		t.Fatalf("offsets after forget = %s, want %s", got, want)
	}
}

func TestForgetRefusesOtherRefs(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	writeFile(t, filepath.Join(landing, "a.jsonl"), []byte("{\"user_id\":\"u-42\"}\n"))
	if _, err := IngestFiles(ctx, lh, ident, []FileSource{source(landing)}, Options{}); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := catalog.ParseIdent(ident)
	_, _, err = lh.Catalog().CommitTable(ctx, id, nil, []table.Update{
		table.NewSetSnapshotRefUpdate("audit-2026", tbl.CurrentSnapshot().SnapshotID, table.TagRef, 0, 0, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Forget(ctx, lh, ident, forgetReq, true)
	if err == nil || !strings.Contains(err.Error(), "audit-2026") {
		t.Fatalf("forget with a tag: %v", err)
	}
	if n := len(scanAll(t, lh)); n != 1 {
		t.Fatalf("the refused forget changed the table: %d rows", n)
	}
}

func TestForgetMissingTable(t *testing.T) {
	lh := lakehousetest.Open(t)
	_, err := Forget(context.Background(), lh, "bronze.nope", forgetReq, true)
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Fatalf("err = %v", err)
	}
}

func TestForgetMatch(t *testing.T) {
	cases := []struct {
		payload string
		field   string
		value   string
		want    bool
	}{
		{`{"user_id":"u-42"}`, "user_id", "u-42", true},
		{`  { "a" : 1 , "user_id" :	"u-42" }  `, "user_id", "u-42", true},
		{`{"user_id":"u-420"}`, "user_id", "u-42", false},
		{`{"user_id":"U-42"}`, "user_id", "u-42", false},
		{`{"user_id":"u\u002d42"}`, "user_id", "u-42", true},
		{`{"user\u005fid":"u-42"}`, "user_id", "u-42", true},
		{`{"other":"u-42"}`, "user_id", "u-42", false},
		{`{"x":{"user_id":"u-42"}}`, "user_id", "u-42", false}, // not top level
		// Not a JSON object: the value as a whole token of the text, whatever the field.
		{`["user_id","u-42"]`, "user_id", "u-42", true},
		{`"u-42"`, "user_id", "u-42", true},
		{`{"user_id":"u-42",`, "user_id", "u-42", true},
		{`{"user_id":"u-42"} trailing`, "user_id", "u-42", true},
		{`{"user_id":"u-42"`, "user_id", "u-42", true},
		{`{"user_id":u-42}`, "user_id", "u-42", true},
		{`{"other":"u-42"`, "user_id", "u-42", true},
		{`order of u-42 (text)`, "user_id", "u-42", true},
		{`u-42`, "user_id", "u-42", true},
		{`{"user_id":"u-420"`, "user_id", "u-42", false},
		{`{"user_id":"xu-42"`, "user_id", "u-42", false},
		{`{"user_id":"u-42.5"`, "user_id", "u-42", false},
		{`{"user_id":"u-4`, "user_id", "u-42", false},        // cut inside the value: not found
		{`{"user_id":"u\u002d42"`, "user_id", "u-42", false}, // escaped: not found
		{`{"email":"xa@b.c"`, "email", "a@b.c", false},
		{`{"email":"a@b.c"`, "email", "a@b.c", true},
		{`{"email":"a@b.cd"`, "email", "a@b.c", false},
		{`{"user_id":"u-1","user_id":"u-42"}`, "user_id", "u-42", true}, // duplicate keys: either
		{`{"s":"a\"b}","user_id":"u-42"}`, "user_id", "u-42", true},
		{`{"n":[1,{"user_id":"u-42"}],"user_id":"u-7"}`, "user_id", "u-42", false},
		{`{"id":42}`, "id", "42", true},
		{`{"id":42.0}`, "id", "42", false},
		{`{"id":-1.5e3}`, "id", "-1.5e3", true},
		{`{"id":"42"}`, "id", "42", true},
		{`{"ok":true}`, "ok", "true", true},
		{`{"v":null}`, "v", "null", true},
		{`{"v":{"a":1}}`, "v", `{"a":1}`, false},
		{`{"customer":{"email":"a@b.c"}}`, "customer.email", "a@b.c", true},
		{`{"customer":{"name":"x","email" : "a@b.c"},"z":1}`, "customer.email", "a@b.c", true},
		{`{"customer":"a@b.c"}`, "customer.email", "a@b.c", false},
		{`{"customer.email":"a@b.c"}`, "customer.email", "a@b.c", false},
		{`{"a":{"b":{"c":"v"}}}`, "a.b.c", "v", true},
		{`{"a":{"b":{"c":"v"}}}`, "a.b", "v", false},
		{`{"name":"café","user_id":"u-42"}`, "name", "café", true},
		{EncodePayload([]byte("{\"n\":\"caf\xe9\",\"user_id\":\"u-42\"}")), "user_id", "u-42", true},
		{EncodePayload([]byte(BinaryPrefix + `{"user_id":"u-42"}`)), "user_id", "u-42", true}, // not JSON once decoded
		{EncodePayload([]byte("café u-42")), "user_id", "u-42", true},
		{EncodePayload([]byte("caféu-42")), "user_id", "u-42", false},
		{``, "user_id", "u-42", false},
		{`{}`, "user_id", "u-42", false},
		{`{"user_id":"`, "user_id", "u-42", false},
	}
	for _, c := range cases {
		m := newPayloadMatcher(strings.Split(c.field, "."), c.value)
		if got := m.match(c.payload); got != c.want {
			t.Errorf("match(%q, %s = %q) = %v, want %v", c.payload, c.field, c.value, got, c.want)
		}
	}
}

func FuzzForgetMatch(f *testing.F) {
	for _, s := range []string{`{"user_id":"u-42"}`, `{"a":{"user_id":1}}`, `{"user_id":"u\"42"}`, `[{]`} {
		f.Add(s)
	}
	m := newPayloadMatcher([]string{"user_id"}, "u-42")
	f.Fuzz(func(t *testing.T, s string) {
		got := m.match(s) // must not panic
		if got && !strings.Contains(s, "u-42") && !strings.Contains(s, `\u`) && !strings.HasPrefix(s, BinaryPrefix) {
			t.Fatalf("%q matched without the value", s)
		}
		if got && !strings.Contains(s, "user") && !strings.Contains(s, `\u`) && isJSONObject(s) {
			t.Fatalf("%q: a JSON object matched without the field", s)
		}
	})
}

func TestParseForgetWhere(t *testing.T) {
	cases := []struct {
		in      string
		want    ForgetRequest
		wantErr string
	}{
		{in: "user_id = u-42", want: ForgetRequest{"user_id", "u-42"}},
		{in: "user_id=u-42", want: ForgetRequest{"user_id", "u-42"}},
		{in: "  user_id   =   42  ", want: ForgetRequest{"user_id", "42"}},
		{in: "user_id = 'u-42'", want: ForgetRequest{"user_id", "u-42"}},
		{in: `name = "Jane Doe"`, want: ForgetRequest{"name", "Jane Doe"}},
		{in: `name = 'O"Brien'`, want: ForgetRequest{"name", `O"Brien`}},
		{in: "email = 'a=b@c.d'", want: ForgetRequest{"email", "a=b@c.d"}},
		{in: "customer.email = a@b.c", want: ForgetRequest{"customer.email", "a@b.c"}},
		{in: "user_id u-42", wantErr: `want "field = value"`},
		{in: "= u-42", wantErr: "missing field"},
		{in: "user_id =", wantErr: "missing value"},
		{in: "user_id = ''", wantErr: "empty value"},
		{in: "user_id == u-42", wantErr: `single "="`},
		{in: "user_id != u-42", wantErr: `only "=" is supported`},
		{in: "user_id >= u-42", wantErr: `only "=" is supported`},
		{in: "user id = u-42", wantErr: "no spaces or quotes"},
		{in: "'user_id' = u-42", wantErr: "no spaces or quotes"},
		{in: "a..b = x", wantErr: "empty path element"},
		{in: ".a = x", wantErr: "empty path element"},
		{in: "name = Jane Doe", wantErr: "quote the value"},
		{in: "name = 'Jane Doe", wantErr: "closing ' quote"},
		{in: `name = "Jane"Doe"`, wantErr: "own quote character"},
		{in: "name = '", wantErr: "closing ' quote"},
	}
	for _, c := range cases {
		got, err := ParseForgetWhere(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseForgetWhere(%q) error = %v, want %q", c.in, err, c.wantErr)
			}
			// Errors never repeat the value.
			for _, v := range []string{"u-42", "Jane", "Doe", "Brien"} {
				if err != nil && strings.Contains(err.Error(), v) {
					t.Errorf("ParseForgetWhere(%q) error shows the value: %v", c.in, err)
				}
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseForgetWhere(%q) = %+v, %v; want %+v", c.in, got.Field+"="+got.Value, err, c.want.Field+"="+c.want.Value)
		}
	}
}

func TestForgetRequestHidesValue(t *testing.T) {
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("forget", "req", forgetReq)
	out := logs.String() + fmt.Sprintf("%v %+v %#v %s %q", forgetReq, forgetReq, forgetReq, forgetReq, forgetReq)
	if strings.Contains(out, forgotten) {
		t.Fatalf("value printed: %s", out)
	}
	if !strings.Contains(out, "user_id") || !strings.Contains(logs.String(), ValueHash(forgotten)) {
		t.Fatalf("field or hash missing: %s", out)
	}
}

func BenchmarkForgetMatch(b *testing.B) {
	payload := `{"order_id":"o-123456","user_id":"u-77","amount":1234.50,"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}],"address":{"city":"Riga","zip":"LV-1010"},"status":"PAID"}`
	m := newPayloadMatcher([]string{"user_id"}, forgotten)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if m.match(payload) {
			b.Fatal("matched")
		}
	}
}
