package silver

import (
	"context"
	"errors"
	"fmt"
	"github.com/apache/iceberg-go/table"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// writeLanding writes a JSON Lines landing file.
func writeLanding(t *testing.T, dir, name string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ingestInto(t *testing.T, lh *catalog.Lakehouse, bronzeIdent, dir string) {
	t.Helper()
	src := bronze.FileSource{Name: "landing", System: "test_file", Dir: dir}
	if _, err := bronze.IngestFiles(context.Background(), lh, bronzeIdent, []bronze.FileSource{src}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
}

// tableRows renders every row of a table as "col=value|..." (columns in table order,
// minus skip), sorted.
func tableRows(t *testing.T, lh *catalog.Lakehouse, ident string, skip ...string) []string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return scanRows(t, tbl.Scan(), skip...)
}

// tableRowsAt is tableRows of a table at one of its snapshots.
func tableRowsAt(t *testing.T, tbl *table.Table, snapshot int64, skip ...string) []string {
	t.Helper()
	return scanRows(t, tbl.Scan(table.WithSnapshotID(snapshot)), skip...)
}

func scanRows(t *testing.T, scan *table.Scan, skip ...string) []string {
	t.Helper()
	_, recs, err := scan.ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for r := range int(rec.NumRows()) {
			var parts []string
			for c, f := range rec.Schema().Fields() {
				if slices.Contains(skip, f.Name) {
					continue
				}
				v := "NULL"
				if a := rec.Column(c); !a.IsNull(r) {
					v = a.ValueStr(r)
					if d, ok := a.(*array.Decimal128); ok {
						v = d.Value(r).ToString(d.DataType().(*arrow.Decimal128Type).Scale)
					}
				}
				parts = append(parts, f.Name+"="+v)
			}
			out = append(out, strings.Join(parts, "|"))
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

// column projects rendered rows onto one column's values.
func colValues(rows []string, name string) []string {
	var out []string
	for _, r := range rows {
		for _, p := range strings.Split(r, "|") {
			if v, ok := strings.CutPrefix(p, name+"="); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// eventsSpec is an append entity of immutable events keyed by event_id.
func eventsSpec() EntitySpec {
	t := func(s string) Type { ty, _ := ParseType(s); return ty }
	col := func(name, typ string, req bool) ColumnSpec {
		return ColumnSpec{Name: name, Path: "$." + name, Type: t(typ), Required: req}
	}
	return EntitySpec{
		Name: "events", Table: "silver.events", QuarantineTable: "silver.events_quarantine",
		Mode: ModeAppend, Key: []string{"event_id"}, EventTime: "event_ts", Buckets: 4,
		Columns: []ColumnSpec{
			col("event_id", "string", false), col("user_id", "string", true),
			col("amount", "decimal(18,2)", false), col("event_ts", "timestamp", true),
		},
		Rules:             []RuleSpec{{ID: "F1", Kind: "filter", Expr: "amount >= 0", Reason: "negative_amount"}},
		WarnQuarantinePct: 50, WarnDuplicatePct: 50,
	}
}

func event(id, ts string, amount string) string {
	if id == "" {
		return fmt.Sprintf(`{"event_id":null,"user_id":"u","amount":%s,"event_ts":%q}`, amount, ts)
	}
	return fmt.Sprintf(`{"event_id":%q,"user_id":"u","amount":%s,"event_ts":%q}`, id, amount, ts)
}

// appendRow is how an events row reads back (internal columns skipped).
func appendRow(id, amount, ts string) string {
	return fmt.Sprintf("event_id=%s|user_id=u|amount=%s|event_ts=%s", id, amount, ts)
}

var appendSkip = []string{ColEventID, ColRunID, ColUpdatedTS}

func TestAppendMode(t *testing.T) { testAppendMode(t, Options{}) }

// TestAppendModeInPasses is TestAppendMode with every run built in passes over key
// groups (a PassRows of 1): the same rows, quarantine, keys table and counts.
func TestAppendModeInPasses(t *testing.T) { testAppendMode(t, Options{PassRows: 1}) }

func testAppendMode(t *testing.T, opt Options) {
	// Two payloads of e5 in one Bronze batch: the lower payload hash arrives "first".
	e5a, e5b := event("e5", "2026-01-11T09:00:00Z", "5.00"), event("e5", "2026-01-11T09:00:00Z", "6.00")
	e5amount := "5.00"
	if xxhash.Sum64String(e5b) < xxhash.Sum64String(e5a) {
		e5amount = "6.00"
	}
	base := []string{
		appendRow("e1", "1.00", "2026-01-10T10:00:00Z"), appendRow("e2", "2.00", "2026-01-10T11:00:00Z"),
		appendRow("e4", "4.00", "2026-01-10T12:00:00Z"),
	}
	for _, tc := range []struct {
		name      string
		lookback  time.Duration
		keysTable string
		// run 2 re-delivers e1 ten days later than its first event time: beyond a one-day
		// lookback, so only the lookback mode appends it again (the documented trade-off).
		wantRun2 Counts
		extra    []string
	}{
		{name: "lookback", lookback: 24 * time.Hour,
			wantRun2: Counts{Read: 4, Current: 2, Inserted: 2, Duplicates: 2},
			extra:    []string{appendRow("e1", "1.00", "2026-01-20T10:00:00Z")}},
		{name: "keys table", keysTable: "silver.events_keys",
			wantRun2: Counts{Read: 4, Current: 1, Inserted: 1, Duplicates: 3}},
		{name: "unbounded", wantRun2: Counts{Read: 4, Current: 1, Inserted: 1, Duplicates: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lh := lakehousetest.Open(t)
			landing := t.TempDir()
			spec := eventsSpec()
			spec.Lookback, spec.KeysTable = tc.lookback, tc.keysTable
			writeLanding(t, landing, "1.jsonl",
				event("e1", "2026-01-10T10:00:00Z", "1"),
				event("e2", "2026-01-10T11:00:00Z", "2"),
				event("e1", "2026-01-10T10:00:00Z", "1"),  // in-increment duplicate
				event("e3", "2026-01-10T11:30:00Z", "-1"), // F1
				event("", "2026-01-10T11:40:00Z", "7"),    // NULL key
				event("e4", "2026-01-10T12:00:00Z", "4"),
			)
			ingestInto(t, lh, "bronze.events", landing)
			res, err := Run(ctx, lh, spec, "bronze.events", opt)
			if err != nil {
				t.Fatal(err)
			}
			if opt.PassRows > 0 && res.Passes < 2 {
				t.Fatalf("run 1 built Silver in %d passes, want several", res.Passes)
			}
			if want := (Counts{Read: 6, Current: 3, Inserted: 3, Duplicates: 1, Quarantined: 2}); res.Counts != want {
				t.Fatalf("run 1 counts %+v, want %+v", res.Counts, want)
			}
			if got := tableRows(t, lh, spec.Table, appendSkip...); !slices.Equal(got, base) {
				t.Fatalf("run 1 rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(base, "\n"))
			}
			q := tableRows(t, lh, spec.QuarantineTable)
			if got := colValues(q, QColReason); !slices.Equal(got, []string{"F1:negative_amount", "missing_event_id"}) {
				t.Fatalf("quarantine reasons %v", got)
			}
			tbl, _ := lh.LoadTable(ctx, spec.Table)
			if ps := tbl.Spec(); ps.NumFields() != 1 || ps.Field(0).Name != "event_ts_day" {
				t.Errorf("append table partitioned by %s, want day(event_ts)", ps)
			}

			// Running again changes nothing.
			res, err = Run(ctx, lh, spec, "bronze.events", opt)
			if err != nil || res.SnapshotID != 0 || res.QuarantineSnapshotID != 0 || res.KeysSnapshotID != 0 {
				t.Fatalf("rerun committed: %+v, %v", res, err)
			}
			if got := tableRows(t, lh, spec.Table, appendSkip...); !slices.Equal(got, base) {
				t.Fatalf("rerun changed rows: %v", got)
			}

			writeLanding(t, landing, "2.jsonl",
				event("e2", "2026-01-10T11:00:00Z", "2"), // re-delivered: already in Silver
				e5a, e5b,                                 // the same event twice, different payloads
				event("e1", "2026-01-20T10:00:00Z", "1"), // re-delivered ten days later
			)
			ingestInto(t, lh, "bronze.events", landing)
			res, err = Run(ctx, lh, spec, "bronze.events", opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Counts != tc.wantRun2 {
				t.Fatalf("run 2 counts %+v, want %+v", res.Counts, tc.wantRun2)
			}
			want := append(slices.Clone(base), appendRow("e5", e5amount, "2026-01-11T09:00:00Z"))
			want = append(want, tc.extra...)
			slices.Sort(want)
			got := tableRows(t, lh, spec.Table, appendSkip...)
			if !slices.Equal(got, want) {
				t.Fatalf("run 2 rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, id := range colValues(tableRows(t, lh, spec.Table), ColEventID) {
				if id == "" || id == "NULL" {
					t.Fatal("row without the Bronze _event_id")
				}
			}
			if tc.keysTable != "" {
				keys := tableRows(t, lh, tc.keysTable)
				if want := []string{"event_id=e1", "event_id=e2", "event_id=e4", "event_id=e5"}; !slices.Equal(keys, want) {
					t.Fatalf("keys table %v, want %v", keys, want)
				}
			}
			// Replay gives the incremental history back, except the duplicate beyond the
			// lookback: replay reads both copies in one increment and keeps the first.
			if _, err := Replay(ctx, lh, spec, "bronze.events", opt); err != nil {
				t.Fatal(err)
			}
			wantReplay := slices.DeleteFunc(slices.Clone(want), func(r string) bool { return slices.Contains(tc.extra, r) })
			if got := tableRows(t, lh, spec.Table, appendSkip...); !slices.Equal(got, wantReplay) {
				t.Fatalf("replay rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantReplay, "\n"))
			}
		})
	}
}

// TestAppendKeysTableCrash stops a run after the Silver commit and before the keys-table
// commit. The next run, which also reads new Bronze rows re-delivering an event of the
// interrupted run, catches the keys table up and does not append that event twice.
func TestAppendKeysTableCrash(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	spec := eventsSpec()
	spec.KeysTable = "silver.events_keys"
	writeLanding(t, landing, "1.jsonl", event("e1", "2026-01-10T10:00:00Z", "1"), event("e2", "2026-01-10T11:00:00Z", "2"))
	ingestInto(t, lh, "bronze.events", landing)
	crash := errors.New("crash")
	_, err := Run(ctx, lh, spec, "bronze.events", Options{afterCommit: func(ident string) error {
		if ident == spec.Table {
			return crash
		}
		return nil
	}})
	if !errors.Is(err, crash) {
		t.Fatalf("err = %v", err)
	}
	keysTbl, _ := lh.LoadTable(ctx, spec.KeysTable)
	silverTbl, _ := lh.LoadTable(ctx, spec.Table)
	if Watermark(keysTbl) != 0 || Watermark(silverTbl) == 0 {
		t.Fatalf("watermarks silver %d keys %d: the crash did not land between the commits", Watermark(silverTbl), Watermark(keysTbl))
	}

	writeLanding(t, landing, "2.jsonl", event("e2", "2026-01-10T11:00:00Z", "2"), event("e3", "2026-01-10T12:00:00Z", "3"))
	ingestInto(t, lh, "bronze.events", landing)
	res, err := Run(ctx, lh, spec, "bronze.events", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Read: 2, Current: 1, Inserted: 1, Duplicates: 1}); res.Counts != want {
		t.Fatalf("counts %+v, want %+v", res.Counts, want)
	}
	if got := colValues(tableRows(t, lh, spec.Table), "event_id"); !slices.Equal(got, []string{"e1", "e2", "e3"}) {
		t.Fatalf("silver keys %v", got)
	}
	if got := tableRows(t, lh, spec.KeysTable); !slices.Equal(got, []string{"event_id=e1", "event_id=e2", "event_id=e3"}) {
		t.Fatalf("keys table %v", got)
	}
	keysTbl, _ = lh.LoadTable(ctx, spec.KeysTable)
	silverTbl, _ = lh.LoadTable(ctx, spec.Table)
	if Watermark(keysTbl) != Watermark(silverTbl) || Watermark(keysTbl) != res.BronzeTo {
		t.Fatalf("watermarks silver %d keys %d bronze %d", Watermark(silverTbl), Watermark(keysTbl), res.BronzeTo)
	}
}
