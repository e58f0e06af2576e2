package silver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// The keyless facts of issue 37: US domestic flights have no id, and two rows identical
// in every column are two flights. identity: delivery keeps every delivered record and
// drops only the same record delivered again.

const flightsBronze = "bronze.flights"

// flightsSpec is the flights entity with one of the anti-join variants.
func flightsSpec(variant string) EntitySpec {
	t := func(s string) Type { ty, _ := ParseType(s); return ty }
	col := func(name, typ string, req bool) ColumnSpec {
		return ColumnSpec{Name: name, Path: "$." + name, Type: t(typ), Required: req}
	}
	spec := EntitySpec{
		Name: "flights", Table: "silver.flights", QuarantineTable: "silver.flights_quarantine",
		Mode: ModeAppend, Identity: IdentityDelivery, EventTime: "dep", Buckets: 4,
		Columns: []ColumnSpec{
			col("carrier", "string", true), col("flight", "int64", false), col("origin", "string", false),
			col("dest", "string", false), col("dep", "timestamp", true), col("dep_delay", "int64", false),
			col("distance", "int64", false),
		},
		Rules:             []RuleSpec{{ID: "F1", Kind: "filter", Expr: "distance > 0", Reason: "bad_distance"}},
		WarnQuarantinePct: 50, WarnDuplicatePct: 100,
	}
	switch variant {
	case "keys_table":
		spec.KeysTable = "silver.flights_keys"
	case "lookback":
		spec.Lookback = time.Hour
	case "no_event_time":
		spec.EventTime = "" // bucketed on _delivery_id
	}
	return spec
}

var flightVariants = []string{"keys_table", "lookback", "unbounded", "no_event_time"}

type flight struct {
	Carrier  string `json:"carrier"`
	Flight   int64  `json:"flight"`
	Origin   string `json:"origin"`
	Dest     string `json:"dest"`
	Dep      string `json:"dep"`
	DepDelay int64  `json:"dep_delay"`
	Distance int64  `json:"distance"`
}

// flightLines returns n distinct flights, pairs of which appear a second time, identical,
// further on; and two lines Silver quarantines.
func flightLines(seed uint64, n, pairs int) []string {
	rng := rand.New(rand.NewPCG(seed, 37))
	carriers, airports := []string{"AA", "DL", "UA", "WN"}, []string{"ATL", "DFW", "DEN", "ORD", "LAX", "JFK"}
	lines := make([]string, 0, n+pairs+2)
	for i := range n {
		f := flight{
			Carrier: carriers[rng.IntN(len(carriers))], Flight: int64(100 + i), Origin: airports[rng.IntN(len(airports))],
			Dest: airports[rng.IntN(len(airports))], DepDelay: int64(rng.IntN(90) - 10), Distance: int64(100 + rng.IntN(2500)),
			Dep: time.Date(2024, 1, 1+i%5, 6+rng.IntN(16), 5*rng.IntN(12), 0, 0, time.UTC).Format(time.RFC3339),
		}
		b, _ := json.Marshal(f)
		lines = append(lines, string(b))
	}
	distinct := slices.Clone(lines)
	for i := range pairs { // the second flight of each pair lands later in the file
		at := n/2 + rng.IntN(len(lines)-n/2+1)
		lines = slices.Insert(lines, at, distinct[i*n/pairs])
	}
	return append(lines, `{"carrier":"AA","flight":1,"dep":"2024-01-02T10:00:00Z","distance":-5}`, `{"carrier":`)
}

// flightOracle types landing files the way the entity is specified, by hand, and names
// each row by where it sits in its file and its bytes: the expected Silver rows, one per
// delivered record (a record delivered again is the same row).
type flightOracle struct {
	rows        map[string]string // by delivery id
	quarantined int
}

// file adds every non-blank line of content (the bytes of the file at path, decompressed)
// at its offset.
func (o *flightOracle) file(path string, content []byte) {
	off := 0
	for line := range bytes.Lines(content) {
		if s := strings.TrimSuffix(string(line), "\n"); strings.TrimSpace(s) != "" {
			o.record(path, int64(off), s)
		}
		off += len(line)
	}
}

// record adds one delivered record at pos of source.
func (o *flightOracle) record(source string, pos int64, payload string) {
	var f struct {
		Carrier, Origin, Dest, Dep *string
		Flight                     *int64
		DepDelay                   *int64 `json:"dep_delay"`
		Distance                   *int64
	}
	if err := json.Unmarshal([]byte(payload), &f); err != nil || f.Carrier == nil || f.Dep == nil || f.Distance == nil || *f.Distance <= 0 {
		o.quarantined++
		return
	}
	if _, err := time.Parse(time.RFC3339, *f.Dep); err != nil {
		o.quarantined++
		return
	}
	id := fmt.Sprintf("%s@%d#%016x", source, pos, xxhash.Sum64String(payload))
	if o.rows == nil {
		o.rows = map[string]string{}
	}
	o.rows[id] = fmt.Sprintf("carrier=%s|flight=%d|origin=%s|dest=%s|dep=%s|dep_delay=%d|distance=%d|%s=%s",
		*f.Carrier, *f.Flight, *f.Origin, *f.Dest, *f.Dep, *f.DepDelay, *f.Distance, ColDeliveryID, id)
}

func (o *flightOracle) want() []string {
	return slices.Sorted(maps.Values(o.rows))
}

// checkFlights compares Silver with the oracle, row for row (identical flights each
// once per delivered record, named by their delivery).
func checkFlights(t *testing.T, lh *catalog.Lakehouse, spec EntitySpec, what string, o *flightOracle) {
	t.Helper()
	got, want := tableRows(t, lh, spec.Table, appendSkip...), o.want()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: silver has %d rows, the oracle %d; first difference %s", what, len(got), len(want), firstDifference(got, want))
	}
	if spec.KeysTable != "" {
		keys := tableRows(t, lh, spec.KeysTable)
		ids := colValues(got, ColDeliveryID)
		slices.Sort(ids)
		if !slices.Equal(colValues(keys, ColDeliveryID), ids) {
			t.Fatalf("%s: keys table %d keys, silver %d rows", what, len(keys), len(ids))
		}
	}
}

func firstDifference(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("after %d rows", min(len(got), len(want)))
}

// withoutIdentity strips the delivery id: what the flight looks like.
func withoutIdentity(rows []string) map[string]int {
	out := map[string]int{}
	for _, r := range rows {
		r, _, _ = strings.Cut(r, "|"+ColDeliveryID+"=")
		out[r]++
	}
	return out
}

func silverRun(t *testing.T, lh *catalog.Lakehouse, spec EntitySpec, replay bool, opt Options) Result {
	t.Helper()
	f := Run
	if replay {
		f = Replay
	}
	res, err := f(context.Background(), lh, spec, flightsBronze, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Quality.Balanced {
		t.Fatalf("counts do not add up: %+v", res.Counts)
	}
	return res
}

// TestKeylessFactsKeepIdenticalRows lands a file of 400 flights, 191 of which are there
// twice, identical in every column, as two real flights are: Silver holds 591 rows, each
// pair twice, with every anti-join variant; replay (in one pass and in passes) gives the
// same rows, and so does a run with nothing new.
func TestKeylessFactsKeepIdenticalRows(t *testing.T) {
	for _, variant := range flightVariants {
		t.Run(variant, func(t *testing.T) {
			lh := lakehousetest.Open(t)
			landing := t.TempDir()
			spec := flightsSpec(variant)
			writeLanding(t, landing, "2024-01.jsonl", flightLines(1, 400, 191)...)
			ingestInto(t, lh, flightsBronze, landing)
			o := &flightOracle{}
			path := filepath.Join(landing, "2024-01.jsonl")
			content, _ := os.ReadFile(path)
			o.file(path, content)

			res := silverRun(t, lh, spec, false, Options{})
			if want := (Counts{Read: 593, Current: 591, Inserted: 591, Quarantined: 2}); res.Counts != want || o.quarantined != 2 {
				t.Fatalf("counts %+v, want %+v (oracle quarantined %d)", res.Counts, want, o.quarantined)
			}
			checkFlights(t, lh, spec, "run", o)
			twice := 0
			for _, n := range withoutIdentity(tableRows(t, lh, spec.Table, appendSkip...)) {
				if n == 2 {
					twice++
				}
			}
			if twice != 191 {
				t.Fatalf("%d flights are in Silver twice, want the 191 pairs", twice)
			}
			if res := silverRun(t, lh, spec, false, Options{}); res.SnapshotID != 0 || res.Read != 0 {
				t.Fatalf("a run with nothing new: %+v", res)
			}
			silverRun(t, lh, spec, true, Options{})
			checkFlights(t, lh, spec, "replay", o)
			if res := silverRun(t, lh, spec, true, Options{PassRows: 1}); res.Passes < 2 {
				t.Fatalf("replay in %d passes, want several", res.Passes)
			}
			checkFlights(t, lh, spec, "replay in passes", o)
		})
	}
}

// TestRowHashKeyMergesIdenticalFacts pins what the row-hash key (a key derived from
// every column, as examples/taxi.yaml does for trips) does to the same file: the second
// flight of each identical pair is taken for a re-delivery of the first and dropped,
// 591 flights become 400 (docs/silver.md, "Facts without a natural key").
func TestRowHashKeyMergesIdenticalFacts(t *testing.T) {
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	spec := flightsSpec("keys_table")
	spec.Identity, spec.Key = IdentityKey, []string{"row_key"}
	spec.Rules = append(spec.Rules, RuleSpec{ID: "E0", Kind: "derive", Column: "row_key", Type: "string",
		Expr: "hash(carrier, flight, origin, dest, dep, dep_delay, distance)"})
	writeLanding(t, landing, "2024-01.jsonl", flightLines(1, 400, 191)...)
	ingestInto(t, lh, flightsBronze, landing)
	res := silverRun(t, lh, spec, false, Options{})
	if want := (Counts{Read: 593, Current: 400, Inserted: 400, Duplicates: 191, Quarantined: 2}); res.Counts != want {
		t.Fatalf("counts %+v, want %+v", res.Counts, want)
	}
}

// TestKeylessRedelivery delivers flights again in every way a file source can, with
// identical flights in each file, and checks Silver against the oracle of the files'
// final contents after each step: a file ingested after a run that failed before its
// commit, copied again under the same path (the next run reads it once); the same
// unchanged file ingested again and copied again (nothing new); a gzip file that changed
// and was read again whole with --reingest (Bronze holds its first lines twice: only the
// new line is appended); a file that grew between two runs, with lines identical to
// earlier ones (each line once). Replay gives the same rows.
func TestKeylessRedelivery(t *testing.T) {
	for _, variant := range flightVariants {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			lh := lakehousetest.Open(t)
			landing := t.TempDir()
			spec := flightsSpec(variant)
			o := &flightOracle{}
			run := func(what string, want Counts) {
				t.Helper()
				res := silverRun(t, lh, spec, false, Options{})
				if res.Counts != want {
					t.Fatalf("%s: counts %+v, want %+v", what, res.Counts, want)
				}
			}

			// A run that fails before its commit, then the file copied again.
			a := filepath.Join(landing, "a.jsonl")
			writeLanding(t, landing, "a.jsonl", flightLines(2, 40, 12)...)
			cctx, cancel := context.WithCancel(ctx)
			// The run stops after reading the file, before its commit.
			if _, err := ingestFlights(cctx, lh, landing, bronze.Options{Progress: func(int64, int64) { cancel() }}); err == nil {
				t.Fatal("the interrupted ingest committed")
			}
			if n := bronzeRows(t, lh); n != 0 {
				t.Fatalf("the interrupted ingest left %d rows", n)
			}
			writeLanding(t, landing, "a.jsonl", flightLines(2, 40, 12)...)
			mustIngest(t, lh, landing, false, 54)
			content, _ := os.ReadFile(a)
			o.file(a, content)
			run("first delivery", Counts{Read: 54, Current: 52, Inserted: 52, Quarantined: 2})
			checkFlights(t, lh, spec, "first delivery", o)

			// The same file again: unchanged, then copied over itself.
			mustIngest(t, lh, landing, false, 0)
			writeLanding(t, landing, "a.jsonl", flightLines(2, 40, 12)...)
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(a, later, later); err != nil {
				t.Fatal(err)
			}
			mustIngest(t, lh, landing, false, 0)
			run("nothing new", Counts{})

			// A changed gzip file read again whole: Bronze holds its unchanged lines twice,
			// at the same positions. A line rewritten in place (same length, another
			// carrier) is another record: the flight read the first time stays.
			b := filepath.Join(landing, "b.jsonl.gz")
			gz := flightLines(3, 20, 6)
			gz = gz[:len(gz)-2] // without the bad lines
			writeGzip(t, b, gz)
			mustIngest(t, lh, landing, false, 26)
			run("gzip", Counts{Read: 26, Current: 26, Inserted: 26})
			o.file(b, []byte(strings.Join(gz, "\n")+"\n"))
			more := append(slices.Clone(gz), gz[0]) // one more flight, identical to the first
			more[5] = `{"carrier":"XX"` + more[5][len(`{"carrier":"AA"`):]
			writeGzip(t, b, more)
			mustIngest(t, lh, landing, true, 27)
			run("reingest", Counts{Read: 27, Current: 2, Inserted: 2, Duplicates: 25})
			o.file(b, []byte(strings.Join(more, "\n")+"\n"))
			checkFlights(t, lh, spec, "reingest", o)

			// A growing file read in two runs.
			c := filepath.Join(landing, "c.jsonl")
			grow := flightLines(4, 30, 10)
			writeLanding(t, landing, "c.jsonl", grow[:20]...)
			mustIngest(t, lh, landing, false, 20)
			run("first half", Counts{Read: 20, Current: 20, Inserted: 20})
			rest := append(slices.Clone(grow[20:]), grow[0], grow[0], grow[1])
			appendLines(t, c, rest)
			mustIngest(t, lh, landing, false, int64(len(rest)))
			run("grown", Counts{Read: int64(len(rest)), Current: int64(len(rest)) - 2, Inserted: int64(len(rest)) - 2, Quarantined: 2})
			content, _ = os.ReadFile(c)
			o.file(c, content)
			checkFlights(t, lh, spec, "grown", o)

			silverRun(t, lh, spec, true, Options{})
			checkFlights(t, lh, spec, "replay", o)
		})
	}
}

// ingestFlights ingests the landing directory dir into flightsBronze and returns the rows
// it landed.
func ingestFlights(ctx context.Context, lh *catalog.Lakehouse, dir string, opt bronze.Options) (int64, error) {
	src := bronze.FileSource{Name: "landing", System: "bts_file", Dir: dir}
	res, err := bronze.IngestFiles(ctx, lh, flightsBronze, []bronze.FileSource{src}, opt)
	return res.Rows, err
}

func mustIngest(t *testing.T, lh *catalog.Lakehouse, dir string, reingest bool, rows int64) {
	t.Helper()
	n, err := ingestFlights(context.Background(), lh, dir, bronze.Options{Reingest: reingest})
	if err != nil || n != rows {
		t.Fatalf("ingest: %d rows (%v), want %d", n, err, rows)
	}
}

func writeGzip(t *testing.T, path string, lines []string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendLines(t *testing.T, path string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func bronzeRows(t *testing.T, lh *catalog.Lakehouse) int {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), flightsBronze)
	if err != nil {
		return 0
	}
	if tbl.CurrentSnapshot() == nil {
		return 0
	}
	n, _ := strconv.Atoi(tbl.CurrentSnapshot().Summary.Properties["total-records"])
	return n
}

// TestKeylessKafkaRedelivery reads flights from a Kafka topic (kfake), identical values
// among them: every record is a flight. The consumer group losing its commit (reset to
// the start) re-reads nothing, since Bronze resumes from the offsets it recorded; records
// that reach Bronze a second time at the same offsets (an upstream re-delivery, written
// here through Bronze's Emit seam) are duplicates; identical values produced again are new
// records at new offsets, new flights. Replay gives the same rows.
func TestKeylessKafkaRedelivery(t *testing.T) {
	for _, variant := range flightVariants {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			lh := lakehousetest.Open(t)
			spec := flightsSpec(variant)
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "flights"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cluster.Close)
			src := bronze.KafkaSource{Name: "bts", System: "bts_kafka", Brokers: cluster.ListenAddrs(), Topic: "flights",
				Group: "goldbridge-flights", PollTimeout: 2 * time.Second}
			o := &flightOracle{}
			var produced []string // by offset
			produce := func(values []string) {
				t.Helper()
				cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				for _, v := range values {
					r := &kgo.Record{Topic: "flights", Value: []byte(v)}
					if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
						t.Fatal(err)
					}
					o.record(fmt.Sprintf("flights:0:%d", r.Offset), r.Offset, v)
					produced = append(produced, v)
				}
			}
			ingest := func(what string, rows int64) {
				t.Helper()
				res, err := bronze.IngestKafka(ctx, lh, flightsBronze, src, bronze.Options{})
				if err != nil || res.Rows != rows {
					t.Fatalf("%s: ingested %d rows (%v), want %d", what, res.Rows, err, rows)
				}
			}
			run := func(what string, want Counts) {
				t.Helper()
				if res := silverRun(t, lh, spec, false, Options{}); res.Counts != want {
					t.Fatalf("%s: counts %+v, want %+v", what, res.Counts, want)
				}
				checkFlights(t, lh, spec, what, o)
			}

			produce(flightLines(5, 30, 10))
			ingest("first", 42)
			run("first", Counts{Read: 42, Current: 40, Inserted: 40, Quarantined: 2})

			adm := kadm.NewClient(mustClient(t, cluster.ListenAddrs()))
			offsets := kadm.Offsets{}
			offsets.Add(kadm.Offset{Topic: "flights", Partition: 0, At: 0})
			if _, err := adm.CommitOffsets(ctx, src.Group, offsets); err != nil {
				t.Fatal(err)
			}
			ingest("group reset", 0)
			run("group reset", Counts{})

			redeliver(t, lh, produced[:15])
			run("redelivered", Counts{Read: 15, Duplicates: 15})

			produce(produced[:3])
			ingest("produced again", 3)
			run("produced again", Counts{Read: 3, Current: 3, Inserted: 3})

			silverRun(t, lh, spec, true, Options{})
			checkFlights(t, lh, spec, "replay", o)
		})
	}
}

func mustClient(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// redeliver lands the records at offsets 0.. of flights:0 in Bronze again, as the Kafka
// ingest wrote them the first time.
func redeliver(t *testing.T, lh *catalog.Lakehouse, values []string) {
	t.Helper()
	ctx := context.Background()
	run, err := bronze.NewRun(ctx, lh, flightsBronze, bronze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Write(ctx, func(emit bronze.Emit) error {
		for off, v := range values {
			if err := emit([]byte(v), "bts_kafka", fmt.Sprintf("flights:0:%d", off), int64(off), time.Time{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Commit(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// TestKeylessUndatedBronzeRows runs an entity with identity: delivery over a Bronze
// table created before Bronze recorded positions: its rows, two identical ones among
// them, are each a delivery of their own, named by their _event_id, and the run says how
// many there are. After an ingest adds the column (older files lack it), the new rows are
// named by their positions; replay gives the same rows.
func TestKeylessUndatedBronzeRows(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	spec := flightsSpec("unbounded")
	old := iceberg.NewSchema(0, bronze.Schema().Fields()[:7]...)
	if _, _, err := lh.LoadOrCreateTable(ctx, flightsBronze, old, bronze.PartitionSpec(), bronze.TableProperties(catalog.DefaultCodec())); err != nil {
		t.Fatal(err)
	}
	same := flightLines(6, 1, 0)[0]
	ids := commitUndated(t, lh, "/landing/old.jsonl", same, same)
	var logs bytes.Buffer
	res := silverRun(t, lh, spec, false, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if want := (Counts{Read: 2, Current: 2, Inserted: 2}); res.Counts != want {
		t.Fatalf("counts %+v, want %+v", res.Counts, want)
	}
	if !strings.Contains(logs.String(), "without a _source_pos") || !strings.Contains(logs.String(), "rows=2") {
		t.Fatalf("no warning about the 2 rows without a position:\n%s", logs.String())
	}
	got := colValues(tableRows(t, lh, spec.Table), ColDeliveryID)
	want := []string{"/landing/old.jsonl@event:" + ids[0], "/landing/old.jsonl@event:" + ids[1]}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("delivery ids %v, want %v", got, want)
	}

	landing := t.TempDir()
	writeLanding(t, landing, "new.jsonl", same, same)
	mustIngest(t, lh, landing, false, 2)
	if res := silverRun(t, lh, spec, false, Options{}); res.Current != 2 {
		t.Fatalf("new rows: %+v", res.Counts)
	}
	path := filepath.Join(landing, "new.jsonl")
	h := xxhash.Sum64String(same)
	want = append(want, fmt.Sprintf("%s@0#%016x", path, h), fmt.Sprintf("%s@%d#%016x", path, len(same)+1, h))
	slices.Sort(want)
	before := tableRows(t, lh, spec.Table, appendSkip...)
	if got := colValues(before, ColDeliveryID); !slices.Equal(got, want) {
		t.Fatalf("delivery ids %v, want %v", got, want)
	}
	silverRun(t, lh, spec, true, Options{})
	if got := tableRows(t, lh, spec.Table, appendSkip...); !slices.Equal(got, before) {
		t.Fatalf("replay:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
}

// commitUndated commits payloads to flightsBronze as Bronze wrote them before it had
// _source_pos, and returns their event ids.
func commitUndated(t *testing.T, lh *catalog.Lakehouse, file string, payloads ...string) []string {
	t.Helper()
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	sch := arrow.NewSchema([]arrow.Field{
		{Name: bronze.ColPayload, Type: arrow.BinaryTypes.String}, {Name: bronze.ColIngestTS, Type: ts},
		{Name: bronze.ColSystem, Type: arrow.BinaryTypes.String}, {Name: bronze.ColFile, Type: arrow.BinaryTypes.String},
		{Name: bronze.ColEventID, Type: arrow.BinaryTypes.String}, {Name: bronze.ColBatchID, Type: arrow.BinaryTypes.String},
		{Name: bronze.ColSourceTS, Type: ts, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	var ids []string
	for i, p := range payloads {
		ids = append(ids, fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		b.Field(0).(*array.StringBuilder).Append(p)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Now().UnixMicro()))
		b.Field(2).(*array.StringBuilder).Append("bts_file")
		b.Field(3).(*array.StringBuilder).Append(file)
		b.Field(4).(*array.StringBuilder).Append(ids[i])
		b.Field(5).(*array.StringBuilder).Append("old")
		b.Field(6).AppendNull()
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	_, err := lh.Commit(context.Background(), flightsBronze, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.AppendTable(ctx, array.NewTableFromRecords(sch, []arrow.RecordBatch{rec}), 16, nil); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestIdentitySpec checks the specs an identity refuses, each with its reason.
func TestIdentitySpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*EntitySpec)
		err  string // "" = accepted
	}{
		{"delivery", func(*EntitySpec) {}, ""},
		{"upsert", func(s *EntitySpec) { s.Mode, s.UpdatedAt = ModeUpsert, "dep" }, "identity delivery is for append mode"},
		{"with a key", func(s *EntitySpec) { s.Key = []string{"flight"} }, "identity delivery takes no key"},
		{"unknown", func(s *EntitySpec) { s.Identity = "row" }, `identity "row": want key or delivery`},
		{"no key", func(s *EntitySpec) { s.Identity = IdentityKey }, "no key columns"},
		{"its column declared", func(s *EntitySpec) {
			s.Columns = append(s.Columns, ColumnSpec{Name: ColDeliveryID, Path: "$.id", Type: Type{Kind: String}})
		}, "column _delivery_id: goldbridge adds it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := flightsSpec("unbounded")
			tc.edit(&spec)
			e, err := newEngine(spec, Options{})
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && (!slices.Equal(e.spec.Key, []string{ColDeliveryID}) || e.cols[e.deliveryIdx].Name != ColDeliveryID):
				t.Fatalf("key %v, delivery column %d", e.spec.Key, e.deliveryIdx)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}
