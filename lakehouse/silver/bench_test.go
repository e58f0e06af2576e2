package silver

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"goldbridge/demo"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/lakehousetest"
)

// benchBatch builds a Bronze-shaped Arrow batch of n demo-like order payloads.
func benchBatch(n int) arrow.RecordBatch {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: bronze.ColPayload, Type: arrow.BinaryTypes.String},
		{Name: bronze.ColEventID, Type: arrow.BinaryTypes.String},
		{Name: bronze.ColIngestTS, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: bronze.ColFile, Type: arrow.BinaryTypes.String},
	}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer bld.Release()
	countries := []string{"US", "PL", "DE", "FR", "GB"}
	for i := range n {
		id := strconv.Itoa(100000 + i%(n/3+1))
		bld.Field(0).(*array.StringBuilder).Append(`{"order_id":"o-` + id + `","user_id":"u-` + strconv.Itoa(i%9973) +
			`","amount":` + strconv.Itoa(i%10000) + `.25,"currency":"USD","country":"` + countries[i%5] +
			`","category":"home","status":"paid","created_at":"2026-08-26T05:39:22Z","updated_at":"2026-08-31T00:00:` +
			strconv.Itoa(10+i%50) + `.478Z","op":"u"}`)
		bld.Field(1).(*array.StringBuilder).Append("b9d1c1f2-3a4b-4c5d-8e6f-" + strconv.Itoa(100000000000+i))
		bld.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(1_780_000_000_000_000))
		bld.Field(3).(*array.StringBuilder).Append("/landing/orders-00001.jsonl")
	}
	return bld.NewRecordBatch()
}

// BenchmarkSilverParse types Bronze rows on one parse worker (JSON parse, typing,
// rules, key), the per-core share of a Silver run: by the flat path (flatjson.go) and
// by the general one.
func BenchmarkSilverParse(b *testing.B) {
	for _, path := range []string{"flat", "general"} {
		b.Run(path, func(b *testing.B) {
			e, err := newEngine(ordersSpec(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			rec := benchBatch(chunkRows)
			defer rec.Release()
			pw, err := e.newParseWorker()
			if err != nil {
				b.Fatal(err)
			}
			if path == "general" {
				pw.parser.flat = nil
			}
			c := &chunk{b: newBronzeBatch(rec), n: chunkRows}
			b.ReportAllocs()
			for b.Loop() {
				pw.parse(c, len(e.cols))
			}
			b.ReportMetric(float64(b.N*chunkRows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkSilverConsume runs the parse workers and the ordered merge into the winners
// over in-memory Bronze batches (no Parquet read or write).
func BenchmarkSilverConsume(b *testing.B) {
	const batches, rows = 8, 16384
	recs := make([]arrow.RecordBatch, batches)
	for i := range recs {
		recs[i] = benchBatch(rows)
		defer recs[i].Release()
	}
	b.ReportAllocs()
	for b.Loop() {
		e, err := newEngine(ordersSpec(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		seq := func(yield func(arrow.RecordBatch, error) bool) {
			for _, r := range recs {
				r.Retain()
				if !yield(r, nil) {
					return
				}
			}
		}
		if err := e.consume(context.Background(), seq, sinkSilver|sinkQuarantine); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batches*rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkSilverRun is a full Silver build (Bronze scan, typing, dedup, Parquet write,
// commits) over a demo stream ingested once: 100k events by default,
// SILVER_BENCH_EVENTS=<n> for more.
func BenchmarkSilverRun(b *testing.B) {
	events := int64(100_000)
	if v := os.Getenv("SILVER_BENCH_EVENTS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		events = n
	}
	dir := b.TempDir()
	lh := lakehousetest.Open(b)
	if _, err := demo.Generate(context.Background(), demo.Options{OutDir: dir, Events: events, Seed: 42, Files: 1,
		End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		b.Fatal(err)
	}
	src := bronze.FileSource{Name: "landing", System: "shop_file", Dir: dir}
	if _, err := bronze.IngestFiles(context.Background(), lh, "bronze.orders", []bronze.FileSource{src}, bronze.Options{}); err != nil {
		b.Fatal(err)
	}
	var read int64
	for b.Loop() {
		res, err := Replay(context.Background(), lh, ordersSpec(), "bronze.orders", Options{})
		if err != nil {
			b.Fatal(err)
		}
		read += res.Read
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "rows/s")
}

func TestEventIDPacking(t *testing.T) {
	w := newWinners([]ColumnSpec{{Name: "k", Type: Type{Kind: String}}})
	for i, id := range []string{
		"b9d1c1f2-3a4b-4c5d-8e6f-708192a3b4c5", // canonical: packed
		"B9D1C1F2-3A4B-4C5D-8E6F-708192A3B4C5", // upper case: kept as is
		"b9d1c1f2-3a4b-4c5d-8e6f-708192a3b4c",  // short
		"b9d1c1f2x3a4b-4c5d-8e6f-708192a3b4c5", // misplaced dash
		"kafka:orders:0:42",
		"",
	} {
		key := strconv.Itoa(i)
		w.offer(keyHash(key), key, []Value{{S: key}}, version{}, 'c', id, 0)
		got := string(w.appendEventID(nil, w.len()-1))
		if got != id {
			t.Errorf("event id %q came back as %q", id, got)
		}
	}
	if len(w.otherIDs) != 5 {
		t.Errorf("otherIDs = %d, want 5 (only the canonical id is packed)", len(w.otherIDs))
	}
}

// parseCanonicalUUID accepts exactly the strings that formatting its bytes gives back.
func TestParseCanonicalUUIDRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const alphabet = "0123456789abcdefABCDEF-g \x00\xff"
	accepted := 0
	for range 100_000 {
		var u [16]byte
		for i := range u {
			u[i] = byte(rng.Uint32())
		}
		s := []byte(uuid.UUID(u).String())
		for range rng.IntN(3) { // 0-2 random edits
			s[rng.IntN(len(s))] = alphabet[rng.IntN(len(alphabet))]
		}
		got, ok := parseCanonicalUUID(string(s))
		if want := uuid.UUID(got).String() == string(s); ok != want {
			t.Fatalf("%q: ok %v, but formatting the bytes back gives %q", s, ok, uuid.UUID(got).String())
		}
		if ok {
			accepted++
		}
	}
	if accepted < 20_000 || accepted > 80_000 {
		t.Fatalf("%d of 100000 accepted: the test proves little", accepted)
	}
}
