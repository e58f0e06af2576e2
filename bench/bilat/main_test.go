package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestPct: nearest-rank quantiles (the smallest value with at least q of the samples at
// or below it), worked out by hand.
func TestPct(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, c := range []struct {
		name string
		ds   []time.Duration
		q    float64
		want float64
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7},
		{"p50 of 4", ms(40, 10, 30, 20), 0.5, 20},
		{"p50 of 5", ms(50, 10, 40, 20, 30), 0.5, 30},
		{"p99 of 100", ms(seq(1, 100)...), 0.99, 99},
		{"p99 of 101", ms(seq(1, 101)...), 0.99, 100},
		{"p99 of 10", ms(seq(1, 10)...), 0.99, 10},
	} {
		if got := pct(c.ds, c.q); got != c.want {
			t.Errorf("%s: pct(%v) = %v, want %v", c.name, c.q, got, c.want)
		}
	}
}

func seq(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

// TestQuestionsAskBothSides: every question reads the served mart on the hot side, the
// Iceberg table on the cold side, and is anchored on the same day.
func TestQuestionsAskBothSides(t *testing.T) {
	for _, q := range questions {
		if !strings.Contains(q.Hot, "{final}") && !strings.Contains(q.Hot, "{states}") {
			t.Errorf("%s: the hot side reads neither {final} nor {states}", q.Name)
		}
		if strings.Contains(q.Hot, "{gold}") || !strings.Contains(q.Cold, "{gold}") ||
			strings.Contains(q.Cold, "{final}") || strings.Contains(q.Cold, "{states}") {
			t.Errorf("%s: the cold side must read {gold} only, the hot side never", q.Name)
		}
		if strings.Count(q.Hot, "{d}") != strings.Count(q.Cold, "{d}") || !strings.Contains(q.Hot, "{d}") {
			t.Errorf("%s: both sides must use the anchor day {d} alike", q.Name)
		}
	}
}

// TestProcessCPU reads this process's own /proc entry: a number of seconds that does
// not go backwards after some work.
func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	a, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 {
		x += i
	}
	b, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if a < 0 || b < a || x == 0 {
		t.Errorf("cpu %v then %v", a, b)
	}
	if c, err := processCPU(0); c != 0 || err != nil {
		t.Errorf("pid 0: %v, %v; want 0, nil", c, err)
	}
}
