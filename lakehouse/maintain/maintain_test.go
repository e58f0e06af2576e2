package maintain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/silver"
)

// A CDC entity (upsert with deletes), an append entity with a keys table, a mart over
// each; tiny thresholds so that every maintenance step fires within a few rounds.

func ty(s string) silver.Type { t, _ := silver.ParseType(s); return t }

func col(name, typ string, req bool) silver.ColumnSpec {
	return silver.ColumnSpec{Name: name, Path: "$." + name, Type: ty(typ), Required: req}
}

var (
	orders = silver.EntitySpec{
		Name: "orders", Table: "silver.orders", QuarantineTable: "silver.orders_quarantine",
		Mode: silver.ModeUpsert, Key: []string{"order_id"}, UpdatedAt: "updated_at", Op: "op", Buckets: 4,
		Columns: []silver.ColumnSpec{col("order_id", "string", true), col("user_id", "string", true),
			col("amount", "int64", false), col("day", "date", true), col("updated_at", "timestamp", true), col("op", "string", false)},
		WarnQuarantinePct: 100, WarnDuplicatePct: 100, FailQuarantinePct: 100,
	}
	events = silver.EntitySpec{
		Name: "events", Table: "silver.events", QuarantineTable: "silver.events_quarantine", KeysTable: "silver.events_keys",
		Mode: silver.ModeAppend, Key: []string{"event_id"}, Buckets: 2,
		Columns:           []silver.ColumnSpec{col("event_id", "string", true), col("user_id", "string", true), col("day", "date", true)},
		WarnQuarantinePct: 100, WarnDuplicatePct: 100, FailQuarantinePct: 100,
	}
)

func mart(name string, e silver.EntitySpec, measures ...gold.MeasureSpec) gold.MartSpec {
	cols := map[string]silver.Type{}
	for _, c := range e.Columns {
		cols[c.Name] = c.Type
	}
	for i := range measures {
		measures[i].InputType = cols[measures[i].Column]
	}
	return gold.MartSpec{Name: name, Table: "gold." + name, SourceTable: e.Table, SourceKey: e.Key, SourceColumns: cols,
		GrainColumn: "day", GrainUnit: "day", GrainAs: "d", Grouping: "none", Measures: measures}
}

var (
	ordersDaily = mart("orders_daily", orders, gold.MeasureSpec{Name: "n", Agg: "count"},
		gold.MeasureSpec{Name: "total", Agg: "sum", Column: "amount"}, gold.MeasureSpec{Name: "users", Agg: "count_distinct", Column: "user_id"})
	eventsDaily = mart("events_daily", events, gold.MeasureSpec{Name: "n", Agg: "count"},
		gold.MeasureSpec{Name: "users", Agg: "count_distinct", Column: "user_id"})
	entities = []Entity{
		{Name: "orders", Bronze: "bronze.orders", Silver: orders.Table, Quarantine: orders.QuarantineTable},
		{Name: "events", Bronze: "bronze.events", Silver: events.Table, Quarantine: events.QuarantineTable, Keys: events.KeysTable},
	}
	marts = []Mart{{Name: "orders_daily", Gold: ordersDaily.Table, Source: orders.Table}, {Name: "events_daily", Gold: eventsDaily.Table, Source: events.Table}}
	tiny  = Policy{RetainAge: 0, RetainMin: 2, MaxFiles: 3, MaxDeleteFiles: 3, MaxManifests: 3, MetadataVersions: 3}
)

// round is the landing lines of round i: orders created, updated, deleted and re-sent
// (a duplicate and a bad line), events with a redelivery of an earlier round's event.
func round(i int) (ordersLines, eventsLines []string) {
	ts := func(k int) string { return time.Date(2026, 11, 1, 0, 0, i*10+k, 0, time.UTC).Format(time.RFC3339) }
	day := func(k int) string { return fmt.Sprintf("2026-11-%02d", 1+(i+k)%9) }
	for k := range 6 {
		id := fmt.Sprintf("o-%03d", i*3+k%3)
		op := "c"
		if k >= 3 {
			op = "u"
		}
		ordersLines = append(ordersLines, fmt.Sprintf(`{"order_id":%q,"user_id":"u-%d","amount":%d,"day":%q,"updated_at":%q,"op":%q}`,
			id, (i+k)%5, 10*i+k, day(k), ts(k), op))
	}
	if i >= 2 { // delete an order of two rounds ago, and re-send one of its events late
		id := fmt.Sprintf("o-%03d", (i-2)*3)
		ordersLines = append(ordersLines, fmt.Sprintf(`{"order_id":%q,"user_id":"u-0","amount":0,"day":"2026-11-01","updated_at":%q,"op":"d"}`, id, ts(7)),
			fmt.Sprintf(`{"order_id":%q,"user_id":"u-9","amount":999,"day":"2026-11-02","updated_at":%q,"op":"u"}`, id, ts(-5)))
	}
	ordersLines = append(ordersLines, ordersLines[0], `{"order_id":`)
	for k := range 4 {
		eventsLines = append(eventsLines, fmt.Sprintf(`{"event_id":"e-%03d-%d","user_id":"u-%d","day":%q}`, i, k, (i*k)%4, day(k)))
	}
	if i >= 1 { // at-least-once: the previous round's first event again, as it was
		eventsLines = append(eventsLines, fmt.Sprintf(`{"event_id":"e-%03d-0","user_id":"u-0","day":"2026-11-%02d"}`, i-1, 1+(i-1)%9))
	}
	return ordersLines, eventsLines
}

// lake is one lakehouse with its landing directories.
type lake struct {
	lh  *catalog.Lakehouse
	dir string
}

func newLake(t *testing.T) lake {
	dir := t.TempDir()
	return lake{lh: lakehousetest.OpenDir(t, dir), dir: dir}
}

// land writes round i's files into the landing directories, dated a minute back.
func (l lake) land(t *testing.T, i int) {
	t.Helper()
	o, e := round(i)
	for name, lines := range map[string][]string{"orders": o, "events": e} {
		d := filepath.Join(l.dir, "landing", name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, fmt.Sprintf("r%03d.jsonl", i))
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Minute)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// run is one cron run of the chain; marts lists the marts computed (nil: all). It
// fails the test if a Gold run of an existing mart had to recompute everything.
func (l lake) run(t *testing.T, martSpecs ...gold.MartSpec) {
	t.Helper()
	ctx := context.Background()
	for _, e := range []silver.EntitySpec{orders, events} {
		src := bronze.FileSource{Name: "landing", System: "test_file", Dir: filepath.Join(l.dir, "landing", e.Name)}
		if _, err := bronze.IngestFiles(ctx, l.lh, "bronze."+e.Name, []bronze.FileSource{src}, bronze.Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := silver.Run(ctx, l.lh, e, "bronze."+e.Name, silver.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range martSpecs {
		_, err := l.lh.LoadTable(ctx, m.Table)
		existed := err == nil
		res, err := gold.Run(ctx, l.lh, m, gold.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if existed && res.Full {
			t.Fatalf("gold %s recomputed every partition: the Silver snapshot it started from was expired", m.Name)
		}
	}
}

// rows renders a table's rows without the columns a run stamps (ids, times).
func rows(t *testing.T, lh *catalog.Lakehouse, ident string, snap int64) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	var opts []table.ScanOption
	if snap != 0 {
		opts = append(opts, table.WithSnapshotID(snap))
	}
	_, recs, err := tbl.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	skip := []string{silver.ColRunID, silver.ColUpdatedTS, silver.ColEventID, silver.QColRunID, silver.QColTS, silver.QColIngest,
		bronze.ColEventID, bronze.ColIngestTS, bronze.ColBatchID, bronze.ColSourceTS, "_calculated_at", "_run_id"}
	var out []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c, f := range rec.Schema().Fields() {
				v := rec.Column(c).ValueStr(i)
				if f.Name == bronze.ColFile || f.Name == silver.QColFile {
					v = filepath.Base(v) // the lakes' landing directories differ
				}
				if !slices.Contains(skip, f.Name) {
					fmt.Fprintf(&b, "%s=%s|", f.Name, v)
				}
			}
			out = append(out, b.String())
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

var allTables = []string{"bronze.orders", "silver.orders", "silver.orders_quarantine", "gold.orders_daily",
	"bronze.events", "silver.events", "silver.events_quarantine", "silver.events_keys", "gold.events_daily"}

func maintain(t *testing.T, lh *catalog.Lakehouse, opt Options) []Report {
	t.Helper()
	if opt.Policy == nil {
		opt.Policy = func(string) Policy { return tiny }
	}
	reports, err := Run(context.Background(), lh, entities, marts, opt)
	if err != nil {
		t.Fatal(err)
	}
	return reports
}

// TestLongLifeEqualsOneShot: 24 rounds of one small file per entity, each followed by a
// run and maintenance with tiny thresholds, leave every table with the rows of a lake
// that got the same files in one run (Bronze, Silver, quarantine, keys and Gold), every
// step having fired, each table's snapshots, live files and manifests bounded, no file
// ingested twice though the summaries recording them were expired, and no Gold run
// recomputing everything. The events mart skips rounds 15-22 (its Silver watermark
// falls behind): the snapshot it starts from survives the expiry of everything around it.
func TestLongLifeEqualsOneShot(t *testing.T) {
	const rounds = 24
	soaked, oneshot := newLake(t), newLake(t)
	fired := map[string]int{}
	for i := range rounds {
		soaked.land(t, i)
		oneshot.land(t, i)
		if i >= 15 && i < 23 {
			soaked.run(t, ordersDaily)
		} else {
			soaked.run(t, ordersDaily, eventsDaily)
		}
		for _, r := range maintain(t, soaked.lh, Options{}) {
			if r.PropertiesSet {
				fired["properties"]++
			}
			if r.Compacted.SnapshotID != 0 {
				fired["compact "+r.Layer]++
			}
			if r.ManifestsAfter < r.ManifestsBefore {
				fired["manifests"]++
			}
			if r.Expired.Snapshots > 0 {
				fired["expire "+r.Layer]++
			}
		}
	}
	oneshot.run(t, ordersDaily, eventsDaily)
	for _, step := range []string{"properties", "compact bronze", "compact silver", "compact quarantine", "compact keys",
		"manifests", "expire bronze", "expire silver", "expire gold"} {
		if fired[step] == 0 {
			t.Errorf("step %q never fired (%v)", step, fired)
		}
	}
	for _, ident := range allTables {
		sameRows(t, ident, rows(t, soaked.lh, ident, 0), rows(t, oneshot.lh, ident, 0))
	}
	ctx := context.Background()
	for _, ident := range allTables {
		tbl, err := soaked.lh.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		st, err := catalog.Stats(ctx, tbl)
		if err != nil {
			t.Fatal(err)
		}
		// Bounds: the retention (2) plus the commits of one run and one maintenance.
		if st.Snapshots > 8 || st.DataManifests > tiny.MaxManifests+2 || st.DeleteFiles > 4*int64(tiny.MaxDeleteFiles) {
			t.Errorf("%s after %d rounds: %+v", ident, rounds, st)
		}
	}
	// Exactly once although the summaries that recorded the first files are gone: a
	// run over the same landing ingests nothing.
	for _, e := range []string{"orders", "events"} {
		src := bronze.FileSource{Name: "landing", System: "test_file", Dir: filepath.Join(soaked.dir, "landing", e)}
		res, err := bronze.IngestFiles(ctx, soaked.lh, "bronze."+e, []bronze.FileSource{src}, bronze.Options{})
		if err != nil || res.Rows != 0 || res.Skipped != rounds {
			t.Fatalf("ingest %s again: %d rows, %d skipped, err %v; want 0 rows, %d skipped", e, res.Rows, res.Skipped, err, rounds)
		}
	}
}

// TestExpiryKeepsWhatReadersStartFrom: with a retention of one snapshot, an expiry
// keeps Silver's Bronze watermark, a mart's Silver watermark and the commit carrying
// each table's own watermark, with everything after them; a snapshot within the
// retention can still be read (time travel).
func TestExpiryKeepsWhatReadersStartFrom(t *testing.T) {
	l := newLake(t)
	ctx := context.Background()
	for i := range 3 {
		l.land(t, i)
		l.run(t, ordersDaily, eventsDaily)
	}
	gt, _ := l.lh.LoadTable(ctx, ordersDaily.Table)
	goldMark := gold.Watermark(gt)
	// Silver moves on three times while the mart stands still.
	for i := 3; i < 6; i++ {
		l.land(t, i)
		l.run(t)
	}
	before := rows(t, l.lh, "silver.orders", goldMark)
	one := func(string) Policy { p := tiny; p.RetainMin = 1; return p }
	maintain(t, l.lh, Options{Policy: one})
	st, _ := l.lh.LoadTable(ctx, "silver.orders")
	if st.SnapshotByID(goldMark) == nil {
		t.Fatal("the Silver snapshot the mart starts from was expired")
	}
	if got := rows(t, l.lh, "silver.orders", goldMark); !slices.Equal(got, before) {
		t.Fatal("time travel to the mart's watermark reads other rows after maintenance")
	}
	if n := len(st.Metadata().Snapshots()); n < 4 {
		t.Fatalf("silver.orders keeps %d snapshots; the watermark and the 3 commits after it must stay", n)
	}
	bt, _ := l.lh.LoadTable(ctx, "bronze.orders")
	if bt.SnapshotByID(silver.Watermark(st)) == nil {
		t.Fatal("the Bronze snapshot Silver starts from was expired")
	}
	l.run(t, ordersDaily, eventsDaily) // incremental: run fails the test on a full recompute
	maintain(t, l.lh, Options{Policy: one})
	st, _ = l.lh.LoadTable(ctx, "silver.orders")
	if n := len(st.Metadata().Snapshots()); n > 2 {
		t.Fatalf("silver.orders keeps %d snapshots once the mart caught up; want at most 2", n)
	}
}

// TestFaultAfterEveryStep: a maintenance stopped after any step of any table (the state
// a SIGKILL between two commits leaves) is finished by the next one, and the chain then
// goes on with the rows of a lake that was never interrupted.
func TestFaultAfterEveryStep(t *testing.T) {
	steps := []string{"compact", "manifests", "expire"} // "properties" commits no snapshot
	for _, ident := range []string{"bronze.orders", "silver.orders", "gold.orders_daily"} {
		for _, step := range steps {
			t.Run(ident+"/"+step, func(t *testing.T) {
				l, clean := newLake(t), newLake(t)
				for i := range 5 {
					l.land(t, i)
					clean.land(t, i)
					l.run(t, ordersDaily, eventsDaily)
					clean.run(t, ordersDaily, eventsDaily)
					maintain(t, clean.lh, Options{})
					if i < 4 {
						maintain(t, l.lh, Options{})
						continue
					}
					boom := errors.New("killed")
					_, err := Run(context.Background(), l.lh, entities, marts, Options{
						Policy: func(string) Policy { return tiny },
						fault: func(tbl, s string) error {
							if tbl == ident && s == step {
								return boom
							}
							return nil
						},
					})
					if !errors.Is(err, boom) {
						t.Fatalf("the fault did not fire: %v", err)
					}
					maintain(t, l.lh, Options{})
				}
				l.land(t, 5)
				clean.land(t, 5)
				l.run(t, ordersDaily, eventsDaily)
				clean.run(t, ordersDaily, eventsDaily)
				for _, tbl := range allTables {
					sameRows(t, tbl, rows(t, l.lh, tbl, 0), rows(t, clean.lh, tbl, 0))
				}
			})
		}
	}
}

// sameRows fails the test with the first rows that differ.
func sameRows(t *testing.T, ident string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("%s: %d rows, want %d; row %d is\n  %s\nwant\n  %s", ident, len(got), len(want), i, g, w)
			return
		}
	}
}
