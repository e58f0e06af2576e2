package forget

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/silver"
)

const subject = "u-forget-me"

var req = bronze.ForgetRequest{Field: "user_id", Value: subject}

// eventsTarget is an append entity with a keys table and a filter rule, no marts.
func eventsTarget() Target {
	ty := func(s string) silver.Type { t, _ := silver.ParseType(s); return t }
	col := func(name, typ string, req bool) silver.ColumnSpec {
		return silver.ColumnSpec{Name: name, Path: "$." + name, Type: ty(typ), Required: req}
	}
	return Target{
		Entity: "events", Bronze: "bronze.events",
		Silver: silver.EntitySpec{
			Name: "events", Table: "silver.events", QuarantineTable: "silver.events_quarantine", KeysTable: "silver.events_keys",
			Mode: silver.ModeAppend, Key: []string{"event_id"}, Buckets: 4,
			Columns: []silver.ColumnSpec{
				col("event_id", "string", true), col("user_id", "string", true),
				col("amount", "decimal(18,2)", false), col("event_ts", "timestamp", true),
			},
			Rules:             []silver.RuleSpec{{ID: "F1", Kind: "filter", Expr: "amount >= 0", Reason: "negative_amount"}},
			WarnQuarantinePct: 100, WarnDuplicatePct: 100,
		},
		Operator: "tester", Host: "test",
	}
}

// events are the landing lines: the subject's events (one quarantined, one duplicated)
// among others'.
func events(withSubject bool) []string {
	var out []string
	for i := range 40 {
		user := fmt.Sprintf("u-%02d", i%7)
		if i%5 == 0 {
			if !withSubject {
				continue
			}
			user = subject
		}
		amount := fmt.Sprintf("%d.25", i)
		if i%10 == 0 || i%7 == 3 {
			amount = "-1" // quarantined
		}
		line := fmt.Sprintf(`{"event_id":"e-%03d","user_id":%q,"amount":%s,"event_ts":"2026-11-%02dT10:00:00Z"}`, i, user, amount, 1+i%20)
		out = append(out, line)
		if i%15 == 0 {
			out = append(out, line) // a duplicate delivery
		}
	}
	return out
}

// build ingests lines into a fresh lakehouse and runs Silver.
func build(t *testing.T, tg Target, lines []string) (*catalog.Lakehouse, string) {
	t.Helper()
	dir := t.TempDir()
	lh := lakehousetest.OpenDir(t, dir)
	landing := filepath.Join(dir, "landing")
	if err := os.MkdirAll(landing, 0o755); err != nil {
		t.Fatal(err)
	}
	ingest(t, lh, tg, landing, "a.jsonl", lines)
	return lh, landing
}

func ingest(t *testing.T, lh *catalog.Lakehouse, tg Target, landing, name string, lines []string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(landing, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src := bronze.FileSource{Name: "landing", System: "test_file", Dir: landing}
	if _, err := bronze.IngestFiles(ctx, lh, tg.Bronze, []bronze.FileSource{src}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := silver.Run(ctx, lh, tg.Silver, tg.Bronze, silver.Options{}); err != nil {
		t.Fatal(err)
	}
}

// rows renders the rows of ident at a snapshot (0: current) without run-specific columns,
// nor where a Bronze record came from (the oracle's landing files lack the lines forgotten,
// so the records after them sit elsewhere).
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
		bronze.ColEventID, bronze.ColIngestTS, bronze.ColBatchID, bronze.ColFile, bronze.ColSourceTS, bronze.ColSourcePos}
	var out []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c, f := range rec.Schema().Fields() {
				if !slices.Contains(skip, f.Name) {
					fmt.Fprintf(&b, "%s=%s|", f.Name, rec.Column(c).ValueStr(i))
				}
			}
			out = append(out, b.String())
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

func entityTables(tg Target) []string {
	return []string{tg.Bronze, tg.Silver.Table, tg.Silver.QuarantineTable, tg.Silver.KeysTable}
}

// checkForgotten: no snapshot of any table returns the subject, and every table equals
// the oracle's (a lakehouse built from the lines without the subject).
func checkForgotten(t *testing.T, lh, oracle *catalog.Lakehouse, tg Target) {
	t.Helper()
	ctx := context.Background()
	for _, ident := range entityTables(tg) {
		tbl, err := lh.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tbl.Metadata().Snapshots() {
			for _, r := range rows(t, lh, ident, s.SnapshotID) {
				if strings.Contains(r, subject) || strings.Contains(r, "e-000") || strings.Contains(r, "e-005") {
					t.Errorf("%s@%d returns the subject: %s", ident, s.SnapshotID, r)
				}
			}
		}
		if got, want := rows(t, lh, ident, 0), rows(t, oracle, ident, 0); !slices.Equal(got, want) {
			t.Errorf("%s: %d rows, the fresh build without the subject has %d:\n got %q\nwant %q", ident, len(got), len(want), got, want)
		}
	}
}

// TestForgetAppendEntity: Bronze, the quarantine (the subject has a quarantined row),
// Silver and the keys table equal a fresh build without the subject, no snapshot
// returns them, the watermarks point at live snapshots (the next run succeeds and
// takes new rows), one audit record is written, and forgetting again (or someone who
// is not there) changes nothing.
func TestForgetAppendEntity(t *testing.T) {
	tg := eventsTarget()
	lh, landing := build(t, tg, events(true))
	oracle, _ := build(t, tg, events(false))
	ctx := context.Background()

	plan, err := Plan(ctx, lh, tg, req)
	if err != nil {
		t.Fatal(err)
	}
	// The subject: events 0, 5, …, 35, three of them delivered twice (0, 15, 30), four
	// quarantined (0, 10, 20, 30, with the copies of 0 and 30).
	if !plan.Found || plan.Rows(LayerBronze) != 11 || plan.Rows(LayerQuarantine) != 6 || plan.Rows(LayerSilver) != 4 {
		t.Fatalf("plan: found %v, bronze %d (want 11), quarantine %d (want 6), silver %d (want 4)",
			plan.Found, plan.Rows(LayerBronze), plan.Rows(LayerQuarantine), plan.Rows(LayerSilver))
	}
	res, err := Run(ctx, lh, tg, req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Found || res.BronzeSnapshot == 0 {
		t.Fatalf("run: %+v", res)
	}
	checkForgotten(t, lh, oracle, tg)

	// The pipeline continues from the moved watermarks.
	more := []string{`{"event_id":"e-900","user_id":"u-01","amount":1.00,"event_ts":"2026-11-30T10:00:00Z"}`}
	ingest(t, lh, tg, landing, "b.jsonl", more)
	ingest(t, oracle, tg, t.TempDir(), "b.jsonl", more)
	if got, want := rows(t, lh, tg.Silver.Table, 0), rows(t, oracle, tg.Silver.Table, 0); !slices.Equal(got, want) {
		t.Errorf("silver after the next run: %d rows, want %d", len(got), len(want))
	}

	log, err := Log(ctx, lh)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].ValueSHA256 != bronze.ValueHash(subject) || log[0].Rows[tg.Bronze] != 11 || log[0].Operator != "tester" {
		t.Fatalf("audit log: %+v", log)
	}
	for _, r := range []bronze.ForgetRequest{req, {Field: "user_id", Value: "u-nobody"}} {
		res, err := Run(ctx, lh, tg, r)
		if err != nil || res.Found {
			t.Errorf("forget %s again: found %v, %v", r, res.Found, err)
		}
	}
	if log, _ := Log(ctx, lh); len(log) != 1 {
		t.Errorf("audit log after the no-op forgets: %d records", len(log))
	}
}

// TestForgetResumesAfterCrash stops Run after each step in turn; running it again
// finishes the job: the tables equal the fresh build, no snapshot returns the subject,
// and exactly one audit record is written.
func TestForgetResumesAfterCrash(t *testing.T) {
	base := eventsTarget()
	oracle, _ := build(t, base, events(false))
	steps := []string{"bronze", "replay", "seal silver.events", "seal silver.events_quarantine", "seal silver.events_keys"}
	crash := errors.New("crash")
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			tg := base
			lh, _ := build(t, tg, events(true))
			tg.fault = func(s string) error {
				if s == step {
					return crash
				}
				return nil
			}
			if _, err := Run(ctx, lh, tg, req); !errors.Is(err, crash) {
				t.Fatalf("run stopped at %s: %v", step, err)
			}
			tg.fault = nil
			plan, err := Plan(ctx, lh, tg, req)
			if err != nil || !plan.Found {
				t.Fatalf("after a crash at %s the plan finds nothing pending: %+v, %v", step, plan, err)
			}
			if _, err := Run(ctx, lh, tg, req); err != nil {
				t.Fatal(err)
			}
			checkForgotten(t, lh, oracle, tg)
			if log, err := Log(ctx, lh); err != nil || len(log) != 1 {
				t.Errorf("audit log: %d records, %v", len(log), err)
			}
		})
	}
}

// TestForgetKeylessEntity forgets a person from an entity without a natural key
// (identity: delivery), whose facts are named by where Bronze got them: the rows of
// everyone else keep their _delivery_id (the Bronze rewrite keeps each record's position)
// and every one of them stays, identical ones included; the subject's are gone.
func TestForgetKeylessEntity(t *testing.T) {
	tg := eventsTarget()
	tg.Silver.Identity, tg.Silver.Key = silver.IdentityDelivery, nil
	lines := events(true)
	lines = append(lines, lines[2]) // e-001, someone else's event, twice: two facts
	lh, _ := build(t, tg, lines)
	ctx := context.Background()
	others := func(ident string) []string {
		return slices.DeleteFunc(rows(t, lh, ident, 0), func(r string) bool { return strings.Contains(r, "user_id="+subject+"|") })
	}
	silverBefore, keysBefore := others(tg.Silver.Table), rows(t, lh, tg.Silver.KeysTable, 0)
	// Others: 32 events, 5 quarantined, one twice; the subject: 4 valid events, one twice.
	if len(silverBefore) != 28 || len(keysBefore) != 33 {
		t.Fatalf("before: %d silver rows of others (want 28), %d keys (want 33)", len(silverBefore), len(keysBefore))
	}
	if _, err := Run(ctx, lh, tg, req); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, lh, tg.Silver.Table, 0); !slices.Equal(got, silverBefore) {
		t.Errorf("silver after forget:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(silverBefore, "\n"))
	}
	var keep []string
	for _, r := range silverBefore {
		_, id, _ := strings.Cut(r, silver.ColDeliveryID+"=")
		keep = append(keep, silver.ColDeliveryID+"="+id)
	}
	slices.Sort(keep)
	if got := rows(t, lh, tg.Silver.KeysTable, 0); !slices.Equal(got, keep) {
		t.Errorf("keys table after forget: %v, want %v", got, keep)
	}
}
