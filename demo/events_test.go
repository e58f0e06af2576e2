package demo_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"goldbridge/demo"
)

// TestGenerateEvents: a landing is a function of the seed and its number, its lines are
// what its stats say, and landing L+1 re-delivers the second half of landing L verbatim.
func TestGenerateEvents(t *testing.T) {
	gen := func(dir string, seed uint64, landing int) (demo.EventsStats, [][]byte) {
		t.Helper()
		st, err := demo.GenerateEvents(context.Background(), demo.EventsOptions{OutDir: dir, Landing: landing, Events: 200, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(st.Path)
		if err != nil {
			t.Fatal(err)
		}
		return st, bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	}
	a, b := t.TempDir(), t.TempDir()
	lines := map[int]map[string]bool{}
	for landing := 1; landing <= 4; landing++ {
		st, got := gen(a, 5, landing)
		_, again := gen(b, 5, landing)
		if !slices.EqualFunc(got, again, bytes.Equal) {
			t.Fatalf("landing %d differs between two runs with one seed", landing)
		}
		if st.Path != filepath.Join(a, fmt.Sprintf("events_%d.jsonl", landing)) {
			t.Errorf("path %s", st.Path)
		}
		if n := st.Stream + st.Retries + st.Late + st.Redelivered + st.Resent + st.ResentNear; n != st.Lines || n != len(got) {
			t.Errorf("landing %d: %d lines, stats add up to %d: %+v", landing, len(got), n, st)
		}
		if st.Stream != 200 || st.Retries == 0 || st.Late != 10 ||
			(landing >= 2) != (st.ResentNear > 0) || (landing >= 3) != (st.Resent > 0 && st.Redelivered > 0) {
			t.Errorf("landing %d: %+v", landing, st)
		}
		lines[landing] = map[string]bool{}
		for _, l := range got {
			lines[landing][string(l)] = true
		}
		if landing > 1 {
			from, _ := demo.EventsRange(landing, 200)
			for i := from; i < from+100; i++ {
				l := demo.StreamEvent(5, i).JSON()
				if !lines[landing-1][string(l)] || !lines[landing][string(l)] {
					t.Fatalf("stream event %d is not in landings %d and %d", i, landing-1, landing)
				}
			}
		}
	}
	if _, other := gen(t.TempDir(), 6, 1); slices.EqualFunc(other, func() [][]byte { _, l := gen(t.TempDir(), 5, 1); return l }(), bytes.Equal) {
		t.Error("two seeds wrote the same landing")
	}
}
