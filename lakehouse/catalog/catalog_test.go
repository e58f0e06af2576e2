package catalog_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

const watermarkKey = "goldbridge.watermark"

func testSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 4, Name: "amount", Type: iceberg.DecimalTypeOf(18, 2)},
	)
}

func testSpec() iceberg.PartitionSpec {
	return iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{3}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{},
	})
}

var arrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 18, Scale: 2}, Nullable: true},
}, nil)

// row is one table row; Amount is the decimal's string form ("" for null).
type row struct {
	ID     int64
	Name   string // "" for null
	TS     time.Time
	Amount string
}

func (r row) String() string {
	return fmt.Sprintf("{%d %q %s %s}", r.ID, r.Name, r.TS.Format(time.RFC3339Nano), r.Amount)
}

var day0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// sampleRows spans three days, with a null name and a null amount.
func sampleRows() []row {
	return []row{
		{1, "alice", day0.Add(1 * time.Hour), "123.45"},
		{2, "", day0.Add(23*time.Hour + 59*time.Minute + 123456*time.Microsecond), "-0.01"},
		{3, "carol", day0.Add(24 * time.Hour), ""},
		{4, "dave", day0.Add(49 * time.Hour), "9999999999999999.99"},
		{5, "erin", day0.Add(50 * time.Hour), "0.00"},
	}
}

func genRows(start, n int) []row {
	out := make([]row, n)
	for i := range out {
		id := int64(start + i)
		out[i] = row{id, fmt.Sprintf("n%d", id), day0.Add(time.Duration(id) * time.Minute), fmt.Sprintf("%d.%02d", id, id%100)}
	}

	return out
}

func toRecord(t testing.TB, rows []row) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrowSchema)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	names := b.Field(1).(*array.StringBuilder)
	tss := b.Field(2).(*array.TimestampBuilder)
	amounts := b.Field(3).(*array.Decimal128Builder)
	for _, r := range rows {
		ids.Append(r.ID)
		if r.Name == "" {
			names.AppendNull()
		} else {
			names.Append(r.Name)
		}
		tss.Append(arrow.Timestamp(r.TS.UnixMicro()))
		if r.Amount == "" {
			amounts.AppendNull()
		} else {
			n, err := decimal128.FromString(r.Amount, 18, 2)
			if err != nil {
				t.Fatalf("decimal %q: %v", r.Amount, err)
			}
			amounts.Append(n)
		}
	}

	return b.NewRecordBatch()
}

func toReader(t testing.TB, rows []row) array.RecordReader {
	t.Helper()
	rec := toRecord(t, rows)
	defer rec.Release()
	rdr, err := array.NewRecordReader(arrowSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}

	return rdr
}

// scanRows reads the whole current snapshot, sorted by id.
func scanRows(t testing.TB, tbl *table.Table) []row {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer at.Release()
	return arrowRows(t, at)
}

// arrowRows reads an Arrow table of the test schema's columns, sorted by id.
func arrowRows(t testing.TB, at arrow.Table) []row {
	t.Helper()
	tr := array.NewTableReader(at, 0)
	defer tr.Release()
	var out []row
	for tr.Next() {
		rec := tr.RecordBatch()
		s := rec.Schema()
		col := func(name string) arrow.Array {
			idx := s.FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("column %s missing in %s", name, s)
			}

			return rec.Column(idx[0])
		}
		ids := col("id").(*array.Int64)
		names := col("name").(*array.String)
		tss := col("ts").(*array.Timestamp)
		amounts := col("amount").(*array.Decimal128)
		if u := tss.DataType().(*arrow.TimestampType).Unit; u != arrow.Microsecond {
			t.Fatalf("ts unit %s, want us", u)
		}
		for i := range int(rec.NumRows()) {
			r := row{ID: ids.Value(i), TS: time.UnixMicro(int64(tss.Value(i))).UTC()}
			if names.IsValid(i) {
				r.Name = names.Value(i)
			}
			if amounts.IsValid(i) {
				r.Amount = amounts.Value(i).ToString(2)
			}
			out = append(out, r)
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b row) int { return int(a.ID - b.ID) })

	return out
}

// assertRows compares got (sorted by id, as scanRows returns) with want in any order.
func assertRows(t testing.TB, got, want []row) {
	t.Helper()
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b row) int { return int(a.ID - b.ID) })
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d\ngot:  %v\nwant: %v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Name != want[i].Name || !got[i].TS.Equal(want[i].TS) || got[i].Amount != want[i].Amount {
			t.Fatalf("row %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func createTable(t testing.TB, lh *catalog.Lakehouse, ident string) *table.Table {
	t.Helper()
	tbl, created, err := lh.LoadOrCreateTable(context.Background(), ident, testSchema(), testSpec(), nil)
	if err != nil {
		t.Fatalf("LoadOrCreateTable: %v", err)
	}
	if !created {
		t.Fatalf("LoadOrCreateTable: created=false for a new table")
	}

	return tbl
}

// writeFiles writes rows as data files of tbl without committing them.
func writeFiles(t testing.TB, tbl *table.Table, rows []row) []iceberg.DataFile {
	t.Helper()
	files, err := writeFilesErr(t, tbl, rows)
	if err != nil {
		t.Fatal(err)
	}

	return files
}

// writeFilesErr is writeFiles for use off the test goroutine.
func writeFilesErr(t testing.TB, tbl *table.Table, rows []row) ([]iceberg.DataFile, error) {
	rec := toRecord(t, rows)
	var files []iceberg.DataFile
	batches := iter.Seq2[arrow.RecordBatch, error](func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) })
	for df, err := range table.WriteRecords(context.Background(), tbl, arrowSchema, batches) {
		if err != nil {
			return nil, fmt.Errorf("WriteRecords: %w", err)
		}
		files = append(files, df)
	}

	return files, nil
}

// addFiles is a re-runnable commit function: it only adds already written files.
func addFiles(files []iceberg.DataFile, props iceberg.Properties) catalog.CommitFunc {
	return func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.AddDataFiles(ctx, files, props); err != nil {
			return nil, err
		}

		return tx.Commit(ctx)
	}
}

func TestCreateAppendScan(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	tbl := createTable(t, lh, "bronze.orders")
	if spec := tbl.Spec(); spec.NumFields() != 1 {
		t.Fatalf("spec = %s, want one field", spec)
	}

	start := time.Now()
	tbl, err := lh.Commit(ctx, "bronze.orders", func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		rdr := toReader(t, sampleRows())
		defer rdr.Release()
		if err := tx.Append(ctx, rdr, iceberg.Properties{watermarkKey: "42"}); err != nil {
			return nil, err
		}

		return tx.Commit(ctx)
	})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	t.Logf("append of %d rows: %s", len(sampleRows()), time.Since(start))

	snap := tbl.CurrentSnapshot()
	if snap == nil || snap.Summary == nil {
		t.Fatal("no current snapshot after append")
	}
	if got := snap.Summary.Properties[watermarkKey]; got != "42" {
		t.Fatalf("summary %s = %q, want 42 (summary %v)", watermarkKey, got, snap.Summary.Properties)
	}
	if snap.Summary.Operation != table.OpAppend {
		t.Fatalf("operation = %s, want append", snap.Summary.Operation)
	}

	// Read through a fresh handle to be sure it is what the catalog holds.
	fresh, err := lh.LoadTable(ctx, "bronze.orders")
	if err != nil {
		t.Fatal(err)
	}
	if fresh.CurrentSnapshot().SnapshotID != snap.SnapshotID {
		t.Fatalf("fresh snapshot %d, want %d", fresh.CurrentSnapshot().SnapshotID, snap.SnapshotID)
	}
	start = time.Now()
	assertRows(t, scanRows(t, fresh), sampleRows())
	t.Logf("scan: %s", time.Since(start))

	// One data file per day: the rows were split by the day(ts) partition.
	tasks, err := fresh.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 3 {
		t.Fatalf("data files = %d, want 3 (one per day)", len(tasks))
	}
	for _, task := range tasks {
		if !strings.Contains(task.File.FilePath(), "ts_day=") {
			t.Errorf("data file %s not in a ts_day= partition directory", task.File.FilePath())
		}
	}
}

func TestLoadOrCreateTwice(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	props := iceberg.Properties{"write.parquet.compression-codec": "zstd"}
	t1, created1, err := lh.LoadOrCreateTable(ctx, "silver.customers", testSchema(), testSpec(), props)
	if err != nil {
		t.Fatal(err)
	}
	t2, created2, err := lh.LoadOrCreateTable(ctx, "silver.customers", testSchema(), testSpec(), props)
	if err != nil {
		t.Fatal(err)
	}
	if !created1 || created2 {
		t.Fatalf("created = %v, %v; want true, false", created1, created2)
	}
	if t1.Metadata().TableUUID() != t2.Metadata().TableUUID() || t1.Location() != t2.Location() {
		t.Fatalf("different tables: %s at %s vs %s at %s",
			t1.Metadata().TableUUID(), t1.Location(), t2.Metadata().TableUUID(), t2.Location())
	}
	if got := t2.Properties()["write.parquet.compression-codec"]; got != "zstd" {
		t.Fatalf("table property = %q, want zstd", got)
	}
	if !t2.Schema().Equals(testSchema()) {
		t.Fatalf("schema = %s", t2.Schema())
	}
}

func TestLoadOrCreateConcurrent(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const n = 6
	var (
		wg      sync.WaitGroup
		created atomic.Int32
		uuids   sync.Map
	)
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			tbl, c, err := lh.LoadOrCreateTable(ctx, "gold.daily", testSchema(), testSpec(), nil)
			if err != nil {
				errs <- err

				return
			}
			if c {
				created.Add(1)
			}
			uuids.Store(tbl.Metadata().TableUUID(), true)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent LoadOrCreateTable: %v", err)
	}
	if created.Load() != 1 {
		t.Errorf("created %d times, want 1", created.Load())
	}
	count := 0
	uuids.Range(func(any, any) bool { count++; return true })
	if count != 1 {
		t.Errorf("%d distinct tables, want 1", count)
	}
}

func TestCommitRetry(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "bronze.events"
	createTable(t, lh, ident)

	h1, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	rows1 := genRows(1, 10)
	if _, err := h1.Append(ctx, toReader(t, rows1), nil); err != nil {
		t.Fatalf("append via h1: %v", err)
	}

	// A direct commit with the stale handle is rejected, as a conflict.
	_, err = stale.Append(ctx, toReader(t, genRows(100, 1)), nil)
	if err == nil {
		t.Fatal("commit via stale handle succeeded")
	}
	t.Logf("stale commit error: %v", err)
	if !catalog.IsConflict(err) {
		t.Fatalf("IsConflict(%v) = false", err)
	}
	// Same once the branch exists: "has changed" rather than "created".
	stale2, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	rows1b := genRows(1000, 3)
	if _, err := cur.Append(ctx, toReader(t, rows1b), nil); err != nil {
		t.Fatal(err)
	}
	_, err = stale2.Append(ctx, toReader(t, genRows(2000, 1)), nil)
	t.Logf("stale commit error: %v", err)
	if !catalog.IsConflict(err) || !strings.Contains(err.Error(), `branch "main" has changed`) {
		t.Fatalf("stale commit error %v: want a conflict saying the branch has changed", err)
	}
	rows1 = append(rows1, rows1b...)

	// Through Commit: the first attempt races (commits via the stale
	// handle); the retry gets a fresh handle and succeeds. Data files are
	// written once, before Commit.
	rows2 := genRows(11, 10)
	files := writeFiles(t, stale, rows2)
	var attempts atomic.Int32
	start := time.Now()
	tbl, err := lh.Commit(ctx, ident, func(ctx context.Context, fresh *table.Table) (*table.Table, error) {
		use := fresh
		if attempts.Add(1) == 1 {
			use = stale
		}

		return addFiles(files, iceberg.Properties{watermarkKey: "7"})(ctx, use)
	})
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	t.Logf("Commit with one retry: %s", time.Since(start))
	if attempts.Load() != 2 {
		t.Fatalf("attempts = %d, want 2", attempts.Load())
	}
	if got := tbl.CurrentSnapshot().Summary.Properties[watermarkKey]; got != "7" {
		t.Fatalf("watermark = %q, want 7", got)
	}
	assertRows(t, scanRows(t, tbl), append(slices.Clone(rows1), rows2...))
}

func TestCommitConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "bronze.clicks"
	tbl := createTable(t, lh, ident)

	const writers, commits, perCommit = 4, 3, 50
	var (
		wg    sync.WaitGroup
		want  []row
		mu    sync.Mutex
		calls atomic.Int32
	)
	errs := make(chan error, writers*commits)
	for w := range writers {
		wg.Go(func() {
			for c := range commits {
				rows := genRows(1+(w*commits+c)*perCommit, perCommit)
				files, err := writeFilesErr(t, tbl, rows)
				if err != nil {
					errs <- err

					return
				}
				add := addFiles(files, nil)
				counted := func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
					calls.Add(1)

					return add(ctx, tbl)
				}
				if _, err := lh.Commit(ctx, ident, counted); err != nil {
					errs <- fmt.Errorf("writer %d commit %d: %w", w, c, err)

					return
				}
				mu.Lock()
				want = append(want, rows...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d commits took %d attempts", writers*commits, calls.Load())
	final, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	assertRows(t, scanRows(t, final), want)
	if n := len(final.Metadata().Snapshots()); n != writers*commits {
		t.Errorf("snapshots = %d, want %d", n, writers*commits)
	}
}

func TestCommitErrors(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "bronze.errs"
	createTable(t, lh, ident)

	boom := errors.New("boom")
	calls := 0
	_, err := lh.Commit(ctx, ident, func(context.Context, *table.Table) (*table.Table, error) {
		calls++

		return nil, boom
	})
	if !errors.Is(err, boom) || calls != 1 || !strings.Contains(err.Error(), ident) {
		t.Fatalf("err = %v after %d calls; want boom wrapped with %s after 1 call", err, calls, ident)
	}
	if catalog.IsConflict(err) {
		t.Fatalf("IsConflict(%v) = true", err)
	}

	// (nil, nil): nothing to commit, the fresh table is returned.
	tbl, err := lh.Commit(ctx, ident, func(context.Context, *table.Table) (*table.Table, error) { return nil, nil })
	if err != nil || tbl == nil {
		t.Fatalf("no-op commit: %v, %v", tbl, err)
	}

	_, err = lh.Commit(ctx, "bronze.missing", func(context.Context, *table.Table) (*table.Table, error) {
		t.Fatal("fn called for a missing table")

		return nil, nil
	})
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Fatalf("commit to missing table: %v, want ErrNoSuchTable", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	_, err = lh.Commit(cctx, ident, func(context.Context, *table.Table) (*table.Table, error) {
		calls++
		cancel()

		return nil, fmt.Errorf("wrapped: %w", table.ErrConflictingDataFiles)
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("cancelled commit: %v after %d calls", err, calls)
	}
}

func TestLoadTableNotFound(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	if err := lh.EnsureNamespace(ctx, "bronze"); err != nil {
		t.Fatal(err)
	}
	if err := lh.EnsureNamespace(ctx, "bronze"); err != nil {
		t.Fatalf("EnsureNamespace twice: %v", err)
	}
	for _, ident := range []string{"bronze.nope", "nons.nope"} {
		_, err := lh.LoadTable(ctx, ident)
		if !errors.Is(err, catalog.ErrNoSuchTable) {
			t.Errorf("LoadTable(%s) = %v, want ErrNoSuchTable", ident, err)
		}
	}
	for _, ident := range []string{"", "nodot", ".t", "ns.", "a..b"} {
		if _, err := lh.LoadTable(ctx, ident); err == nil || errors.Is(err, catalog.ErrNoSuchTable) {
			t.Errorf("LoadTable(%q) = %v, want an identifier error", ident, err)
		}
	}
	if err := lh.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestReopenPersists(t *testing.T) {
	ctx := context.Background()
	// Characters that are special in SQLite file: URIs and in URLs.
	dir := filepath.Join(t.TempDir(), "state dir %41 #1 ?x")
	lh := lakehousetest.OpenDir(t, dir)
	tbl := createTable(t, lh, "gold.revenue")
	tbl, err := tbl.Append(ctx, toReader(t, sampleRows()), iceberg.Properties{watermarkKey: "99"})
	if err != nil {
		t.Fatal(err)
	}
	snapID := tbl.CurrentSnapshot().SnapshotID
	if err := lh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := lh.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	lh2 := lakehousetest.OpenDir(t, dir)
	tbl2, err := lh2.LoadTable(ctx, "gold.revenue")
	if err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if got := tbl2.CurrentSnapshot(); got == nil || got.SnapshotID != snapID || got.Summary.Properties[watermarkKey] != "99" {
		t.Fatalf("after reopen snapshot = %v, want id %d with watermark 99", got, snapID)
	}
	assertRows(t, scanRows(t, tbl2), sampleRows())
	if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err != nil {
		t.Fatalf("catalog file not at the configured path: %v", err)
	}
	data, err := filepath.Glob(filepath.Join(dir, "warehouse", "gold.db", "revenue", "data", "*", "*.parquet"))
	if err != nil || len(data) != 3 {
		t.Fatalf("data files under the configured warehouse: %v, %v (table at %s)", data, err, tbl2.Location())
	}
	_, created, err := lh2.LoadOrCreateTable(ctx, "gold.revenue", testSchema(), testSpec(), nil)
	if err != nil || created {
		t.Fatalf("LoadOrCreateTable after reopen: created=%v err=%v", created, err)
	}
}

func TestOpenUnpartitionedRelativePaths(t *testing.T) {
	ctx := context.Background()
	t.Chdir(t.TempDir())
	lh, err := catalog.Open(ctx, catalog.Config{URI: "state/catalog.db", Warehouse: "state/wh"})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	if lh.Type() != catalog.TypeSQL || lh.Name() != catalog.DefaultName {
		t.Fatalf("type %q name %q", lh.Type(), lh.Name())
	}
	tbl, _, err := lh.LoadOrCreateTable(ctx, "a.b.t", testSchema(), iceberg.PartitionSpec{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !tbl.Spec().IsUnpartitioned() {
		t.Fatalf("spec = %s, want unpartitioned", tbl.Spec())
	}
	if !strings.HasPrefix(tbl.Location(), "file:///") || !strings.Contains(tbl.Location(), "/state/wh/") {
		t.Fatalf("location %s, want an absolute file:// URL under state/wh", tbl.Location())
	}
	if _, err := tbl.Append(ctx, toReader(t, sampleRows()), nil); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "c.db")
	for _, tc := range []struct {
		name string
		cfg  catalog.Config
		want string
	}{
		{"unknown type", catalog.Config{Type: "hive", URI: db}, `unknown type "hive"`},
		{"sql without uri", catalog.Config{Type: "sql"}, "uri"},
		{"sql file: uri", catalog.Config{URI: "file:" + db}, "plain file path"},
		{"rest without uri", catalog.Config{Type: "rest"}, "uri"},
		{"rest bad uri", catalog.Config{Type: "rest", URI: "localhost:8181"}, "http(s) URL"},
		{"bad warehouse scheme", catalog.Config{URI: db, Warehouse: "gs://b/p"}, "unsupported scheme"},
		{"relative file url", catalog.Config{URI: db, Warehouse: "file://rel/path"}, "absolute"},
		{"s3 without bucket", catalog.Config{URI: db, Warehouse: "s3:///p"}, "bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh, err := catalog.Open(ctx, tc.cfg)
			if err == nil {
				lh.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestOpenRESTRedactsSecrets points the REST catalog at a server that echoes
// the request (including the OAuth client secret) in its error; the returned
// error must not contain the secrets.
func TestOpenRESTRedactsSecrets(t *testing.T) {
	const clientSecret, s3Secret, uriPassword = "hunter2-client-secret", "s3-super-secret-key", "uri-pass-word"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		msg := fmt.Sprintf("bad request %s form=%v auth=%q", r.URL, r.Form, r.Header.Get("Authorization"))
		if strings.HasSuffix(r.URL.Path, "/oauth/tokens") {
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":%q}`, msg)

			return
		}
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"BadRequestException","code":400}}`, msg)
	}))
	defer srv.Close()

	uri := strings.Replace(srv.URL, "http://", "http://user:"+uriPassword+"@", 1)
	for name, props := range map[string]map[string]string{
		"token":      {"token": "tok-" + clientSecret},
		"credential": {"credential": "client-id:" + clientSecret, "scope": "PRINCIPAL_ROLE:ALL"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := catalog.Open(context.Background(), catalog.Config{
				Type:       "rest",
				URI:        uri,
				Warehouse:  "wh",
				S3:         catalog.S3Config{Endpoint: "http://minio:9000", AccessKeyID: "AKIA", SecretAccessKey: s3Secret, PathStyle: true},
				Properties: props,
			})
			if err == nil {
				t.Fatal("Open succeeded against an error server")
			}
			t.Logf("error: %v", err)
			basic := base64.StdEncoding.EncodeToString([]byte("user:" + uriPassword))
			for _, s := range []string{clientSecret, s3Secret, uriPassword, basic} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error leaks %q: %v", s, err)
				}
			}
		})
	}
}

func BenchmarkAppend10k(b *testing.B) {
	ctx := context.Background()
	lh := lakehousetest.Open(b)
	createTable(b, lh, "bench.append")
	rec := toRecord(b, genRows(1, 10_000))
	defer rec.Release()
	b.ResetTimer()
	for range b.N {
		_, err := lh.Commit(ctx, "bench.append", func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
			rdr, err := array.NewRecordReader(arrowSchema, []arrow.RecordBatch{rec})
			if err != nil {
				return nil, err
			}
			defer rdr.Release()
			tx := tbl.NewTransaction()
			if err := tx.Append(ctx, rdr, iceberg.Properties{watermarkKey: "1"}); err != nil {
				return nil, err
			}

			return tx.Commit(ctx)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(10_000*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkCommit10k measures only the metadata commit of 10k rows whose data
// files were written beforehand (the part Commit repeats on a conflict).
func BenchmarkCommit10k(b *testing.B) {
	ctx := context.Background()
	lh := lakehousetest.Open(b)
	tbl := createTable(b, lh, "bench.commit")
	for range b.N {
		b.StopTimer()
		files := writeFiles(b, tbl, genRows(1, 10_000))
		b.StartTimer()
		if _, err := lh.Commit(ctx, "bench.commit", addFiles(files, nil)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScan10k(b *testing.B) {
	ctx := context.Background()
	lh := lakehousetest.Open(b)
	tbl := createTable(b, lh, "bench.scan")
	tbl, err := tbl.Append(ctx, toReader(b, genRows(1, 10_000)), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		at, err := tbl.Scan().ToArrowTable(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if at.NumRows() != 10_000 {
			b.Fatalf("rows = %d", at.NumRows())
		}
		at.Release()
	}
}

// TestOrphanedWarehouseRefused: a catalog.db that is lost, emptied (a full disk) or
// replaced beside a warehouse holding tables is refused with the reason, instead of
// creating fresh tables over the old ones; the original catalog opens again.
func TestOrphanedWarehouseRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "catalog.db")
	open := func() (*catalog.Lakehouse, error) { return catalog.Open(ctx, catalog.Config{URI: db}) }
	lh, err := open()
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, lh, "gold.revenue")
	if err := lh.Close(); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for name, damage := range map[string]func() error{
		"missing": func() error { return os.Remove(db) },
		"empty":   func() error { return os.Truncate(db, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			for _, f := range []string{db, db + "-wal", db + "-shm"} {
				_ = os.Remove(f)
			}
			if err := os.WriteFile(db, saved, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := damage(); err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(db + "-wal")
			_ = os.Remove(db + "-shm")
			lh, err := open()
			if !errors.Is(err, catalog.ErrOrphanedWarehouse) {
				if lh != nil {
					lh.Close()
				}
				t.Fatalf("open over an orphaned warehouse: %v, want ErrOrphanedWarehouse", err)
			}
			if !strings.Contains(err.Error(), "gold.db") {
				t.Errorf("error does not name the metadata found: %v", err)
			}
		})
	}
	if err := os.WriteFile(db, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	lh, err = open()
	if err != nil {
		t.Fatalf("the restored catalog: %v", err)
	}
	defer lh.Close()
	if _, err := lh.LoadTable(ctx, "gold.revenue"); err != nil {
		t.Fatal(err)
	}
}

// TestCommitFence: a fenced context checks the fence before every attempt; a failing
// fence (a lost lease) stops the commit before fn runs, and a conflict retry checks it
// again.
func TestCommitFence(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "bronze.fenced"
	createTable(t, lh, ident)

	lost := errors.New("lease lost")
	_, err := lh.Commit(catalog.WithFence(ctx, func(context.Context) error { return lost }), ident,
		func(context.Context, *table.Table) (*table.Table, error) {
			t.Fatal("fn called past a failing fence")
			return nil, nil
		})
	if !errors.Is(err, lost) || !strings.Contains(err.Error(), ident) {
		t.Fatalf("fenced commit: %v, want the fence's error with %s", err, ident)
	}

	checks, calls := 0, 0
	fence := func(context.Context) error {
		checks++
		if checks > 1 {
			return lost // lost while the first attempt conflicted
		}
		return nil
	}
	_, err = lh.Commit(catalog.WithFence(ctx, fence), ident, func(context.Context, *table.Table) (*table.Table, error) {
		calls++
		return nil, table.ErrCommitFailed
	})
	if !errors.Is(err, lost) || checks != 2 || calls != 1 {
		t.Fatalf("retry after conflict: %v after %d checks and %d calls; want the fence's error after 2 and 1", err, checks, calls)
	}
}
