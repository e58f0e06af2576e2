package bronze

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// lineStarts is the oracle of JSON Lines positions: each non-blank line of content and
// the offset of its first byte (a leading byte order mark is no part of the first line).
func lineStarts(content []byte) map[string][]int64 {
	out := map[string][]int64{}
	off := int64(0)
	if bytes.HasPrefix(content, utf8BOM) {
		off = int64(len(utf8BOM))
	}
	for line := range bytes.Lines(content[off:]) {
		if s := strings.TrimSuffix(string(line), "\n"); strings.TrimSpace(s) != "" {
			out[s] = append(out[s], off)
		}
		off += int64(len(line))
	}
	return out
}

// positions groups Bronze rows by file and payload: their positions, sorted.
func positions(t *testing.T, rows []row) map[string]map[string][]int64 {
	t.Helper()
	out := map[string]map[string][]int64{}
	for _, r := range rows {
		f := filepath.Base(r.file)
		if out[f] == nil {
			out[f] = map[string][]int64{}
		}
		out[f][r.payload] = append(out[f][r.payload], r.pos)
	}
	for _, m := range out {
		for _, p := range m {
			slices.Sort(p)
		}
	}
	return out
}

func samePositions(t *testing.T, what string, got, want map[string][]int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: positions\n got %v\nwant %v", what, got, want)
	}
}

// TestSourcePositions checks that every Bronze row's _source_pos is where its record
// starts in its landing file, however the file was read: a byte order mark, blank lines
// and identical lines; a gzip file (positions in its decompressed bytes); CSV records,
// one with a quoted newline; Parquet rows (their index); a file that grew and was read
// from where the last run stopped, whose unterminated tail landed once it ended; and a
// changed file read again with --reingest, whose unchanged lines get the positions of
// their first read. The oracle finds the line starts in the files' bytes itself.
func TestSourcePositions(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	src := source(dir)
	src.TailWait = time.Hour
	ingest := func(step string, opt Options) Result {
		t.Helper()
		res, err := IngestFiles(ctx, lh, ident, []FileSource{src}, opt)
		if err != nil || len(res.Quarantined) != 0 {
			t.Fatalf("%s: %+v (%v)", step, res, err)
		}
		return res
	}
	same := `{"flight":"AA1","dep":"2024-01-01T10:00:00Z"}`
	grow := filepath.Join(dir, "a.jsonl")
	writeFile(t, grow, []byte("\ufeff"+same+"\n"+same+"\n\n  \n{\"flight\":\"UA2\"}\n"))
	writeFile(t, filepath.Join(dir, "b.jsonl.gz"), gzipped(t, same+"\n"+same+"\n{\"x\":1}\n"))
	writeFile(t, filepath.Join(dir, "c.csv"), []byte("id,note\n1,\"a\nb\"\n\n2,x\n"))
	writeFile(t, filepath.Join(dir, "d.parquet"), parquetRows(t, 7, 7, 8))
	ingest("first", Options{BatchRows: 2})

	appendTo(t, grow, same+"\n"+same+"\n{\"flight\":\"half")
	if res := ingest("grown", Options{}); res.Rows != 2 || len(res.Waiting) != 1 {
		t.Fatalf("grown: %+v", res)
	}
	appendTo(t, grow, "\"}\n")
	if res := ingest("tail ended", Options{}); res.Rows != 1 || res.Files[0].From == 0 {
		t.Fatalf("tail ended: %+v", res)
	}

	got := positions(t, scanAll(t, lh))
	content, err := os.ReadFile(grow)
	if err != nil {
		t.Fatal(err)
	}
	samePositions(t, "a.jsonl", got["a.jsonl"], lineStarts(content))
	samePositions(t, "b.jsonl.gz", got["b.jsonl.gz"], lineStarts([]byte(same+"\n"+same+"\n{\"x\":1}\n")))
	samePositions(t, "c.csv", got["c.csv"], map[string][]int64{
		`{"id":"1","note":"a\nb"}`: {8},  // after the header
		`{"id":"2","note":"x"}`:    {16}, // after the record before it: the blank line is its own
	})
	samePositions(t, "d.parquet", got["d.parquet"], map[string][]int64{`{"id":7}`: {0, 1}, `{"id":8}`: {2}})

	// The gzip file rewritten with one more line: read again whole, its first lines at
	// the positions they had.
	writeFile(t, filepath.Join(dir, "b.jsonl.gz"), gzipped(t, same+"\n"+same+"\n{\"x\":1}\n{\"x\":2}\n"))
	if res := ingest("reingest", Options{Reingest: true}); res.Rows != 4 {
		t.Fatalf("reingest: %+v", res)
	}
	got = positions(t, scanAll(t, lh))
	samePositions(t, "b.jsonl.gz read twice", got["b.jsonl.gz"], map[string][]int64{
		same: {0, 0, 46, 46}, `{"x":1}`: {92, 92}, `{"x":2}`: {100},
	})
}

// parquetRows is a Parquet file of one int64 column id.
func parquetRows(t *testing.T, ids ...int64) []byte {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	if err := pqarrow.WriteTable(array.NewTableFromRecords(sch, []arrow.RecordBatch{rec}), &buf, 2, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSourcePosAddedToOldTable ingests into a Bronze table created before _source_pos
// existed: the column is added without a snapshot (the files ingested before stay
// recorded, so they are not read again), the old rows read it as null and the new rows
// have their positions.
func TestSourcePosAddedToOldTable(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	dir := t.TempDir()
	old := iceberg.NewSchema(0, Schema().Fields()[:7]...)
	oldArrow := arrow.NewSchema(arrowSchema.Fields()[:7], nil)
	if _, _, err := lh.LoadOrCreateTable(ctx, ident, old, PartitionSpec(), TableProperties(catalog.DefaultCodec())); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "old.jsonl"), []byte("{\"n\":1}\n"))
	commitOldRow(t, lh, oldArrow, filepath.Join(dir, "old.jsonl"))

	writeFile(t, filepath.Join(dir, "new.jsonl"), []byte("{\"n\":2}\n{\"n\":2}\n"))
	res, err := IngestFiles(ctx, lh, ident, []FileSource{source(dir)}, Options{})
	if err != nil || res.Rows != 2 || res.Skipped != 1 {
		t.Fatalf("ingest: %+v (%v)", res, err)
	}
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 2 {
		t.Errorf("%d snapshots, want 2 (the column is added without one)", n)
	}
	var got []string
	for _, r := range scanAll(t, lh) {
		got = append(got, fmt.Sprintf("%s@%d", filepath.Base(r.file), r.pos))
	}
	slices.Sort(got)
	if want := []string{"new.jsonl@0", "new.jsonl@8", "old.jsonl@-1"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// commitOldRow commits one row written the way Bronze did before _source_pos, recording
// path as ingested.
func commitOldRow(t *testing.T, lh *catalog.Lakehouse, sch *arrow.Schema, path string) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := checksumFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(`{"n":1}`)
	b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Now().UnixMicro()))
	for i, v := range map[int]string{2: "shop_file", 3: path, 4: "00000000-0000-4000-8000-000000000000", 5: "old"} {
		b.Field(i).(*array.StringBuilder).Append(v)
	}
	b.Field(6).AppendNull()
	rec := b.NewRecordBatch()
	defer rec.Release()
	files := fmt.Sprintf(`[{"path":%q,"size":%d,"mtime_ns":%d,"xxh64":%q,"rows":1}]`, path, info.Size(), info.ModTime().UnixNano(), sum)
	_, err = lh.Commit(context.Background(), ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.AppendTable(ctx, array.NewTableFromRecords(sch, []arrow.RecordBatch{rec}), 16, iceberg.Properties{PropFiles: files}); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
}
