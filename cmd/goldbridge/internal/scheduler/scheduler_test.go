package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A job slower than its interval is skipped while it runs, never run twice at once, and
// every skipped trigger is counted.
func TestOverlapIsSkippedAndCounted(t *testing.T) {
	var running, maxRunning, runs, skipped atomic.Int64
	first := make(chan struct{}, 10)
	s := New(Options{Skipped: func(string) { skipped.Add(1) }})
	err := s.Add(Job{Name: "slow", Spec: "@every 1s", Run: func(ctx context.Context) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		runs.Add(1)
		first <- struct{}{}
		select {
		case <-time.After(3500 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	<-first
	time.Sleep(2600 * time.Millisecond) // the triggers 1 s and 2 s after the start find it running
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx, time.Now().Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := maxRunning.Load(); got != 1 {
		t.Errorf("max concurrent runs %d, want 1", got)
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("runs %d, want 1", got)
	}
	if got := skipped.Load(); got < 2 {
		t.Errorf("skipped %d, want >= 2", got)
	}
	st := s.Status()
	if len(st) != 1 || st[0].Runs != runs.Load() || st[0].Skipped != skipped.Load() || st[0].Running {
		t.Errorf("status %+v (runs %d, skipped %d)", st, runs.Load(), skipped.Load())
	}
}

// Two schedules never run at once either: a trigger of another job while one runs is skipped.
func TestTriggerWhileBusy(t *testing.T) {
	var skipped atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	s := New(Options{Skipped: func(string) { skipped.Add(1) }})
	for _, name := range []string{"a", "b"} {
		if err := s.Add(Job{Name: name, Spec: "0 0 1 1 *", Run: func(context.Context) error {
			started <- struct{}{}
			<-release
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if !s.Trigger("a") {
		t.Fatal("first trigger did not start")
	}
	<-started
	if s.Trigger("a") || s.Trigger("b") {
		t.Fatal("a trigger started while a job was running")
	}
	if skipped.Load() != 2 {
		t.Fatalf("skipped %d, want 2", skipped.Load())
	}
	close(release)
	deadline := time.Now().Add(2 * time.Second)
	for s.Running() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !s.Trigger("b") {
		t.Fatal("trigger after the run ended did not start")
	}
	<-started
	if err := s.Stop(context.Background(), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if s.Trigger("a") {
		t.Fatal("trigger after Stop started a job")
	}
}

// Stop lets a job finish before the drain deadline, cancels it after, and gives up at
// the context's deadline if the job ignores cancellation.
func TestStopBounds(t *testing.T) {
	t.Run("finishes", func(t *testing.T) {
		var cancelled atomic.Bool
		s := newWith(t, func(ctx context.Context) error {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				cancelled.Store(true)
			}
			return nil
		})
		if err := s.Stop(context.Background(), time.Now().Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		if cancelled.Load() {
			t.Fatal("job was cancelled although it finished before the drain deadline")
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		s := newWith(t, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		start := time.Now()
		if err := s.Stop(context.Background(), time.Now().Add(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
			t.Fatalf("stop took %s", d)
		}
		if st := s.Status(); st[0].LastError == "" {
			t.Fatalf("cancelled run not recorded: %+v", st)
		}
	})
	t.Run("abandoned", func(t *testing.T) {
		block := make(chan struct{})
		defer close(block)
		s := newWith(t, func(context.Context) error { <-block; return nil })
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := s.Stop(ctx, time.Now().Add(100*time.Millisecond))
		if !errors.Is(err, ErrAbandoned) {
			t.Fatalf("err %v, want ErrAbandoned", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("stop took %s, bound 400ms", d)
		}
	})
}

func newWith(t *testing.T, run func(context.Context) error) *Scheduler {
	t.Helper()
	s := New(Options{})
	if err := s.Add(Job{Name: "j", Spec: "@yearly", Run: run}); err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.Trigger("j") {
		t.Fatal("trigger did not start")
	}
	for !s.Running() {
		time.Sleep(time.Millisecond)
	}
	return s
}

func TestSpecs(t *testing.T) {
	s := New(Options{})
	noop := func(context.Context) error { return nil }
	for _, j := range []Job{
		{Name: "five", Spec: "*/15 * * * *"},
		{Name: "six", Spec: "30 */15 * * * *"},
		{Name: "every", Spec: "@every 10m"},
		{Name: "berlin", Spec: "0 9 * * *", Timezone: "Europe/Berlin"},
		{Name: "hourly", Spec: "@hourly", Timezone: "America/New_York"},
	} {
		j.Run = noop
		if err := s.Add(j); err != nil {
			t.Errorf("%s: %v", j.Name, err)
		}
	}
	for _, j := range []Job{
		{Name: "bad", Spec: "61 * * * *"},
		{Name: "tz", Spec: "@daily", Timezone: "Mars/Olympus"},
		{Name: "five", Spec: "@daily"}, // duplicate
	} {
		j.Run = noop
		if err := s.Add(j); err == nil {
			t.Errorf("%s: no error", j.Name)
		}
	}
	s.Start()
	defer s.Stop(context.Background(), time.Now())
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, st := range s.Status() {
		if st.Next.IsZero() {
			t.Errorf("%s: no next run", st.Name)
		}
		if st.Name == "berlin" {
			if n := st.Next.In(berlin); n.Hour() != 9 || n.Minute() != 0 {
				t.Errorf("berlin next %s, want 09:00 Europe/Berlin", n)
			}
		}
		if st.Name == "six" && st.Next.Second() != 30 {
			t.Errorf("six next %s, want second 30", st.Next)
		}
	}
}
