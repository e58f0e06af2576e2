package silver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/zeebo/xxh3"

	"goldbridge/demo"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// landDemo generates demo files and returns them sorted, in a directory of their own.
func landDemo(t *testing.T, events int64, files int, seed uint64) []string {
	t.Helper()
	dir := t.TempDir()
	if _, err := demo.Generate(context.Background(), demo.Options{OutDir: dir, Events: events, Seed: seed, Files: files,
		End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	out, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	sort.Strings(out)
	return out
}

func moveTo(t *testing.T, f, dir string) {
	t.Helper()
	if err := os.Rename(f, filepath.Join(dir, filepath.Base(f))); err != nil {
		t.Fatal(err)
	}
}

// orderEventsSpec models the demo stream as immutable facts: one row per order event,
// keyed by (order_id, updated_at, op).
func orderEventsSpec() EntitySpec {
	s := ordersSpec()
	s.Name, s.Table, s.QuarantineTable = "order_events", "silver.order_events", "silver.order_events_quarantine"
	s.Mode, s.Key, s.EventTime, s.UpdatedAt, s.Op = ModeAppend, []string{"order_id", "updated_at", "op"}, "updated_at", "", ""
	return s
}

// Columns that differ between runs by design: when and by which run a row was written.
var runColumns = []string{ColRunID, ColUpdatedTS, QColTS}

func TestReplayEqualsIncremental(t *testing.T) {
	withKeys := orderEventsSpec()
	withKeys.KeysTable = "silver.order_events_keys"
	withLookback := orderEventsSpec()
	withLookback.Lookback = 30 * 24 * time.Hour
	for _, tc := range []struct {
		name   string
		spec   EntitySpec
		legacy bool // the Silver table predates the key hash columns
	}{
		{"upsert", ordersSpec(), false},
		{"upsert without key hash", ordersSpec(), true},
		{"append unbounded", orderEventsSpec(), false},
		{"append keys table", withKeys, false},
		{"append lookback", withLookback, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lh := lakehousetest.Open(t)
			landing := t.TempDir()
			spec := tc.spec
			if tc.legacy {
				createWithoutKeyHash(t, lh, spec)
			}
			var read int64
			for _, f := range landDemo(t, 12000, 4, 23) {
				moveTo(t, f, landing)
				ingest(t, lh, landing)
				res, err := Run(ctx, lh, spec, "bronze.orders", Options{})
				if err != nil {
					t.Fatal(err)
				}
				read += res.Read
			}
			tables := []string{spec.Table, spec.QuarantineTable}
			if spec.KeysTable != "" {
				tables = append(tables, spec.KeysTable)
			}
			before := map[string][]string{}
			for _, tb := range tables {
				before[tb] = tableRows(t, lh, tb, runColumns...)
			}
			res, err := Replay(ctx, lh, spec, "bronze.orders", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Read != read || !res.Quality.Passed() {
				t.Fatalf("replay read %d rows (incremental %d), quality %+v", res.Read, read, res.Quality)
			}
			for _, tb := range tables {
				after := tableRows(t, lh, tb, runColumns...)
				if !slices.Equal(before[tb], after) {
					t.Errorf("%s: replay has %d rows, incremental %d; first differences:\n%s", tb, len(after), len(before[tb]), firstDiff(before[tb], after))
				}
			}
			if len(before[spec.Table]) == 0 {
				t.Fatal("empty Silver: the test proves nothing")
			}
			if spec.Mode == ModeUpsert {
				checkKeyHash(t, lh, spec, !tc.legacy)
			}
			bronzeTbl, _ := lh.LoadTable(ctx, "bronze.orders")
			for _, tb := range tables {
				tbl, _ := lh.LoadTable(ctx, tb)
				p := tbl.CurrentSnapshot().Summary.Properties
				if p[PropReplay] != "true" || Watermark(tbl) != bronzeTbl.CurrentSnapshot().SnapshotID {
					t.Errorf("%s: replay summary %v", tb, p)
				}
			}
			// The next incremental run has nothing to do.
			res, err = Run(ctx, lh, spec, "bronze.orders", Options{})
			if err != nil || res.SnapshotID != 0 || res.Read != 0 {
				t.Fatalf("run after replay: %+v %v", res, err)
			}
		})
	}
}

// createWithoutKeyHash creates spec's Silver table as goldbridge did before the key
// hash columns.
func createWithoutKeyHash(t *testing.T, lh *catalog.Lakehouse, spec EntitySpec) {
	t.Helper()
	e, err := newEngine(spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sch, err := icebergSchema(withoutKeyHash(e.tcols), spec.Key)
	if err != nil {
		t.Fatal(err)
	}
	pspec, err := partitionSpec(sch, spec)
	if err != nil {
		t.Fatal(err)
	}
	order, err := sortOrder(sch, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lh.LoadOrCreateTable(context.Background(), spec.Table, sch, pspec, silverProperties(spec), icecat.WithSortOrder(order)); err != nil {
		t.Fatal(err)
	}
}

// checkKeyHash checks that the table has the key hash columns if want, holding the
// XXH3-128 of each row's key, and otherwise that it was not given them.
func checkKeyHash(t *testing.T, lh *catalog.Lakehouse, spec EntitySpec, want bool) {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), spec.Table)
	if err != nil {
		t.Fatal(err)
	}
	if got := hasKeyHash(tbl.Schema()); got != want {
		t.Fatalf("key hash columns: %v, want %v", got, want)
	}
	if !want {
		return
	}
	rows := tableRows(t, lh, spec.Table)
	keys, his, los := colValues(rows, spec.Key[0]), colValues(rows, ColKeyHashHi), colValues(rows, ColKeyHashLo)
	for i, k := range keys {
		h := xxh3.HashString128(k)
		if his[i] != strconv.FormatInt(int64(h.Hi), 10) || los[i] != strconv.FormatInt(int64(h.Lo), 10) {
			t.Fatalf("key %s: hash columns %s %s, want the XXH3-128 %d %d", k, his[i], los[i], int64(h.Hi), int64(h.Lo))
		}
	}
}

func firstDiff(a, b []string) string {
	var out []string
	for _, r := range a {
		if _, ok := slices.BinarySearch(b, r); !ok && len(out) < 3 {
			out = append(out, "  only incremental: "+r)
		}
	}
	for _, r := range b {
		if _, ok := slices.BinarySearch(a, r); !ok && len(out) < 6 {
			out = append(out, "  only replay:      "+r)
		}
	}
	return strings.Join(out, "\n")
}

// TestBronzeExpiredNeedsReplay expires the Bronze snapshot Silver last processed: Run
// refuses with ErrBronzeExpired pointing to replay, and Replay rebuilds Silver.
func TestBronzeExpiredNeedsReplay(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	files := landDemo(t, 6000, 3, 7)
	moveTo(t, files[0], landing)
	ingest(t, lh, landing)
	if _, err := Run(ctx, lh, ordersSpec(), "bronze.orders", Options{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range files[1:] {
		moveTo(t, f, landing)
		ingest(t, lh, landing)
	}
	_, err := lh.Commit(ctx, "bronze.orders", func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.ExpireSnapshots(table.WithOlderThan(0), table.WithRetainLast(1)); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	bronzeTbl, _ := lh.LoadTable(ctx, "bronze.orders")
	if n := len(bronzeTbl.Metadata().Snapshots()); n != 1 {
		t.Fatalf("bronze keeps %d snapshots, want 1", n)
	}
	_, err = Run(ctx, lh, ordersSpec(), "bronze.orders", Options{})
	if !errors.Is(err, ErrBronzeExpired) || !strings.Contains(err.Error(), "goldbridge replay orders") {
		t.Fatalf("err = %v, want ErrBronzeExpired pointing to replay", err)
	}
	res, err := Replay(ctx, lh, ordersSpec(), "bronze.orders", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 6000 {
		t.Fatalf("replay read %d rows, want 6000", res.Read)
	}
	want, _ := oracle(t, landing)
	got := silverRows(t, lh)
	if len(got) != len(want) {
		t.Fatalf("silver %d keys, oracle %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %s: silver %s, oracle %s", k, got[k], w)
		}
	}
	if _, err := Run(ctx, lh, ordersSpec(), "bronze.orders", Options{}); err != nil {
		t.Fatalf("run after replay: %v", err)
	}
}
