package bronze

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

const ident = "bronze.orders"

type row struct {
	payload, system, file, eventID, batchID string
	ingestTS                                time.Time
	sourceTSNull                            bool
	pos                                     int64 // -1: null
}

func scanAll(t *testing.T, lh *catalog.Lakehouse) []row {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		str := func(name string, i int) string {
			switch a := col(name).(type) {
			case *array.String:
				return a.Value(i)
			case *array.LargeString:
				return a.Value(i)
			}
			t.Fatalf("column %s has type %T", name, col(name))
			return ""
		}
		ts := col(ColIngestTS).(*array.Timestamp)
		pos := col(ColSourcePos).(*array.Int64)
		for i := range int(rec.NumRows()) {
			p := int64(-1)
			if !pos.IsNull(i) {
				p = pos.Value(i)
			}
			out = append(out, row{
				payload: str(ColPayload, i), system: str(ColSystem, i), file: str(ColFile, i),
				eventID: str(ColEventID, i), batchID: str(ColBatchID, i),
				ingestTS:     ts.Value(i).ToTime(arrow.Microsecond),
				sourceTSNull: col(ColSourceTS).IsNull(i),
				pos:          p,
			})
		}
		rec.Release()
	}
	return out
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func source(dir string) FileSource {
	return FileSource{Name: "landing", System: "shop_file", Dir: dir, Compression: "auto"}
}

func TestIngestLinesExactlyOnce(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	lines := []string{
		`{"order_id":"o-1","amount":10.50,"op":"c"}`,
		`{"order_id":"o-1","amount":10.50,"op":"c"}`, // exact duplicate: kept
		`{"order_id":"o-2","amount":`,                // invalid JSON: kept
		`{"order_id":null}`,
		"not json at all\r",            // CR kept byte for byte
		"caf\xe9 latin-1 bytes",        // invalid UTF-8: stored losslessly
		BinaryPrefix + "looks encoded", // collides with the marker: encoded too
		`  {"spaces":"around"}  `,
	}
	body := strings.Join(lines[:4], "\n") + "\n\n   \n" + strings.Join(lines[4:], "\n") // two blank lines, no final newline
	writeFile(t, filepath.Join(dir, "a.jsonl"), []byte(body))
	writeFile(t, filepath.Join(dir, ".hidden.jsonl"), []byte("x\n"))
	writeFile(t, filepath.Join(dir, "b.jsonl.tmp"), []byte("x\n"))

	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{BatchRows: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != int64(len(lines)) || res.Blank != 2 || len(res.Files) != 1 || res.SnapshotID == 0 {
		t.Fatalf("result = %+v", res)
	}
	got := scanAll(t, lh)
	if len(got) != len(lines) {
		t.Fatalf("got %d rows, want %d", len(got), len(lines))
	}
	var payloads []string
	ids := map[string]bool{}
	for _, r := range got {
		b, err := DecodePayload(r.payload)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, string(b))
		if r.system != "shop_file" || r.file != filepath.Join(dir, "a.jsonl") || r.batchID != res.BatchID || !r.sourceTSNull {
			t.Errorf("audit columns wrong: %+v", r)
		}
		if len(r.eventID) != 36 || ids[r.eventID] {
			t.Errorf("event id %q not a fresh UUID", r.eventID)
		}
		ids[r.eventID] = true
		if time.Since(r.ingestTS) > time.Minute || r.ingestTS.Location() != time.UTC && r.ingestTS.UTC() != r.ingestTS {
			t.Errorf("ingest ts %v", r.ingestTS)
		}
	}
	want := slices.Clone(lines)
	slices.Sort(want)
	slices.Sort(payloads)
	if !slices.Equal(payloads, want) {
		t.Fatalf("payloads differ:\n got %q\nwant %q", payloads, want)
	}

	// A second run over the same landing files adds nothing and commits nothing.
	res2, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Rows != 0 || res2.SnapshotID != 0 || res2.Skipped != 1 {
		t.Fatalf("second run = %+v", res2)
	}
	if n := len(scanAll(t, lh)); n != len(lines) {
		t.Fatalf("rows after second run = %d", n)
	}
}

// TestIngestRecyclesBatchBuffers ingests enough rows that the batch writer's string
// buffers go back to its pool and are written over by later batches: every row must
// still read back as ingested.
func TestIngestRecyclesBatchBuffers(t *testing.T) {
	// 1000 rows: many batches; 8192: the _source_pos buffers are large enough to be pooled too.
	for _, batch := range []int{1000, 8192} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) { ingestRecyclingBuffers(t, batch) })
	}
}

func ingestRecyclingBuffers(t *testing.T, batchRows int) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	var lines []string
	var body bytes.Buffer
	at := map[string]int64{} // the oracle of positions: each line's offset
	for i := range 40_000 {
		l := fmt.Sprintf(`{"order_id":"o-%09d","note":"%s"}`, i, strings.Repeat(string(rune('a'+i%26)), 150+i%97))
		lines = append(lines, l)
		at[l] = int64(body.Len())
		body.WriteString(l + "\n")
	}
	writeFile(t, filepath.Join(dir, "big.jsonl"), body.Bytes())
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{BatchRows: batchRows})
	if err != nil {
		t.Fatal(err)
	}
	got := scanAll(t, lh)
	if res.Rows != int64(len(lines)) || len(got) != len(lines) {
		t.Fatalf("ingested %d rows, read %d, want %d", res.Rows, len(got), len(lines))
	}
	var payloads []string
	ids := map[string]bool{}
	for _, r := range got {
		payloads = append(payloads, r.payload)
		if r.system != "shop_file" || r.file != filepath.Join(dir, "big.jsonl") || r.batchID != res.BatchID || r.pos != at[r.payload] {
			t.Fatalf("audit columns wrong: %+v (position %d)", r, at[r.payload])
		}
		if _, err := uuid.Parse(r.eventID); err != nil || len(r.eventID) != 36 || ids[r.eventID] {
			t.Fatalf("event id %q not a fresh UUID", r.eventID)
		}
		ids[r.eventID] = true
	}
	slices.Sort(payloads)
	slices.Sort(lines)
	for i := range lines {
		if payloads[i] != lines[i] {
			t.Fatalf("payload %d: %q, want %q", i, payloads[i], lines[i])
		}
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	for _, in := range []string{"", "plain", "caf\xe9", BinaryPrefix, BinaryPrefix + "x", "\x00", "ok ✓"} {
		enc := EncodePayload([]byte(in))
		if !strings.HasPrefix(enc, BinaryPrefix) && enc != in {
			t.Errorf("valid UTF-8 %q changed to %q", in, enc)
		}
		dec, err := DecodePayload(enc)
		if err != nil || string(dec) != in {
			t.Errorf("round trip %q -> %q -> %q, %v", in, enc, dec, err)
		}
	}
}

func TestCompressedCSVAndParquet(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprint(zw, "{\"a\":1}\n{\"a\":2}\n")
	zw.Close()
	writeFile(t, filepath.Join(dir, "1.jsonl.gz"), gz.Bytes())

	enc, _ := zstd.NewWriter(nil)
	writeFile(t, filepath.Join(dir, "2.jsonl.zst"), enc.EncodeAll([]byte("{\"a\":3}\n"), nil))

	writeFile(t, filepath.Join(dir, "3.csv"), []byte("order_id,note\no-1,\"hello, \"\"world\"\"\"\no-2,\n"))

	mem := memory.DefaultAllocator
	sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, sch)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{7, 8}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"x", ""}, []bool{true, false})
	rec := b.NewRecordBatch()
	var pq bytes.Buffer
	if err := pqarrow.WriteTable(array.NewTableFromRecords(sch, []arrow.RecordBatch{rec}), &pq, 1024, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "4.parquet"), pq.Bytes())

	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 7 || len(res.Files) != 4 {
		t.Fatalf("result = %+v", res)
	}
	var got []string
	for _, r := range scanAll(t, lh) {
		got = append(got, filepath.Base(r.file)+" "+r.payload)
	}
	slices.Sort(got)
	want := []string{
		`1.jsonl.gz {"a":1}`, `1.jsonl.gz {"a":2}`, `2.jsonl.zst {"a":3}`,
		`3.csv {"order_id":"o-1","note":"hello, \"world\""}`, `3.csv {"order_id":"o-2","note":null}`,
		`4.parquet {"id":7,"name":"x"}`, `4.parquet {"id":8,"name":null}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, f := range res.Files {
		sum, err := checksumFile(f.Path)
		if err != nil || sum != f.Checksum {
			t.Errorf("%s: recorded checksum %s, file %s (%v)", f.Path, f.Checksum, sum, err)
		}
	}
}

func TestChangedFileIsReportedNotReread(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "a.jsonl")
	writeFile(t, p, []byte("{\"v\":1}\n"))
	if _, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil {
		t.Fatal(err)
	}
	// Same size, new content and mtime: found by the checksum.
	writeFile(t, p, []byte("{\"v\":2}\n"))
	future := time.Now().Add(time.Hour)
	os.Chtimes(p, future, future)
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 1 || res.Rows != 0 || res.SnapshotID != 0 {
		t.Fatalf("changed file not reported: %+v", res)
	}
	res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{Reingest: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1 {
		t.Fatalf("reingest = %+v", res)
	}
	var payloads []string
	for _, r := range scanAll(t, lh) {
		payloads = append(payloads, r.payload)
	}
	slices.Sort(payloads)
	if !slices.Equal(payloads, []string{`{"v":1}`, `{"v":2}`}) {
		t.Fatalf("payloads = %q", payloads)
	}
	// Touching a file without changing it is not a change.
	later := future.Add(time.Hour)
	os.Chtimes(p, later, later)
	res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil || res.Skipped != 1 || len(res.Changed) != 0 {
		t.Fatalf("touched file: %+v, %v", res, err)
	}
}

// TestCrashBeforeCommit kills a real ingesting process with SIGKILL after its data files
// are written and before the commit, then ingests again: nothing lost, nothing doubled.
func TestCrashBeforeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	state, landing := t.TempDir(), t.TempDir()
	var body strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&body, "{\"n\":%d}\n", i)
	}
	writeFile(t, filepath.Join(landing, "a.jsonl"), []byte(body.String()))
	writeFile(t, filepath.Join(landing, "b.jsonl"), []byte(body.String()))

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), "BRONZE_CRASH_STATE="+state, "BRONZE_CRASH_LANDING="+landing)
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child should die by SIGKILL, got %v\n%s", err, out)
	}
	parquetFiles := 0
	filepath.Walk(state, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			parquetFiles++
		}
		return nil
	})
	if parquetFiles == 0 {
		t.Fatal("the child died before writing data files: the test would prove nothing")
	}

	lh := lakehousetest.OpenDir(t, state)
	res, err := IngestFiles(context.Background(), lh, ident, []FileSource{source(landing)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 10000 {
		t.Fatalf("rerun ingested %d rows, want 10000", res.Rows)
	}
	rows := scanAll(t, lh)
	seen := map[string]int{}
	for _, r := range rows {
		seen[filepath.Base(r.file)+r.payload]++
	}
	if len(rows) != 10000 || len(seen) != 10000 {
		t.Fatalf("after crash and rerun: %d rows, %d distinct", len(rows), len(seen))
	}
}

// TestCrashChild is the process killed by TestCrashBeforeCommit.
func TestCrashChild(t *testing.T) {
	state := os.Getenv("BRONZE_CRASH_STATE")
	if state == "" {
		t.Skip("helper process of TestCrashBeforeCommit")
	}
	lh := lakehousetest.OpenDir(t, state)
	_, err := IngestFiles(context.Background(), lh, ident, []FileSource{source(os.Getenv("BRONZE_CRASH_LANDING"))}, Options{
		BatchRows:  1000,
		afterWrite: func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) },
	})
	t.Fatalf("not killed: %v", err)
}

func TestIngestedFilesSurviveInSummary(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.jsonl"), []byte("{}\n{}\n"))
	if _, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	props := tbl.CurrentSnapshot().Summary.Properties
	var recs []FileRecord
	if err := json.Unmarshal([]byte(props[PropFiles]), &recs); err != nil || len(recs) != 1 || recs[0].Rows != 2 {
		t.Fatalf("summary files = %s (%v)", props[PropFiles], err)
	}
	if props[PropBatchID] == "" || props[PropSource] != "landing" || props[PropRows] != "2" {
		t.Fatalf("summary = %v", props)
	}
}

// TestFreshParquetDoesNotSettle (issue 41): a Parquet file landed a moment ago whose footer
// is there is read at once, however long the settle time; the same file cut before its
// footer (a writer still writing) waits for the settle time like any other fresh file.
func TestFreshParquetDoesNotSettle(t *testing.T) {
	mem := memory.DefaultAllocator
	sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, sch)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	rec := b.NewRecordBatch()
	var pq bytes.Buffer
	if err := pqarrow.WriteTable(array.NewTableFromRecords(sch, []arrow.RecordBatch{rec}), &pq, 1024, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		rows  int64
		waits bool
	}{
		{"whole", pq.Bytes(), 3, false},
		{"cut_before_footer", pq.Bytes()[:pq.Len()-12], 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lakehousetest.Open(t)
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "fresh.parquet"), tc.data)
			src := source(dir)
			src.Settle = time.Hour
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			res, err := IngestFiles(ctx, lh, ident, []FileSource{src}, Options{})
			if tc.waits {
				if !errors.Is(err, context.DeadlineExceeded) || res.Rows != 0 {
					t.Fatalf("a cut file was not left to settle: %+v (%v)", res, err)
				}
				return
			}
			if err != nil || res.Rows != tc.rows || len(res.Unsettled) != 0 {
				t.Fatalf("%+v (%v), want %d rows at once", res, err, tc.rows)
			}
		})
	}
}

// TestTouchedFileTakesItsNewMtime: a landing file touched after it was ingested is found
// unchanged by its checksum, and its new mtime rides on the next commit (PropRedated), so
// that the runs after it skip the file by its mtime instead of reading it again; a run
// that commits nothing records nothing. The expiry's fold keeps the new mtime.
func TestTouchedFileTakesItsNewMtime(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	a := filepath.Join(dir, "a.jsonl")
	writeFile(t, a, []byte("{\"v\":1}\n"))
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(a, old, old)
	if _, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{}); err != nil {
		t.Fatal(err)
	}
	mtime := func() int64 {
		t.Helper()
		tbl, err := lh.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		files, err := IngestedFiles(tbl)
		if err != nil {
			t.Fatal(err)
		}
		return files[a].ModTime
	}
	touched := old.Add(30 * time.Minute)
	os.Chtimes(a, touched, touched)
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil || res.Skipped != 1 || res.SnapshotID != 0 || mtime() != old.UnixNano() {
		t.Fatalf("touched, nothing new: %+v %v, recorded mtime %d (want the old one: nothing committed)", res, err, mtime())
	}
	writeFile(t, filepath.Join(dir, "b.jsonl"), []byte("{\"v\":2}\n"))
	os.Chtimes(filepath.Join(dir, "b.jsonl"), old, old)
	res, err = IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil || res.Skipped != 1 || res.Rows != 1 || len(res.Files) != 1 {
		t.Fatalf("with a new file: %+v %v", res, err)
	}
	if got := mtime(); got != touched.UnixNano() {
		t.Fatalf("recorded mtime %d, want the touched file's %d", got, touched.UnixNano())
	}
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	props, err := FoldBookkeeping(tbl)
	if err != nil || !strings.Contains(props[PropFileLog], strconv.FormatInt(touched.UnixNano(), 10)) {
		t.Fatalf("the fold lost the new mtime: %v %s", err, props[PropFileLog])
	}
	if payloads := len(scanAll(t, lh)); payloads != 2 {
		t.Fatalf("%d rows, want 2: the touched file was read again", payloads)
	}
}

// TestEventIDs checks the layout of _event_id: canonical RFC 9562 version-8 UUIDs,
// distinct, sharing one random prefix and counting in their last eight hex digits until
// the generator draws a new prefix; two generators' prefixes differ.
func TestEventIDs(t *testing.T) {
	g, h := newUUIDGen(), newUUIDGen()
	first := string(g.next())
	if string(h.next())[:uuidCounterAt] == first[:uuidCounterAt] {
		t.Fatalf("two generators drew the same prefix %q", first[:uuidCounterAt])
	}
	seen := map[string]bool{first: true}
	for i := 1; i < 70000; i++ {
		id := string(g.next())
		u, err := uuid.Parse(id)
		if err != nil || u.String() != id || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("id %d %q: not a canonical version-8 UUID (%v)", i, id, err)
		}
		if id[:uuidCounterAt] != first[:uuidCounterAt] || id[uuidCounterAt:] != fmt.Sprintf("%08x", i) || seen[id] {
			t.Fatalf("id %d is %q after %q: want the same prefix and counter %08x", i, id, first, i)
		}
		seen[id] = true
	}
	g.left = 1 // the counter's last value: the next id draws a new prefix
	last := string(g.next())
	next := string(g.next())
	if last[uuidCounterAt:] != fmt.Sprintf("%08x", 70000) || next[uuidCounterAt:] != "00000000" || next[:uuidCounterAt] == last[:uuidCounterAt] {
		t.Fatalf("after the counter's end: %q then %q, want a new prefix and counter 0", last, next)
	}
}

// TestWriteFailureIsReported blocks the Bronze table's partition directory (a regular
// file where the writer makes the directory), so the data file cannot be created: the
// ingest must fail with nothing committed, and once the block is gone a rerun ingests
// every row. A one-batch write whose writer fails after its last batch was handed over
// used to end without an error and without files.
func TestWriteFailureIsReported(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lh := lakehousetest.OpenDir(t, dir)
	landing := t.TempDir()
	writeFile(t, filepath.Join(landing, "a.jsonl"), []byte("{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"))
	data := filepath.Join(dir, "warehouse", "bronze.db", "orders", "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var blocks []string
	for _, day := range []time.Time{now, now.Add(24 * time.Hour)} { // a run across midnight
		p := filepath.Join(data, "_ingest_day="+day.Format(time.DateOnly))
		writeFile(t, p, nil)
		blocks = append(blocks, p)
	}
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(landing)}, Options{})
	if err == nil {
		t.Fatalf("ingest into a blocked partition succeeded: %+v", res)
	}
	if !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("error %q does not name the failed write", err)
	}
	if rows := scanAll(t, lh); len(rows) != 0 {
		t.Fatalf("the failed ingest committed %d rows", len(rows))
	}
	for _, p := range blocks {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if res, err = IngestFiles(ctx, lh, ident, []FileSource{source(landing)}, Options{}); err != nil {
		t.Fatal(err)
	}
	if rows := scanAll(t, lh); res.Rows != 3 || len(rows) != 3 {
		t.Fatalf("rerun: %d rows reported, %d in the table, want 3", res.Rows, len(rows))
	}
}
