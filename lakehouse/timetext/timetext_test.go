package timetext

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestAppendDateTimeMatchesFormat: random instants over years 0-9999, in UTC and in a
// zone, written as time.Format writes them.
func TestAppendDateTimeMatchesFormat(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("UTC-5", -5*3600)
	}
	lo, hi := time.Date(0, 1, 2, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 30, 0, 0, 0, 0, time.UTC).Unix()
	r := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		tm := time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9)).UTC()
		if r.IntN(2) == 0 {
			tm = tm.In(ny)
		}
		b, ok := AppendDateTime(nil, tm)
		if got, want := string(b), tm.Format("2006-01-02T15:04:05"); !ok || got != want {
			t.Fatalf("%v: %s %v, Format %s", tm, got, ok, want)
		}
	}
	for _, tm := range []time.Time{time.Date(-1, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if b, ok := AppendDateTime([]byte("x"), tm); ok || string(b) != "x" {
			t.Errorf("%v: %q %v, want refused", tm, b, ok)
		}
	}
}

func TestAppendDigits(t *testing.T) {
	for _, c := range []struct {
		v, n int
		want string
	}{{0, 1, "0"}, {7, 2, "07"}, {2024, 4, "2024"}, {5, 9, "000000005"}, {999999999, 9, "999999999"}, {42, 0, ""}} {
		if got := string(AppendDigits([]byte("x"), c.v, c.n)); got != "x"+c.want {
			t.Errorf("AppendDigits(%d, %d) = %q, want %q", c.v, c.n, got, "x"+c.want)
		}
	}
}
