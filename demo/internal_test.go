package demo

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestAppendTime(t *testing.T) {
	cases := []time.Time{
		time.Unix(0, 0),
		time.Date(2026, 5, 23, 11, 2, 13, 250e6, time.UTC),
		time.Date(2024, 2, 29, 23, 59, 59, 999e6, time.UTC),
		time.Date(2000, 3, 1, 0, 0, 0, 1e6, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 5e6, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		cases = append(cases, time.UnixMilli(rng.Int64N(400*365*dayMs)-100*365*dayMs).UTC())
	}
	for _, tm := range cases {
		ms := tm.UnixMilli()
		if got, want := string(appendTime(nil, ms, true)), tm.Format("2006-01-02T15:04:05.000Z"); got != want {
			t.Fatalf("appendTime(%d, millis) = %s, want %s", ms, got, want)
		}
		if got, want := string(appendTime(nil, ms, false)), tm.Format("2006-01-02T15:04:05Z"); got != want {
			t.Fatalf("appendTime(%d) = %s, want %s", ms, got, want)
		}
	}
}

func TestAppendNumbers(t *testing.T) {
	for _, c := range []struct {
		cents int64
		want  string
	}{
		{0, "0.00"}, {1, "0.01"}, {10, "0.10"}, {1990, "19.90"}, {12345, "123.45"},
		{-5, "-0.05"}, {-1990, "-19.90"}, {9999999, "99999.99"},
	} {
		if got := string(appendCents(nil, c.cents)); got != c.want {
			t.Errorf("appendCents(%d) = %s, want %s", c.cents, got, c.want)
		}
	}
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{
		{0, 1, "0"}, {1234, 9, "000001234"}, {1234567890, 9, "1234567890"}, {42, 0, "42"},
	} {
		if got := string(appendUint(nil, c.v, c.width)); got != c.want {
			t.Errorf("appendUint(%d, %d) = %s, want %s", c.v, c.width, got, c.want)
		}
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

func TestPipeWriterError(t *testing.T) {
	want := errors.New("disk full")
	p := newPipeWriter(failWriter{want})
	line := make([]byte, 1000)
	var err error
	for i := 0; err == nil && i < 100*chunkSize/len(line); i++ {
		err = p.Write(line)
	}
	if err == nil {
		t.Fatal("Write kept succeeding after the destination failed")
	}
	if cerr := p.Close(); !errors.Is(cerr, want) {
		t.Errorf("Close = %v, want %v", cerr, want)
	}
}
