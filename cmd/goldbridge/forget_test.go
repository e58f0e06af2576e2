package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"go.yaml.in/yaml/v3"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving/chlocal"
)

// forgetEnv is one state directory of the embedded stack running examples/orders.yaml
// on its own ClickHouse ports (the state dir's, chosen on first use).
type forgetEnv struct {
	t     *testing.T
	bin   string
	state string
	cfg   string
	env   []string // added to the commands' environment (credentials of shared servers)
}

func newForgetEnv(t *testing.T) *forgetEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: the embedded stack with a local ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The ports stay unset: the state dir chooses its own on first use, outside the
	// ephemeral range. Ports from chlocal.FreePorts are ephemeral ones, which an outbound
	// connection (S3, Postgres) may hold when a later command starts the server again.
	out, err := yaml.Marshal(ordersConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	e := &forgetEnv{t: t, bin: buildGoldbridge(t), state: filepath.Join(dir, "state"), cfg: filepath.Join(dir, "pipeline.yaml")}
	writeFile(t, e.cfg, string(out))
	return e
}

// run runs one goldbridge command (the built binary: the local ClickHouse is a child
// process of it) and fails the test unless it exits 0.
func (e *forgetEnv) run(args ...string) string {
	e.t.Helper()
	out, err := e.exec(args...)
	if err != nil {
		e.t.Fatalf("goldbridge %s: %v\n%s", strings.Join(args, " "), err, tail(out, 4000))
	}
	return out
}

// exec writes the output to a file, not a pipe: the local ClickHouse the command
// starts inherits it and may outlive the command by a moment.
func (e *forgetEnv) exec(args ...string) (string, error) {
	f, err := os.CreateTemp(e.t.TempDir(), "out")
	if err != nil {
		return "", err
	}
	defer f.Close()
	cmd := exec.Command(e.bin, append([]string{"-c", e.cfg, "--state-dir", e.state}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if e.env != nil {
		cmd.Env = append(os.Environ(), e.env...)
	}
	err = cmd.Run()
	out, rerr := os.ReadFile(f.Name())
	return string(out), errors.Join(err, rerr)
}

func (e *forgetEnv) landing() string { return filepath.Join(e.state, "landing", "orders") }

// forgetSubject picks a user of the demo stream with several events, preferring one
// with a line that is not valid JSON (which forget matches by the value alone; see
// bronze.ForgetRequest).
func forgetSubject(t *testing.T, landing string, skip ...string) string {
	t.Helper()
	lines := landingLines(t, landing)
	count := map[string]int{}
	invalid := map[string]bool{}
	for _, l := range lines {
		i := bytes.Index(l, []byte(`"user_id":"`))
		if i < 0 {
			continue
		}
		rest := l[i+len(`"user_id":"`):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			continue
		}
		u := string(rest[:j])
		count[u]++
		if !json.Valid(l) {
			invalid[u] = true
		}
	}
	var users []string
	for _, withInvalid := range []bool{true, false} {
		for u, n := range count {
			if n >= 6 && invalid[u] == withInvalid && !slices.Contains(skip, u) {
				users = append(users, u)
			}
		}
		if len(users) > 0 {
			break
		}
	}
	if len(users) == 0 {
		t.Fatal("no demo user with 6 valid events")
	}
	slices.Sort(users)
	u := users[len(users)/2]
	for _, l := range lines { // the subject's id occurs in its own lines only
		if bytes.Contains(l, []byte(u)) && !bytes.Contains(l, []byte(`"user_id":"`+u+`"`)) {
			t.Fatalf("subject %s occurs in another user's line: %s", u, l)
		}
	}
	return u
}

func landingLines(t *testing.T, dir string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("landing files in %s: %v", dir, err)
	}
	var lines [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, slices.Clone(sc.Bytes()))
		}
	}
	return lines
}

// TestForgetKeepsPipelineRunning: the run after a forget succeeds with no manual step
// (issue 20: it failed with "bronze snapshot no longer available … rebuild with replay").
func TestForgetKeepsPipelineRunning(t *testing.T) {
	e := newForgetEnv(t)
	e.run("demo", "generate", "--events", "3000", "--seed", "7")
	e.run("run")
	subject := forgetSubject(t, e.landing())
	e.run("forget", "orders", "--where", "user_id = "+subject, "--confirm")
	e.run("run")
	e.run("run")
}

// lakehouse opens the environment's embedded catalog (read only: no command runs).
func (e *forgetEnv) lakehouse() *catalog.Lakehouse {
	e.t.Helper()
	lh, err := catalog.Open(context.Background(), catalog.Config{Type: "sql", URI: filepath.Join(e.state, "catalog.db"),
		Warehouse: "file://" + filepath.Join(e.state, "warehouse")})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { lh.Close() })
	return lh
}

// forgetTables are the tables of examples/orders.yaml.
var forgetTables = []string{"bronze.orders", "silver.orders_quarantine", "silver.orders", "gold.daily_revenue_kpi"}

// rowStrings renders every row of a record stream, without the columns in skip.
func rowStrings(t *testing.T, recs func(func(arrow.RecordBatch, error) bool), skip ...string) []string {
	t.Helper()
	var out []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c, f := range rec.Schema().Fields() {
				if slices.Contains(skip, f.Name) {
					continue
				}
				fmt.Fprintf(&b, "%s=%s|", f.Name, rec.Column(c).ValueStr(i))
			}
			out = append(out, b.String())
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

// parquetCells renders every cell of a Parquet file, read directly (decompressed).
func parquetCells(t *testing.T, path string) []string {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer tbl.Release()
	var out []string
	for c := range int(tbl.NumCols()) {
		for _, chunk := range tbl.Column(c).Data().Chunks() {
			for i := range chunk.Len() {
				out = append(out, chunk.ValueStr(i))
			}
		}
	}
	return out
}

// subjectTokens are the subject's id and the order ids only the subject's lines hold.
func subjectTokens(t *testing.T, lines [][]byte, subject string) []string {
	t.Helper()
	owner := map[string]map[string]bool{}
	for _, l := range lines {
		var v struct {
			OrderID string `json:"order_id"`
			UserID  string `json:"user_id"`
		}
		if json.Unmarshal(l, &v) != nil || v.OrderID == "" {
			continue
		}
		if owner[v.OrderID] == nil {
			owner[v.OrderID] = map[string]bool{}
		}
		owner[v.OrderID][v.UserID] = true
	}
	tokens := []string{subject}
	for o, users := range owner {
		if len(users) == 1 && users[subject] {
			tokens = append(tokens, `"`+o+`"`, o+"\x00") // quoted in payloads; any trailing byte in columns
		}
	}
	if len(tokens) < 2 {
		t.Fatal("the subject owns no order")
	}
	return tokens
}

// TestForgetCascade is the acceptance test of issue 20's cascade: after
// `forget --confirm` no file under the warehouse holds the subject (raw bytes and
// decoded Parquet cells), no snapshot of any table returns them, Silver, the quarantine,
// Gold and ClickHouse's <t>_final equal a fresh build from the input without the
// subject's lines, check is clean, and a second forget changes nothing and says so.
func TestForgetCascade(t *testing.T) {
	e := newForgetEnv(t)
	e.run("demo", "generate", "--events", "3000", "--seed", "11")
	e.run("run")
	lines := landingLines(t, e.landing())
	subject := forgetSubject(t, e.landing())
	tokens := subjectTokens(t, lines, subject)
	var kept [][]byte
	subjectLines, invalidLines := 0, 0
	for _, l := range lines {
		if bytes.Contains(l, []byte(subject)) {
			subjectLines++
			if !json.Valid(l) {
				invalidLines++
			}
			continue
		}
		kept = append(kept, l)
	}
	if invalidLines == 0 { // the dry run's count and the quarantine's equality check them
		t.Fatal("the subject has no line that is not valid JSON: pick another seed")
	}

	// The oracle: a second state built from the input without the subject's lines.
	o := newForgetEnv(t)
	if err := os.MkdirAll(o.landing(), 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(e.landing(), "*.jsonl"))
	writeFile(t, filepath.Join(o.landing(), filepath.Base(files[0])), string(bytes.Join(kept, []byte("\n")))+"\n")
	o.run("run")

	where := "user_id = " + subject
	listing := func() []string {
		var out []string
		filepath.Walk(filepath.Join(e.state, "warehouse"), func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				out = append(out, p)
			}
			return nil
		})
		return out
	}
	before := listing()
	dry := e.run("forget", "orders", "--where", where, "--dry-run")
	if want := fmt.Sprintf("bronze.orders: %d rows in ", subjectLines); !strings.Contains(dry, want) {
		t.Errorf("dry run lacks %q:\n%s", want, dry)
	}
	if !strings.Contains(dry, "gold.daily_revenue_kpi: ") || !strings.Contains(dry, "partitions fed by the subject") || !strings.Contains(dry, "not reachable") {
		t.Errorf("dry run lacks the Gold partitions or the unreachable list:\n%s", dry)
	}
	if after := listing(); !slices.Equal(before, after) {
		t.Errorf("the dry run changed the warehouse: %d files before, %d after", len(before), len(after))
	}
	// Before the forget: ClickHouse's files hold the subject's uniqExact hash (so the
	// scan below can see it), and the Gold data files of each partition.
	hash := uniqExactHash(t, e, subject)
	chDir := filepath.Join(e.state, "clickhouse")
	if files := filesHolding(t, chDir, hash); len(files) == 0 {
		t.Fatalf("before the forget no file under %s holds the subject's uniqExact hash %x: the scan cannot see it", chDir, hash)
	}
	goldBefore := goldFilesByPartition(t, e.lakehouse(), "gold.daily_revenue_kpi")
	// Distinct customers over every served partition: one merge of the daily states.
	const merged = "SELECT uniqExactMerge(unique_customers__state) FROM marts.daily_revenue_kpi WHERE grouping_level = 'total' FORMAT TSV"
	mergedBefore := clean(e.run("clickhouse", "query", merged))
	out := e.run("forget", "orders", "--where", where, "--confirm")
	if strings.Contains(out, subject) {
		t.Errorf("forget printed the value:\n%s", out)
	}
	t.Logf("forget:\n%s", out)

	// Only the partitions the subject fed were recomputed (Gold) and pushed
	// (ClickHouse); every other Gold partition keeps its data files.
	recomputed := recomputedPartitions(t, out, "gold.daily_revenue_kpi")
	if len(recomputed) == 0 || len(recomputed) >= len(goldBefore) {
		t.Fatalf("recomputed %d of %d partitions", len(recomputed), len(goldBefore))
	}
	goldAfter := goldFilesByPartition(t, e.lakehouse(), "gold.daily_revenue_kpi")
	for p, files := range goldBefore {
		if slices.Contains(recomputed, p) {
			if slices.Equal(goldAfter[p], files) {
				t.Errorf("partition %s was fed by the subject but its files did not change", p)
			}
		} else if !slices.Equal(goldAfter[p], files) {
			t.Errorf("partition %s was not fed by the subject but was rewritten: %v -> %v", p, files, goldAfter[p])
		}
	}
	if pushed := pushedPartitions(t, out, "daily_revenue_kpi"); pushed == 0 || pushed > len(recomputed) {
		t.Errorf("the forget's sync pushed %d partitions; %d were recomputed", pushed, len(recomputed))
	}
	// No ClickHouse file (active or outdated part, dropped table) holds the subject.
	for _, tok := range [][]byte{hash, []byte(subject)} {
		if files := filesHolding(t, chDir, tok); len(files) > 0 {
			t.Errorf("after the forget %d ClickHouse files hold the subject (%q): %v", len(files), tok, files)
		}
	}

	// Byte scan of every file under the warehouse, and of every decoded Parquet cell.
	for _, p := range listing() {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range tokens[:1] {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s holds the subject's id", p)
			}
		}
		if filepath.Ext(p) != ".parquet" {
			continue
		}
		for _, cell := range parquetCells(t, p) {
			for _, tok := range tokens {
				if strings.Contains(cell+"\x00", tok) {
					t.Errorf("%s holds a cell of the subject: %.80s", p, cell)
				}
			}
		}
	}
	// Time travel: no snapshot of any table returns the subject.
	ctx := context.Background()
	lh := e.lakehouse()
	for _, ident := range forgetTables {
		tbl, err := lh.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tbl.Metadata().Snapshots() {
			_, recs, err := tbl.Scan(table.WithSnapshotID(s.SnapshotID)).ToArrowRecords(ctx)
			if err != nil {
				t.Fatalf("%s@%d: %v", ident, s.SnapshotID, err)
			}
			for _, r := range rowStrings(t, recs) {
				if strings.Contains(r, subject) {
					t.Fatalf("%s@%d returns the subject: %.200s", ident, s.SnapshotID, r)
				}
			}
		}
	}
	// Equal to the oracle: Silver's entity columns, the quarantine's payloads and
	// reasons, Gold without its run columns, ClickHouse's finished values.
	olh := o.lakehouse()
	compare := func(ident string, cols []string, skip ...string) {
		t.Helper()
		read := func(lh *catalog.Lakehouse) []string {
			tbl, err := lh.LoadTable(ctx, ident)
			if err != nil {
				t.Fatal(err)
			}
			opts := []table.ScanOption{}
			if cols != nil {
				opts = append(opts, table.WithSelectedFields(cols...))
			}
			_, recs, err := tbl.Scan(opts...).ToArrowRecords(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return rowStrings(t, recs, skip...)
		}
		got, want := read(lh), read(olh)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d rows after the forget, %d in the fresh build without the subject; first differences:\n%s",
				ident, len(got), len(want), firstDiff(got, want))
		}
	}
	compare("silver.orders", []string{"order_id", "user_id", "amount", "currency", "country", "category", "status", "created_at", "updated_at", "op", "is_deleted"})
	compare("silver.orders_quarantine", []string{silver.QColPayload, silver.QColReason})
	compare("gold.daily_revenue_kpi", nil, "_calculated_at", "_run_id")
	const final = "SELECT * FROM marts.daily_revenue_kpi_final ORDER BY ALL FORMAT TSV"
	if got, want := e.run("clickhouse", "query", final), o.run("clickhouse", "query", final); clean(got) != clean(want) {
		t.Errorf("daily_revenue_kpi_final differs from the fresh build's:\n%s", firstDiff(strings.Split(clean(got), "\n"), strings.Split(clean(want), "\n")))
	}
	mergedAfter, mergedFresh := clean(e.run("clickhouse", "query", merged)), clean(o.run("clickhouse", "query", merged))
	if n, _ := strconv.Atoi(mergedBefore); mergedAfter != mergedFresh || mergedAfter != strconv.Itoa(n-1) {
		t.Errorf("merged distinct customers: %s before the forget, %s after, %s in the fresh build (want before-1 = fresh)", mergedBefore, mergedAfter, mergedFresh)
	}
	if out := e.run("check"); !strings.Contains(out, "no drift") {
		t.Errorf("check after forget:\n%s", out)
	}
	// The pipeline goes on, and a second forget of the same subject changes nothing.
	e.run("run")
	before = listing()
	if out := e.run("forget", "orders", "--where", where, "--confirm"); !strings.Contains(out, "nothing was changed") {
		t.Errorf("second forget:\n%s", out)
	}
	if after := listing(); !slices.Equal(before, after) {
		t.Errorf("the second forget changed the warehouse: %d files before, %d after", len(before), len(after))
	}
	// The audit log: one record per finished forget, with the hash, never the value;
	// a forget of another subject (which expires every table's history again) leaves
	// both records readable.
	other := forgetSubject(t, e.landing(), subject)
	e.run("forget", "orders", "--where", "user_id = "+other, "--confirm")
	log := e.run("forget", "--log")
	records := strings.Split(clean(log), "\n")
	if len(records) != 2 {
		t.Fatalf("forget --log: want 2 records, got:\n%s", log)
	}
	for i, v := range []string{subject, other} {
		if strings.Contains(log, v) {
			t.Errorf("the audit log holds the value %s:\n%s", v, log)
		}
		if want := "orders user_id sha256:" + bronze.ValueHash(v); !strings.Contains(records[i], want) {
			t.Errorf("record %d lacks %q: %s", i, want, records[i])
		}
	}
	if !strings.Contains(records[0], `"bronze.orders":`+strconv.Itoa(subjectLines)) {
		t.Errorf("record 0 does not count the %d Bronze rows removed: %s", subjectLines, records[0])
	}
}

// clean drops the log lines a command prints beside its result.
func clean(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "time=") && l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func firstDiff(got, want []string) string {
	return diffLines(got, want, "after forget", "in fresh build")
}

// diffLines lists up to three rows only in got and three only in want, naming the sides.
func diffLines(got, want []string, gotName, wantName string) string {
	var b strings.Builder
	n := 0
	for _, g := range got {
		if !slices.Contains(want, g) && n < 3 {
			fmt.Fprintf(&b, "  only %s: %.300s\n", gotName, g)
			n++
		}
	}
	n = 0
	for _, w := range want {
		if !slices.Contains(got, w) && n < 3 {
			fmt.Fprintf(&b, "  only %s: %.300s\n", wantName, w)
			n++
		}
	}
	return b.String()
}

// nonEmptyLines is command output as its non-empty lines.
func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// compareRows fails t (Errorf) when got, goldbridge's rows, differ from want, the
// oracle's, naming what they are and the first differences.
func compareRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: %d rows, oracle %d; first differences:\n%s", what, len(got), len(want), diffLines(got, want, "in goldbridge's", "in the oracle's"))
	}
}

// uniqExactHash is the 16-byte element a uniqExact state of the String value v holds
// (its sipHash128), as ClickHouse itself serializes it.
func uniqExactHash(t *testing.T, e *forgetEnv, v string) []byte {
	t.Helper()
	out := clean(e.run("clickhouse", "query", "SELECT hex(uniqExactState(x)) FROM (SELECT '"+v+"' AS x) FORMAT TSV"))
	b, err := hex.DecodeString(strings.TrimSpace(out))
	if err != nil || len(b) != 17 || b[0] != 1 {
		t.Fatalf("uniqExact state of one value: %q (%v)", out, err)
	}
	return b[1:]
}

// filesHolding lists the files under dir whose bytes contain tok.
func filesHolding(t *testing.T, dir string, tok []byte) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, tok) {
			out = append(out, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// goldFilesByPartition maps each Gold partition (its grain, as forget prints it) to the
// sorted paths of its data files.
func goldFilesByPartition(t *testing.T, lh *catalog.Lakehouse, ident string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, task := range tasks {
		for _, v := range task.File.Partition() {
			p := fmt.Sprint(v)
			if d, ok := v.(iceberg.Date); ok {
				p = time.Unix(int64(d)*86400, 0).UTC().Format(time.DateOnly)
			}
			out[p] = append(out[p], task.File.FilePath())
		}
	}
	for p := range out {
		slices.Sort(out[p])
	}
	return out
}

// recomputedPartitions reads the partitions a forget's output lists for a Gold table.
func recomputedPartitions(t *testing.T, out, ident string) []string {
	t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(ident) + `: (\d+) partitions fed by the subject \(([^)]*)\)`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("forget output lists no partitions for %s:\n%s", ident, out)
	}
	n, _ := strconv.Atoi(m[1])
	parts := strings.Split(m[2], ", ")
	if n != len(parts) {
		t.Fatalf("forget output lists %d of %d partitions of %s (raise the limit in rowsText for this test)", len(parts), n, ident)
	}
	return parts
}

// pushedPartitions reads how many partitions a sync line of the output pushed.
func pushedPartitions(t *testing.T, out, mart string) int {
	t.Helper()
	m := regexp.MustCompile(`sync ` + mart + `: pushed (\d+) partitions`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no sync line for %s:\n%s", mart, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestShredThroughTheCLI: crypto-shredding as a user runs it on an entity with a pii
// section: the dry run names the tables and changes nothing, forget without --confirm
// or --dry-run is a usage error, --confirm deletes the key (Bronze untouched) and
// rebuilds Silver and Gold, where the subject's tier now reads as NULL and every other
// shopper's is as landed; a second shred of the same subject finds nothing to do.
func TestShredThroughTheCLI(t *testing.T) {
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "shred.yaml")
	if err := os.WriteFile(cfg, []byte(`version: 1
lakehouse:
  catalog: {type: sql}
  warehouse: file://${STATE_DIR}/warehouse
sources:
  shop_shoppers: {type: file, system: shop, path: "${STATE_DIR}/landing/shoppers", format: jsonl, settle: 0s}
entities:
  shoppers:
    sources: [shop_shoppers]
    pii: {subject: $.shopper_id, fields: [$.tier]}
    silver:
      mode: upsert
      key: [shopper_id]
      updated_at: updated_at
      columns:
        - {name: shopper_id, type: string, required: true}
        - {name: tier,       type: string}
        - {name: updated_at, type: timestamp, required: true}
marts:
  shoppers_by_tier:
    source: shoppers
    grain: {column: updated_at, unit: day, as: day}
    dimensions: [tier]
    measures: [{name: shoppers, agg: count}]
    serving: {enabled: false}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string, string) {
		return runCLI(t, append([]string{"-c", cfg, "--state-dir", state, "--log-level", "warn"}, args...)...)
	}
	gb := func(args ...string) string {
		t.Helper()
		code, out, errs := cli(args...)
		if code != exitOK {
			t.Fatalf("goldbridge %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, tail(errs, 3000))
		}
		return out
	}
	dir := filepath.Join(state, "landing", "shoppers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i, tier := range []string{"gold", "silver", "gold"} {
		lines = append(lines, fmt.Sprintf(`{"shopper_id":"s%d","tier":%q,"updated_at":"2026-01-01T00:0%d:00Z"}`, i+1, tier, i))
	}
	if err := os.WriteFile(filepath.Join(dir, "1.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tiers := func() map[string]string {
		t.Helper()
		lh, err := catalog.Open(context.Background(), catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"), Warehouse: "file://" + filepath.Join(state, "warehouse")})
		if err != nil {
			t.Fatal(err)
		}
		defer lh.Close()
		got := map[string]string{}
		for _, r := range tableRows(t, lh, "gold.shoppers_by_tier") {
			f := map[string]string{}
			for _, kv := range strings.Split(r, "|") {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			got[f["tier"]] = f["shoppers"]
		}
		return got
	}
	for _, stage := range []string{"ingest", "silver", "gold"} {
		gb(stage)
	}
	landed := map[string]string{"gold": "2", "silver": "1"}
	if got := tiers(); !maps.Equal(got, landed) {
		t.Fatalf("before: %v, want %v", got, landed)
	}
	if out := gb("forget", "shoppers", "--shred", "s1", "--dry-run"); !strings.Contains(out, "forget shoppers (dry run)") || !strings.Contains(out, "gold.shoppers_by_tier") {
		t.Fatalf("dry run:\n%s", out)
	}
	if code, _, errs := cli("forget", "shoppers", "--shred", "s1"); code != exitUsage || !strings.Contains(errs, "--confirm to shred") {
		t.Fatalf("forget without --confirm: exit %d\n%s", code, errs)
	}
	if got := tiers(); !maps.Equal(got, landed) {
		t.Fatalf("after the dry run: %v, want %v", got, landed)
	}
	if out := gb("forget", "shoppers", "--shred", "s1", "--confirm"); !strings.Contains(out, "shredded (key deleted; Bronze untouched)") {
		t.Fatalf("shred:\n%s", out)
	}
	if got, want := tiers(), map[string]string{"gold": "1", "silver": "1", "(null)": "1"}; !maps.Equal(got, want) {
		t.Fatalf("after the shred: %v, want %v", got, want)
	}
	if out := gb("forget", "shoppers", "--shred", "s1", "--confirm"); !strings.Contains(out, "no key and no rows for") {
		t.Fatalf("second shred:\n%s", out)
	}
}
