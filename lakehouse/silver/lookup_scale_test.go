package silver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"goldbridge/demo"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestLookupScale times the Silver part of a +10k-event incremental run over stored
// bases of several sizes, built as bench/scale.sh builds them (demo seed 42, the tail of
// the stream held back), side by side in one process: every base is built first, then
// each round lands the next 10k held-back events on every base in turn, and the
// medians of the rounds are reported. It runs only with SILVER_LOOKUP_SCALE="<events>
// <events>...", e.g. "1000000 3000000" (SILVER_LOOKUP_ROUNDS rounds, default 3); the
// data lives in the test's temporary directories (TMPDIR).
func TestLookupScale(t *testing.T) {
	sizes := strings.Fields(os.Getenv("SILVER_LOOKUP_SCALE"))
	if len(sizes) == 0 {
		t.Skip(`set SILVER_LOOKUP_SCALE="1000000 3000000"`)
	}
	rounds := 3
	if v := os.Getenv("SILVER_LOOKUP_ROUNDS"); v != "" {
		var err error
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			t.Fatalf("SILVER_LOOKUP_ROUNDS=%q", v)
		}
	}
	const tail = 10_000
	spec := ordersSpec()
	spec.Buckets, spec.SortBy = 16, []string{"created_at"} // as examples/orders.yaml
	type base struct {
		n              int64
		lh             *catalog.Lakehouse
		landing, held  string
		full           time.Duration
		inc, res, rest []time.Duration
		scan, write    []time.Duration // the rest's Bronze scan and its write and commit
		lookup         string
	}
	ctx := context.Background()
	var bases []*base
	for _, s := range sizes {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		gen := t.TempDir()
		if _, err := demo.Generate(ctx, demo.Options{OutDir: gen, Events: n + int64(rounds*tail), Seed: 42, Files: int((n + 249_999) / 250_000),
			End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(gen, "*.jsonl"))
		b := &base{n: n, lh: lakehousetest.Open(t), landing: t.TempDir(), held: t.TempDir()}
		for _, f := range files[:len(files)-1] {
			moveTo(t, f, b.landing)
		}
		splitTail(t, files[len(files)-1], tail, rounds, b.landing, b.held)
		ingest(t, b.lh, b.landing)
		start := time.Now()
		if _, err := Run(ctx, b.lh, spec, "bronze.orders", Options{}); err != nil {
			t.Fatal(err)
		}
		b.full = time.Since(start)
		bases = append(bases, b)
	}
	for r := range rounds {
		for _, b := range bases {
			moveTo(t, filepath.Join(b.held, fmt.Sprintf("tail-%d.jsonl", r)), b.landing)
			ingest(t, b.lh, b.landing)
			logs := &debugLog{}
			start := time.Now()
			res, err := Run(ctx, b.lh, spec, "bronze.orders", Options{Log: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			inc := time.Since(start)
			if res.Read != tail {
				t.Fatalf("incremental run read %d rows, want %d", res.Read, tail)
			}
			resolve := logs.get("silver resolve")
			secs, _ := strconv.ParseFloat(resolve["seconds"], 64)
			lookup := time.Duration(secs * float64(time.Second))
			stage := func(msg string) time.Duration {
				s, _ := strconv.ParseFloat(logs.get(msg)["seconds"], 64)
				return time.Duration(s * float64(time.Second))
			}
			b.inc, b.res, b.rest = append(b.inc, inc), append(b.res, lookup), append(b.rest, inc-lookup)
			b.scan, b.write = append(b.scan, stage("silver scan")), append(b.write, stage("silver write and commit"))
			b.lookup = resolve["files_read"] + "/" + resolve["files"] + " files, " + resolve["row_groups_read"] + "/" + resolve["row_groups"] +
				" row groups, " + resolve["rows_read"] + " rows"
		}
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2].Round(time.Millisecond)
	}
	for _, b := range bases {
		t.Logf("base %9d: full Silver %7v | +%d incremental Silver, median of %d: %6v %v, of which lookup %6v %v, the rest %6v (Bronze scan %v, write and commit %v); last lookup read %s",
			b.n, b.full.Round(time.Millisecond), tail, rounds, median(b.inc), roundAll(b.inc), median(b.res), roundAll(b.res), median(b.rest),
			median(b.scan), median(b.write), b.lookup)
	}
	if len(bases) > 1 {
		first, last := bases[0], bases[len(bases)-1]
		t.Logf("incremental Silver at %d ÷ at %d: %.2f× (lookup %.2f×)", last.n, first.n,
			float64(median(last.inc))/float64(median(first.inc)), float64(median(last.res))/float64(median(first.res)))
	}
}

func roundAll(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(time.Millisecond)
	}
	return out
}

// splitTail writes all but the last rounds×n lines of f to dir/base(f) and each n of
// them, in stream order, to held/tail-<round>.jsonl.
func splitTail(t *testing.T, f string, n, rounds int, dir, held string) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	cut := len(lines) - rounds*n
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), bytes.Join(lines[:cut], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		part := lines[cut+r*n : cut+(r+1)*n]
		if err := os.WriteFile(filepath.Join(held, fmt.Sprintf("tail-%d.jsonl", r)), bytes.Join(part, nil), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// debugLog is a slog.Handler that keeps the attributes of each message logged.
type debugLog struct {
	mu   sync.Mutex
	msgs map[string]map[string]string
}

func (d *debugLog) Enabled(context.Context, slog.Level) bool { return true }

func (d *debugLog) Handle(_ context.Context, r slog.Record) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.msgs == nil {
		d.msgs = map[string]map[string]string{}
	}
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	d.msgs[r.Message] = attrs
	return nil
}

func (d *debugLog) WithAttrs([]slog.Attr) slog.Handler { return d }
func (d *debugLog) WithGroup(string) slog.Handler      { return d }

// get returns the attributes of the last msg logged.
func (d *debugLog) get(msg string) map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.msgs[msg]
}
