package silver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"goldbridge/demo"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// customersSpec is the customers entity of docs/silver.md ("Debezium"), as the config
// there becomes (cmd/goldbridge's TestDebeziumDocsConfig runs the YAML itself).
func customersSpec(connector, decimals string) EntitySpec {
	t := func(s string) Type { ty, _ := ParseType(s); return ty }
	col := func(name, typ string, req bool, format string) ColumnSpec {
		return ColumnSpec{Name: name, Path: "$." + name, Type: t(typ), Required: req, Format: format}
	}
	return EntitySpec{
		Name: "customers", Table: "silver.customers", QuarantineTable: "silver.customers_quarantine",
		Mode: ModeUpsert, Key: []string{"id"}, Buckets: 4, FailQuarantinePct: 50, WarnQuarantinePct: 5, WarnDuplicatePct: 5,
		Debezium: &DebeziumSpec{Connector: connector, DecimalHandling: decimals},
		Columns: []ColumnSpec{
			col("id", "int64", true, ""), col("name", "string", true, ""), col("tier", "string", false, ""),
			col("balance", "decimal(12,2)", false, ""), col("updated_at", "timestamp", false, "epoch_us"),
			col("birth", "date", false, "epoch_days"), col("notes", "string", false, ""),
		},
		Rules: []RuleSpec{{ID: "F1", Kind: "filter", Expr: `name != ""`, Reason: "empty_name"}},
	}
}

// dbzOracle is the Silver state the source history makes, computed from the history
// alone: per key its last change; a deleted key is is_deleted with the values the row
// had (whatever the delete event carries: REPLICA IDENTITY DEFAULT or FULL), and an
// unchanged TOASTed column keeps its value.
func dbzOracle(h []demo.Change) map[int64]string {
	last := map[int64]demo.Change{}
	for _, ch := range h {
		last[ch.Row.ID] = ch
	}
	out := map[int64]string{}
	for id, ch := range last {
		r := ch.Row
		tier := r.Tier
		if tier == "" {
			tier = "NULL"
		}
		sign, a := "", r.Balance
		if a < 0 {
			sign, a = "-", -a
		}
		out[id] = fmt.Sprintf("%d|%s|%s|%s%d.%02d|%s|%s|%s|%t|%c", id, r.Name, tier, sign, a/100, a%100,
			time.UnixMicro(r.UpdatedAt).UTC().Format(time.RFC3339Nano), time.Unix(int64(r.Birth)*86400, 0).UTC().Format(time.DateOnly),
			r.Notes, ch.Op == 'd', ch.Op)
	}
	return out
}

// customerRows reads Silver as id -> the oracle's rendering.
func customerRows(t *testing.T, lh *catalog.Lakehouse, spec EntitySpec) map[int64]string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), spec.Table)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for r := range int(rec.NumRows()) {
			var parts []string
			for _, c := range spec.Columns {
				v := ValueAt(rec.Column(rec.Schema().FieldIndices(c.Name)[0]), r, c.Type)
				s := render(v, c.Type)
				if c.Type.Kind == Date && !v.Null {
					s = time.Unix(v.I*86400, 0).UTC().Format(time.DateOnly)
				}
				parts = append(parts, s)
			}
			del := rec.Column(rec.Schema().FieldIndices(ColIsDeleted)[0]).(*array.Boolean).Value(r)
			op := rec.Column(rec.Schema().FieldIndices(ColCDCOp)[0]).(*array.String).Value(r)
			parts = append(parts, fmt.Sprint(del), op)
			id := ValueAt(rec.Column(rec.Schema().FieldIndices("id")[0]), r, spec.Columns[0].Type).I
			if _, dup := out[id]; dup {
				t.Fatalf("key %d twice in Silver", id)
			}
			out[id] = strings.Join(parts, "|")
		}
		rec.Release()
	}
	return out
}

// clipRow shortens the long notes of a rendered row.
func clipRow(s string) string {
	parts := strings.Split(s, "|")
	for i, p := range parts {
		if len(p) > 24 {
			parts[i] = p[:24] + "…"
		}
	}
	return strings.Join(parts, "|")
}

func diffRows(t *testing.T, what string, got, want map[int64]string) {
	t.Helper()
	bad := 0
	for id, w := range want {
		if g := got[id]; g != w {
			if bad++; bad <= 5 {
				t.Errorf("%s: key %d:\n got  %s\n want %s", what, id, clipRow(g), clipRow(w))
			}
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s: key %d in Silver, not in the oracle: %s", what, id, g)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d keys differ", what, bad, len(want))
	}
}

// dbzVariant is one shape of the stream.
type dbzVariant struct {
	name string
	opt  demo.DebeziumOptions
	dec  string // decimal_handling
}

func dbzVariants() []dbzVariant {
	base := demo.DebeziumOptions{Customers: 200, Txs: 90, Files: 5, Seed: 7}
	v := func(name, conn string, flat, precise, full bool) dbzVariant {
		o := base
		o.Connector, o.Flattened, o.Precise, o.FullIdentity = conn, flat, precise, full
		o.Toast = conn == "postgresql" // unchanged long notes: __debezium_unavailable_value
		dec := DecimalPrecise
		if !precise {
			dec = DecimalString
		}
		return dbzVariant{name: name, opt: o, dec: dec}
	}
	return []dbzVariant{
		v("postgres_envelope_precise", "postgresql", false, true, false),
		v("postgres_envelope_string", "postgresql", false, false, false),
		v("postgres_envelope_full_identity", "postgresql", false, true, true),
		v("postgres_flattened_precise", "postgresql", true, true, false),
		v("mysql_envelope_precise", "mysql", false, true, false),
		v("mysql_flattened_string", "mysql", true, false, false),
	}
}

// ingestFile lands one file of the stream and ingests it.
func ingestFile(t *testing.T, lh *catalog.Lakehouse, dir string, f demo.DebeziumFile) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, f.Name), []byte(strings.Join(f.Lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := bronze.FileSource{Name: "cdc", System: "shop_debezium", Dir: dir}
	if _, err := bronze.IngestFiles(context.Background(), lh, "bronze.customers", []bronze.FileSource{src}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestDebeziumOracle runs generated Debezium streams (PostgreSQL and MySQL, envelope and
// flattened, precise and string decimals, REPLICA IDENTITY DEFAULT and FULL) through
// Silver one file per run, in production order and in a shuffled order (out-of-order
// files, each run in passes), and by replay; each must equal the oracle computed from the source history.
// In order, the restart's file (events sent again with a new envelope ts_ms) is 0
// updates, and the purge of half the rows commits: as many deletes
// and skipped tombstones as rows purged, nothing quarantined.
func TestDebeziumOracle(t *testing.T) {
	for _, v := range dbzVariants() {
		t.Run(v.name, func(t *testing.T) {
			st := demo.GenerateDebezium(v.opt)
			spec := customersSpec(v.opt.Connector, v.dec)
			want := dbzOracle(st.History)
			ctx := context.Background()

			// In production order, one file per run.
			lh, dir := lakehousetest.Open(t), t.TempDir()
			for _, f := range st.Files {
				ingestFile(t, lh, dir, f)
				res, err := Run(ctx, lh, spec, "bronze.customers", Options{})
				if err != nil {
					t.Fatalf("%s: %v", f.Name, err)
				}
				c := res.Counts
				if c.Quarantined != 0 || !res.Quality.Passed() {
					t.Errorf("%s: %+v, quality %v", f.Name, c, res.Quality.Lines())
				}
				switch f.What {
				case "restart":
					// Each event is stored already (a duplicate) or older than one stored
					// (superseded: the first of two updates in one transaction).
					if c.Current != 0 || c.Duplicates+c.Superseded != int64(st.Restarted) || c.Duplicates == 0 {
						t.Errorf("restart: %+v, want 0 updates, %d duplicates or superseded", c, st.Restarted)
					}
				case "purge":
					if c.Deleted != int64(st.Purged) || c.Skipped != int64(st.Purged) {
						t.Errorf("purge: %+v, want %d deleted and skipped", c, st.Purged)
					}
				}
			}
			diffRows(t, "in order", customerRows(t, lh, spec), want)

			// Out of order: the same files in a shuffled order, one per run.
			lh2, dir2 := lakehousetest.Open(t), t.TempDir()
			files := slices.Clone(st.Files)
			r := rand.New(rand.NewPCG(v.opt.Seed, 1))
			r.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
			for _, f := range files {
				ingestFile(t, lh2, dir2, f)
				// In passes of a few keys' groups, so that the carried columns of the
				// winners and their stored rows go through passes too.
				if _, err := Run(ctx, lh2, spec, "bronze.customers", Options{PassRows: 40}); err != nil {
					t.Fatalf("%s: %v", f.Name, err)
				}
			}
			diffRows(t, "shuffled", customerRows(t, lh2, spec), want)
			if _, err := Replay(ctx, lh2, spec, "bronze.customers", Options{}); err != nil {
				t.Fatal(err)
			}
			diffRows(t, "replay", customerRows(t, lh2, spec), want)
			t.Logf("%d changes, %d files, %d purged, %d restarted, %d tombstones, %d keys",
				len(st.History), len(st.Files), st.Purged, st.Restarted, st.Tombstones, len(want))
		})
	}
}

// TestDebeziumByUpdatedAt reads a flattened stream without add.fields (no op, no
// position: only __deleted), ordered by updated_at: a late version is superseded, the
// same row again (a new __ts_ms aside, here none) a duplicate, a tombstone skipped, a
// rewritten delete soft-deletes.
func TestDebeziumByUpdatedAt(t *testing.T) {
	ctx := context.Background()
	spec := customersSpec("postgresql", DecimalString)
	spec.UpdatedAt = "updated_at"
	lh, dir := lakehousetest.Open(t), t.TempDir()
	run := func(name string, lines ...string) Counts {
		t.Helper()
		ingestFile(t, lh, dir, demo.DebeziumFile{Name: name, Lines: lines})
		res, err := Run(ctx, lh, spec, "bronze.customers", Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Counts
	}
	v200 := `{"id":1,"name":"a","balance":"1.50","updated_at":200,"__deleted":"false"}`
	run("1.jsonl", v200)
	c := run("2.jsonl", `{"id":1,"name":"b","balance":"2.50","updated_at":100,"__deleted":"false"}`, v200, "null")
	if c.Superseded != 1 || c.Duplicates != 1 || c.Skipped != 1 || c.Current != 0 {
		t.Errorf("late, again, tombstone: %+v", c)
	}
	c = run("3.jsonl", `{"id":1,"name":"a","balance":"1.50","updated_at":300,"__deleted":"true"}`, "null")
	if c.Deleted != 1 || c.Skipped != 1 {
		t.Errorf("delete: %+v", c)
	}
	got := customerRows(t, lh, spec)[1]
	if !strings.HasPrefix(got, "1|a|NULL|1.50|") || !strings.HasSuffix(got, "|true|d") {
		t.Errorf("row %s", got)
	}
}
