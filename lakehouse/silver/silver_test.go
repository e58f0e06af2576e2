package silver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"goldbridge/demo"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

func strp(s string) *string { return &s }

// ordersSpec is the orders entity of examples/orders.yaml.
func ordersSpec() EntitySpec {
	t := func(s string) Type { ty, _ := ParseType(s); return ty }
	col := func(name, typ string, req bool) ColumnSpec {
		return ColumnSpec{Name: name, Path: "$." + name, Type: t(typ), Required: req}
	}
	cur := col("currency", "string", false)
	cur.Default = strp("USD")
	return EntitySpec{
		Name: "orders", Table: "silver.orders", QuarantineTable: "silver.orders_quarantine",
		Mode: "upsert", Key: []string{"order_id"}, UpdatedAt: "updated_at", Op: "op", Buckets: 4,
		Columns: []ColumnSpec{
			col("order_id", "string", true), col("user_id", "string", true), col("amount", "decimal(18,2)", false),
			cur, col("country", "string", false), col("category", "string", false), col("status", "string", false),
			col("created_at", "timestamp", false), col("updated_at", "timestamp", true), col("op", "string", false),
		},
		Rules: []RuleSpec{{ID: "F1", Kind: "filter", Expr: "amount >= 0", Reason: "negative_amount"}},
	}
}

func ingest(t *testing.T, lh *catalog.Lakehouse, dir string) {
	t.Helper()
	src := bronze.FileSource{Name: "landing", System: "shop_file", Dir: dir}
	if _, err := bronze.IngestFiles(context.Background(), lh, "bronze.orders", []bronze.FileSource{src}, bronze.Options{}); err != nil {
		t.Fatal(err)
	}
}

// silverRows reads the current Silver rows as "key -> rendered row".
func silverRows(t *testing.T, lh *catalog.Lakehouse) map[string]string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	spec := ordersSpec()
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for r := range int(rec.NumRows()) {
			var parts []string
			for _, c := range spec.Columns {
				a := rec.Column(rec.Schema().FieldIndices(c.Name)[0])
				parts = append(parts, render(ValueAt(a, r, c.Type), c.Type))
			}
			del := rec.Column(rec.Schema().FieldIndices(ColIsDeleted)[0]).(*array.Boolean).Value(r)
			parts = append(parts, fmt.Sprint(del))
			key := parts[0]
			if _, dup := out[key]; dup {
				t.Fatalf("key %s appears twice in Silver", key)
			}
			out[key] = strings.Join(parts, "|")
		}
		rec.Release()
	}
	return out
}

func render(v Value, t Type) string {
	if v.Null {
		return "NULL"
	}
	switch t.Kind {
	case Decimal:
		return v.D.ToString(int32(t.Scale))
	case Timestamp:
		return time.UnixMicro(v.I).UTC().Format(time.RFC3339Nano)
	default:
		return string(appendKeyText(nil, v, t))
	}
}

// oracle is an independent, deliberately simple computation of the expected Silver
// state from the landing files: encoding/json, every version kept, sorted, last wins.
func oracle(t *testing.T, dir string) (rows map[string]string, quarantined int) {
	t.Helper()
	versions := map[string][]oracleVersion{}
	oracleLines(t, dir, func(_ []byte, v oracleVersion, ok bool) {
		if !ok {
			quarantined++
			return
		}
		versions[v.id] = append(versions[v.id], v)
	})
	rows = map[string]string{}
	for id, vs := range versions {
		slices.SortStableFunc(vs, func(a, b oracleVersion) int {
			if c := a.ua.Compare(b.ua); c != 0 {
				return c
			}
			return a.rank - b.rank
		})
		rows[id] = vs[len(vs)-1].row
	}
	return rows, quarantined
}

// oracleVersion is one valid line of the orders stream as the oracle reads it.
type oracleVersion struct {
	id   string
	ua   time.Time
	rank int
	row  string
}

// oracleLines calls fn with every non-blank line of the landing files (in file order)
// and its version, ok false if Silver must quarantine it.
func oracleLines(t *testing.T, dir string, fn func(line []byte, v oracleVersion, ok bool)) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	sort.Strings(files)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			v, ok := oracleParse(line)
			fn(line, v, ok)
		}
		fh.Close()
	}
}

// oracleParse types one line of the orders stream (ordersSpec), false if Silver must
// quarantine it.
func oracleParse(line []byte) (oracleVersion, bool) {
	rank := map[string]int{"d": 4, "u": 3, "c": 2, "r": 1}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if d.Decode(&m) != nil || d.More() {
		return oracleVersion{}, false
	}
	str := func(k string) (string, bool) {
		switch v := m[k].(type) {
		case string:
			return v, true
		case json.Number:
			return v.String(), true
		}
		return "", false
	}
	id, ok1 := str("order_id")
	user, ok2 := str("user_id")
	uaS, ok3 := str("updated_at")
	ua, err := time.Parse(time.RFC3339Nano, uaS)
	if !ok1 || !ok2 || !ok3 || err != nil {
		return oracleVersion{}, false
	}
	var amount string
	n, ok := m["amount"].(json.Number)
	if !ok {
		return oracleVersion{}, false // not a decimal, or NULL (F1 on NULL: not >= 0, as in SQL)
	}
	whole, frac, _ := strings.Cut(n.String(), ".")
	frac = (frac + "00")[:2]
	amount = whole + "." + frac
	if strings.HasPrefix(amount, "-") {
		return oracleVersion{}, false // F1 negative_amount
	}
	currency, ok := str("currency")
	if !ok {
		currency = "USD"
	}
	opt := func(k string) string {
		if s, ok := str(k); ok {
			return s
		}
		return "NULL"
	}
	created := "NULL"
	if s, ok := str("created_at"); ok {
		ct, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return oracleVersion{}, false
		}
		created = ct.UTC().Format(time.RFC3339Nano)
	}
	op := opt("op")
	row := strings.Join([]string{id, user, amount, currency, opt("country"), opt("category"), opt("status"),
		created, ua.UTC().Format(time.RFC3339Nano), op, fmt.Sprint(op == "d")}, "|")
	return oracleVersion{id: id, ua: ua, rank: rank[op], row: row}, true
}

func TestSilverEqualsOracleIncrementally(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	all := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: all, Events: 30000, Seed: 11, Files: 3, End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(all, "*.jsonl"))
	sort.Strings(files)
	landing := t.TempDir()
	spec := ordersSpec()
	var total Counts
	// Land the files one at a time and run Silver after each: late events and
	// duplicates cross run boundaries.
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(landing, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
		ingest(t, lh, landing)
		res, err := Run(ctx, lh, spec, "bronze.orders", Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Counts
		if c.Current+c.Superseded+c.Duplicates+c.Quarantined != c.Read || c.Read != 10000 {
			t.Fatalf("counts do not add up: %+v", c)
		}
		total.Quarantined += c.Quarantined
		total.Read += c.Read
		total.Updated += c.Updated
		total.Superseded += c.Superseded
		total.Duplicates += c.Duplicates
		t.Logf("run: %+v", c)
	}
	if total.Updated == 0 || total.Superseded == 0 || total.Duplicates == 0 {
		t.Fatalf("the stream did not exercise updates, late events and duplicates across runs: %+v", total)
	}
	want, wantQ := oracle(t, landing)
	got := silverRows(t, lh)
	if len(got) != len(want) {
		t.Errorf("silver has %d keys, oracle %d", len(got), len(want))
	}
	diffs := 0
	for k, w := range want {
		if got[k] != w && diffs < 10 {
			diffs++
			t.Errorf("key %s:\n silver %s\n oracle %s", k, got[k], w)
		}
	}
	if int(total.Quarantined) != wantQ {
		t.Errorf("quarantined %d, oracle %d", total.Quarantined, wantQ)
	}
	deleted := 0
	for _, r := range got {
		if strings.HasSuffix(r, "|true") {
			deleted++
		}
	}
	if deleted == 0 {
		t.Error("no soft-deleted rows: the test would not cover deletes")
	}

	// Running again changes nothing: no new snapshot.
	tbl, _ := lh.LoadTable(ctx, "silver.orders")
	before := tbl.CurrentSnapshot().SnapshotID
	res, err := Run(ctx, lh, spec, "bronze.orders", Options{})
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ = lh.LoadTable(ctx, "silver.orders")
	if res.SnapshotID != 0 || tbl.CurrentSnapshot().SnapshotID != before {
		t.Fatalf("second run committed: %+v", res)
	}
	q, _ := lh.LoadTable(ctx, "silver.orders_quarantine")
	_, recs, _ := q.Scan().ToArrowRecords(ctx)
	qrows := 0
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		qrows += int(rec.NumRows())
		reasons := rec.Column(rec.Schema().FieldIndices(QColReason)[0]).(*array.String)
		for i := range reasons.Len() {
			if reasons.Value(i) == "" {
				t.Error("quarantine row without a reason")
			}
		}
		rec.Release()
	}
	if qrows != wantQ {
		t.Errorf("quarantine table has %d rows, want %d", qrows, wantQ)
	}
}

func TestLateEventDoesNotRollBack(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	write := func(name string, lines ...string) {
		if err := os.WriteFile(filepath.Join(landing, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	row := func(id, status, ua, op string) string {
		return fmt.Sprintf(`{"order_id":%q,"user_id":"u1","amount":5.00,"status":%q,"created_at":"2026-01-01T00:00:00Z","updated_at":%q,"op":%q}`, id, status, ua, op)
	}
	write("1.jsonl", row("o1", "created", "2026-01-01T00:00:00Z", "c"), row("o1", "shipped", "2026-01-03T00:00:00Z", "u"), row("o2", "created", "2026-01-01T00:00:00Z", "c"))
	ingest(t, lh, landing)
	if _, err := Run(ctx, lh, ordersSpec(), "bronze.orders", Options{}); err != nil {
		t.Fatal(err)
	}
	// A late, older update of o1 and a delete of o2 arrive in the next run.
	write("2.jsonl", row("o1", "paid", "2026-01-02T00:00:00Z", "u"), row("o2", "created", "2026-01-02T00:00:00Z", "d"))
	ingest(t, lh, landing)
	res, err := Run(ctx, lh, ordersSpec(), "bronze.orders", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Superseded != 1 || res.Updated != 1 || res.Deleted != 1 || res.Read != 2 {
		t.Fatalf("counts = %+v", res.Counts)
	}
	got := silverRows(t, lh)
	if !strings.Contains(got["o1"], "|shipped|") || !strings.HasSuffix(got["o1"], "|false") {
		t.Errorf("o1 rolled back: %s", got["o1"])
	}
	if !strings.HasSuffix(got["o2"], "|d|true") {
		t.Errorf("o2 not soft-deleted: %s", got["o2"])
	}
}

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  bool
	}{
		{"12.5", "12.50", false}, {"-0.004", "0.00", false}, {"0.005", "0.01", false}, {"-2.345", "-2.35", false},
		{"1e2", "100.00", false}, {"9999999999999999.99", "9999999999999999.99", false},
		{"99999999999999999.99", "", true}, {"abc", "", true}, {"", "", true}, {"1.2.3", "", true},
	}
	for _, tt := range tests {
		d, err := parseDecimal(tt.in, 18, 2)
		if (err != nil) != tt.err {
			t.Errorf("%q: err %v", tt.in, err)
			continue
		}
		if !tt.err && d.ToString(2) != tt.want {
			t.Errorf("%q = %s, want %s", tt.in, d.ToString(2), tt.want)
		}
	}
}

var _ = arrow.PrimitiveTypes.Int64
