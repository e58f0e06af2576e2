package silver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/lakehousetest"
)

// itemsSpec is a small upsert entity whose columns the evolution tests change.
func itemsSpec(cols ...string) EntitySpec {
	spec := EntitySpec{
		Name: "items", Table: "silver.items", QuarantineTable: "silver.items_quarantine",
		Mode: ModeUpsert, Key: []string{"item_id"}, UpdatedAt: "updated_at", Buckets: 2,
		WarnQuarantinePct: 5, WarnDuplicatePct: 5,
	}
	for _, c := range append([]string{"item_id string", "updated_at timestamp"}, cols...) {
		name, typ, _ := strings.Cut(c, " ")
		ty, err := ParseType(typ)
		if err != nil {
			panic(err)
		}
		spec.Columns = append(spec.Columns, ColumnSpec{Name: name, Path: "$." + name, Type: ty})
	}
	return spec
}

func TestSchemaEvolution(t *testing.T) {
	row1 := `{"item_id":"a","updated_at":"2026-01-01T00:00:00Z","qty":7,"price":"12.34","note":"x"}`
	row2 := `{"item_id":"b","updated_at":"2026-01-02T00:00:00Z","qty":8,"price":"56.78","note":"y"}`
	for _, tc := range []struct {
		name          string
		before, after []string
		wantErr       string   // refused: the error names the column
		want          []string // rows after the second run (internal columns skipped)
		wantOrder     []string // table columns after the change (entity columns)
	}{
		{name: "add column", before: []string{"qty int32"}, after: []string{"qty int32", "note string"},
			want: []string{
				"item_id=a|updated_at=2026-01-01T00:00:00Z|qty=7|note=NULL",
				"item_id=b|updated_at=2026-01-02T00:00:00Z|qty=8|note=y",
			},
			wantOrder: []string{"item_id", "updated_at", "qty", "note"}},
		{name: "add column in the middle", before: []string{"qty int32"}, after: []string{"note string", "qty int32"},
			want: []string{
				"item_id=a|updated_at=2026-01-01T00:00:00Z|note=NULL|qty=7",
				"item_id=b|updated_at=2026-01-02T00:00:00Z|note=y|qty=8",
			},
			wantOrder: []string{"item_id", "updated_at", "note", "qty"}},
		{name: "widen int32 to int64", before: []string{"qty int32"}, after: []string{"qty int64"},
			want: []string{
				"item_id=a|updated_at=2026-01-01T00:00:00Z|qty=7",
				"item_id=b|updated_at=2026-01-02T00:00:00Z|qty=8",
			}},
		{name: "widen decimal precision", before: []string{"price decimal(10,2)"}, after: []string{"price decimal(18,2)"},
			want: []string{
				"item_id=a|updated_at=2026-01-01T00:00:00Z|price=12.34",
				"item_id=b|updated_at=2026-01-02T00:00:00Z|price=56.78",
			}},
		{name: "narrow int64 to int32", before: []string{"qty int64"}, after: []string{"qty int32"},
			wantErr: "column qty: cannot change type long to int32"},
		{name: "narrow decimal precision", before: []string{"price decimal(18,2)"}, after: []string{"price decimal(10,2)"},
			wantErr: "column price: cannot change type decimal(18, 2) to decimal(10,2)"},
		{name: "change decimal scale", before: []string{"price decimal(10,2)"}, after: []string{"price decimal(12,3)"},
			wantErr: "column price: cannot change type decimal(10, 2) to decimal(12,3)"},
		{name: "incompatible type", before: []string{"qty string"}, after: []string{"qty int64"},
			wantErr: "column qty: cannot change type string to int64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lh := lakehousetest.Open(t)
			landing := t.TempDir()
			writeLanding(t, landing, "1.jsonl", row1)
			ingestInto(t, lh, "bronze.items", landing)
			if _, err := Run(ctx, lh, itemsSpec(tc.before...), "bronze.items", Options{}); err != nil {
				t.Fatal(err)
			}
			writeLanding(t, landing, "2.jsonl", row2)
			ingestInto(t, lh, "bronze.items", landing)
			res, err := Run(ctx, lh, itemsSpec(tc.after...), "bronze.items", Options{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				tbl, _ := lh.LoadTable(ctx, "silver.items")
				if Watermark(tbl) == res.BronzeTo && res.BronzeTo != 0 {
					t.Fatal("a refused change still committed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Quality.SchemaIssues) != 0 {
				t.Errorf("schema issues after evolution: %v", res.Quality.SchemaIssues)
			}
			skip := append([]string{ColIsDeleted, ColCDCOp, ColVersion, ColEventID, ColKeyHashHi, ColKeyHashLo}, runColumns...)
			got := tableRows(t, lh, "silver.items", skip...)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if tc.wantOrder != nil {
				tbl, _ := lh.LoadTable(ctx, "silver.items")
				var names []string
				for _, f := range tbl.Schema().Fields()[:len(tc.wantOrder)] {
					names = append(names, f.Name)
				}
				if !slices.Equal(names, tc.wantOrder) {
					t.Errorf("columns %v, want %v", names, tc.wantOrder)
				}
			}
		})
	}
}

func TestQualityReport(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	spec := itemsSpec("qty int64", "price decimal(18,2)", "owner string")
	spec.Columns[4].Required = true
	spec.Rules = []RuleSpec{
		{ID: "F1", Kind: "filter", Expr: "price >= 0", Reason: "negative_price"},
		// Misconfigured on purpose: normalisations after the filter break what it checked.
		{ID: "N1", Kind: "normalize", Column: "price", Expr: "price - 10"},
		{ID: "N2", Kind: "normalize", Column: "owner", Expr: `owner == "nobody" ? nil : owner`},
	}
	spec.WarnQuarantinePct, spec.WarnDuplicatePct = 10, 30
	spec.Severity = Severities{Rows: SeverityWarning} // published, reported (TestCriticalCheckCommitsNothing: refused)
	row := func(id, price, owner string) string {
		return fmt.Sprintf(`{"item_id":%q,"updated_at":"2026-01-01T00:00:00Z","qty":1,"price":%s,"owner":%q}`, id, price, owner)
	}
	writeLanding(t, landing, "1.jsonl",
		row("a", "50", "ann"), row("b", "5", "bob"), row("c", "20", "nobody"),
		row("d", "-1", "dan"), // quarantined by F1
		row("a", "50", "ann"), // duplicate
	)
	ingestInto(t, lh, "bronze.items", landing)
	res, err := Run(ctx, lh, spec, "bronze.items", Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := res.Quality
	want := Quality{
		RowsChecked:      3,
		FilterViolations: map[string]int64{"F1": 1}, // b: 5 - 10 < 0
		NullViolations:   map[string]int64{"owner": 1},
		BronzeRows:       5, SilverRows: 3, Balanced: true,
		QuarantinePct: 20, DuplicatePct: 20,
		Warnings: []string{"20.00% of the bronze rows were quarantined (threshold 10%)"},
		Failures: []Failure{{Check: CheckRows, Severity: SeverityWarning, Detail: "1 rows fail F1; 1 rows with NULL owner"}},
	}
	if g, w := fmt.Sprintf("%+v", q), fmt.Sprintf("%+v", want); g != w {
		t.Fatalf("quality\n%s\nwant\n%s", g, w)
	}
	if q.Passed() {
		t.Error("a report with violations passed")
	}
	tbl, _ := lh.LoadTable(ctx, "silver.items")
	var stored Quality
	if err := json.Unmarshal([]byte(tbl.CurrentSnapshot().Summary.Properties[PropQuality]), &stored); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", stored) != fmt.Sprintf("%+v", want) {
		t.Errorf("summary quality %+v", stored)
	}
	lines := strings.Join(q.Lines(), "\n")
	for _, s := range []string{"FAIL (warning): 1 rows fail F1; 1 rows with NULL owner", "quality schema: ok", "20.00% quarantined", "WARN: 20.00%"} {
		if !strings.Contains(lines, s) {
			t.Errorf("report lacks %q:\n%s", s, lines)
		}
	}
}

// TestRetypeByReplay is issue 42 item 2's guided path in Silver: a type change Iceberg
// cannot promote (int → decimal, a narrowing, a scale change, string → int) is refused
// by a run, naming the replay; the replay applies it in the commit that replaces the
// table's files, and the table then equals a fresh build with the new spec (its schema
// and rows); the snapshot before it still reads with the old type; a run after it has
// nothing to change. Two adjacent columns change at once; a key column's type cannot.
func TestRetypeByReplay(t *testing.T) {
	rows := []string{
		`{"item_id":"a","updated_at":"2026-01-01T00:00:00Z","qty":7,"price":"12.34","note":"5"}`,
		`{"item_id":"b","updated_at":"2026-01-02T00:00:00Z","qty":8,"price":"56.78","note":"6"}`,
	}
	for _, tc := range []struct {
		name          string
		before, after []string
	}{
		{"int to decimal", []string{"qty int64", "price decimal(10,2)"}, []string{"qty decimal(12,2)", "price decimal(10,2)"}},
		{"narrowing and scale, adjacent", []string{"qty int64", "price decimal(10,2)", "note string"}, []string{"qty int32", "price decimal(12,3)", "note string"}},
		{"string to int, last", []string{"qty int64", "note string"}, []string{"qty int64", "note int64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lh := lakehousetest.Open(t)
			landing := t.TempDir()
			writeLanding(t, landing, "1.jsonl", rows[0])
			ingestInto(t, lh, "bronze.items", landing)
			if _, err := Run(ctx, lh, itemsSpec(tc.before...), "bronze.items", Options{}); err != nil {
				t.Fatal(err)
			}
			old, _ := lh.LoadTable(ctx, "silver.items")
			oldRows := tableRows(t, lh, "silver.items", runColumns...)
			writeLanding(t, landing, "2.jsonl", rows[1])
			ingestInto(t, lh, "bronze.items", landing)
			after := itemsSpec(tc.after...)
			if _, err := Run(ctx, lh, after, "bronze.items", Options{}); err == nil || !strings.Contains(err.Error(), "run `goldbridge replay items`") {
				t.Fatalf("run with a retype: %v", err)
			}
			res, err := Replay(ctx, lh, after, "bronze.items", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Quality.SchemaIssues) != 0 || res.Inserted != 2 {
				t.Fatalf("replay: issues %v, %+v", res.Quality.SchemaIssues, res.Counts)
			}

			fresh := lakehousetest.Open(t) // the oracle: the new spec built once from the same Bronze
			ingestInto(t, fresh, "bronze.items", landing)
			if _, err := Run(ctx, fresh, after, "bronze.items", Options{}); err != nil {
				t.Fatal(err)
			}
			skip := append([]string{ColEventID}, runColumns...)
			if got, want := tableRows(t, lh, "silver.items", skip...), tableRows(t, fresh, "silver.items", skip...); !slices.Equal(got, want) {
				t.Fatalf("rows after the replay:\n%s\nfresh build:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			tbl, _ := lh.LoadTable(ctx, "silver.items")
			ftbl, _ := fresh.LoadTable(ctx, "silver.items")
			if g, w := schemaText(tbl.Schema()), schemaText(ftbl.Schema()); g != w {
				t.Fatalf("schema after the replay %s, fresh %s", g, w)
			}
			// Time travel: the snapshot before the replay reads with its own schema.
			got := tableRowsAt(t, old, old.CurrentSnapshot().SnapshotID, runColumns...)
			if !slices.Equal(got, oldRows) {
				t.Fatalf("the snapshot before the replay reads\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(oldRows, "\n"))
			}
			if res, err := Run(ctx, lh, after, "bronze.items", Options{}); err != nil || res.Read != 0 {
				t.Fatalf("a run after the replay: %+v, %v", res.Counts, err)
			}
		})
	}
	t.Run("key column", func(t *testing.T) {
		_, err := planSchema(mustSchema(t, itemsSpec()), itemsSpec().Columns[:0:0], nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		spec := itemsSpec()
		spec.Columns[0].Type = Type{Kind: Int64}
		if _, err := planSchema(mustSchema(t, itemsSpec()), spec.Columns, spec.Key, nil); err == nil || !strings.Contains(err.Error(), "part of the table's layout") {
			t.Fatalf("retype a key column: %v", err)
		}
	})
}

func schemaText(s *iceberg.Schema) string {
	var parts []string
	for _, f := range s.Fields() {
		parts = append(parts, f.Name+" "+f.Type.String())
	}
	return strings.Join(parts, ", ")
}

func mustSchema(t *testing.T, spec EntitySpec) *iceberg.Schema {
	t.Helper()
	sch, err := icebergSchema(spec.Columns, spec.Key)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// TestCheckTypes: a reader stops at a column whose table type differs from the config's
// other than by a promotion (Gold would read an int64 column as a zero decimal).
func TestCheckTypes(t *testing.T) {
	sch := mustSchema(t, itemsSpec("qty int32", "price decimal(10,2)", "note string"))
	ty := func(s string) Type {
		t.Helper()
		v, err := ParseType(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		cols map[string]Type
		want string // "" = no error
	}{
		{map[string]Type{"qty": ty("int32"), "note": ty("string"), "gone": ty("int64")}, ""},
		{map[string]Type{"qty": ty("int64"), "price": ty("decimal(18,2)")}, ""},
		{map[string]Type{"qty": ty("decimal(12,2)"), "note": ty("int64")},
			"column note is string in the table, int64 in the config, column qty is int in the table, decimal(12,2) in the config"},
		{map[string]Type{"price": ty("decimal(10,3)")}, "column price is decimal(10, 2) in the table, decimal(10,3) in the config"},
	} {
		err := CheckTypes(sch, tc.cols)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckTypes(%v) = %v, want %q", tc.cols, err, tc.want)
		}
	}
}

// TestRenameInPlace: a column declared with renamed_from takes the old column's place
// and values (renamed by field id); a rename and a widening of the same column apply
// together; the snapshot before reads the old name; a run after has nothing to change.
func TestRenameInPlace(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	writeLanding(t, landing, "1.jsonl", `{"item_id":"a","updated_at":"2026-01-01T00:00:00Z","qty":7}`)
	ingestInto(t, lh, "bronze.items", landing)
	if _, err := Run(ctx, lh, itemsSpec("qty int32"), "bronze.items", Options{}); err != nil {
		t.Fatal(err)
	}
	old, _ := lh.LoadTable(ctx, "silver.items")
	writeLanding(t, landing, "2.jsonl", `{"item_id":"b","updated_at":"2026-01-02T00:00:00Z","quantity":8}`)
	ingestInto(t, lh, "bronze.items", landing)
	spec := itemsSpec("quantity int64")
	spec.Columns[2].RenamedFrom = "qty"
	res, err := Run(ctx, lh, spec, "bronze.items", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Quality.SchemaIssues)+len(res.Quality.SchemaNotes) != 0 {
		t.Fatalf("schema issues %v, notes %v", res.Quality.SchemaIssues, res.Quality.SchemaNotes)
	}
	want := []string{"item_id=a|updated_at=2026-01-01T00:00:00Z|quantity=7", "item_id=b|updated_at=2026-01-02T00:00:00Z|quantity=8"}
	skip := append([]string{ColIsDeleted, ColCDCOp, ColVersion, ColEventID, ColKeyHashHi, ColKeyHashLo}, runColumns...)
	if got := tableRows(t, lh, "silver.items", skip...); !slices.Equal(got, want) {
		t.Fatalf("rows after the rename:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tbl, _ := lh.LoadTable(ctx, "silver.items")
	if f, ok := tbl.Schema().FindFieldByName("quantity"); !ok || f.Type.String() != "long" || f.ID != 3 {
		t.Fatalf("quantity: %+v (found %v), want field 3 of type long", f, ok)
	}
	if got := tableRowsAt(t, old, old.CurrentSnapshot().SnapshotID, skip...); !slices.Equal(got, []string{"item_id=a|updated_at=2026-01-01T00:00:00Z|qty=7"}) {
		t.Fatalf("the snapshot before the rename reads %v", got)
	}
	if res, err := Run(ctx, lh, spec, "bronze.items", Options{}); err != nil || res.Read != 0 {
		t.Fatalf("a run after: %+v, %v", res.Counts, err)
	}
}

// TestQualityRowsAcrossShards: the row level and the written sort_by hours are counted
// over every merge shard (checkWritten runs the shards in parallel and adds them up),
// against counts the test makes from its own rows.
func TestQualityRowsAcrossShards(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	spec := itemsSpec("price int64", "owner string")
	spec.Columns[3].Required = true
	spec.SortBy = []string{"updated_at"}
	spec.Rules = []RuleSpec{
		{ID: "F1", Kind: "filter", Expr: "price >= 0", Reason: "negative_price"},
		{ID: "N1", Kind: "normalize", Column: "price", Expr: "price - 10"},
		{ID: "N2", Kind: "normalize", Column: "owner", Expr: `owner == "nobody" ? nil : owner`},
	}
	spec.WarnQuarantinePct, spec.WarnDuplicatePct = 100, 100
	spec.Severity = Severities{Rows: SeverityWarning}
	rnd := rand.New(rand.NewPCG(7, 41))
	var lines []string
	var written, failF1, nullOwner int64
	hours := map[int64]bool{}
	for i := range 2000 {
		price := rnd.IntN(40) - 5 // -5..34: quarantined below 0, failing F1 after N1 below 10
		owner := "ann"
		if rnd.IntN(7) == 0 {
			owner = "nobody"
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rnd.IntN(500)) * time.Hour)
		lines = append(lines, fmt.Sprintf(`{"item_id":"i%d","updated_at":%q,"price":%d,"owner":%q}`, i, at.Format(time.RFC3339), price, owner))
		if price < 0 {
			continue
		}
		written++
		if price < 10 {
			failF1++
		}
		if owner == "nobody" {
			nullOwner++
		}
		hours[at.Unix()/3600] = true
	}
	writeLanding(t, landing, "1.jsonl", lines...)
	ingestInto(t, lh, "bronze.items", landing)
	res, err := Run(ctx, lh, spec, "bronze.items", Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := res.Quality
	if q.RowsChecked != written || q.FilterViolations["F1"] != failF1 || q.NullViolations["owner"] != nullOwner {
		t.Errorf("checked %d, F1 %d, NULL owner %d; want %d, %d, %d", q.RowsChecked, q.FilterViolations["F1"], q.NullViolations["owner"], written, failF1, nullOwner)
	}
	tbl, _ := lh.LoadTable(ctx, "silver.items")
	got := map[int64]bool{}
	ok, err := DecodeReplaced(tbl.CurrentSnapshot().Summary.Properties[PropWrittenPrefix+"updated_at"], func(lo, hi int64) {
		for h := lo; h <= hi; h++ {
			got[h] = true
		}
	})
	if err != nil || !ok {
		t.Fatalf("written hours: ok %v, %v", ok, err)
	}
	if !maps.Equal(got, hours) {
		t.Errorf("written hours: %d listed, want %d", len(got), len(hours))
	}
}
