package bronze

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"goldbridge/demo"
	"goldbridge/lakehouse/lakehousetest"
)

// BenchmarkIngest ingests a demo landing file of ~200-byte JSON lines (100k by default;
// BRONZE_BENCH_EVENTS=<n> for more) into a fresh Bronze table per iteration and reports
// lines/s and MB/s. The target is ≥ 500k lines/s on 2 cores.
func BenchmarkIngest(b *testing.B) {
	events := int64(100_000)
	if v := os.Getenv("BRONZE_BENCH_EVENTS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		events = n
	}
	dir := b.TempDir()
	if _, err := demo.Generate(context.Background(), demo.Options{OutDir: dir, Events: events, Seed: 42, Files: 1,
		End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	var size int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			size += fi.Size()
		}
	}
	src := FileSource{Name: "landing", System: "shop_file", Dir: dir}
	b.SetBytes(size)
	b.ReportAllocs()
	var rows int64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		lh := lakehousetest.Open(b)
		b.StartTimer()
		res, err := IngestFiles(context.Background(), lh, "bronze.orders", []FileSource{src}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		rows += res.Rows
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkBatchWriter measures building Bronze Arrow batches alone (no Parquet).
func BenchmarkBatchWriter(b *testing.B) {
	line := []byte(`{"order_id":"o-000063729","user_id":"u-0005849","amount":59.44,"currency":"USD","country":"US","category":"home","status":"paid","created_at":"2026-08-26T05:39:22Z","updated_at":"2026-08-31T00:00:09.478Z","op":"u"}`)
	w := newBatchWriter("b9d1c1f2-3a4b-4c5d-8e6f-708192a3b4c5", 16384)
	defer w.release()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		w.add(line, "shop_file", "/landing/orders-00001.jsonl", 0, time.Time{})
		if w.n == 16384 {
			w.flush().Release()
		}
	}
}
