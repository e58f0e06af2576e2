// Package scheduler runs goldbridge's scheduled jobs on cron specs (robfig/cron/v3:
// standard 5-field specs, an optional leading seconds field, descriptors such as @hourly
// and @every 10m, and a time zone per job).
//
// Promises:
//   - At most one job runs at a time in one Scheduler. A trigger that fires while a job is
//     still running (the same job or another one) is skipped, never queued and never run
//     concurrently, and the skip is counted (Options.Skipped).
//   - Stop stops triggering first, then waits for the running job to finish on its own
//     until the drain deadline, then cancels the job's context (the job must then return
//     at its next safe point), and returns no later than the context given to Stop ends.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Parser is the cron spec parser of goldbridge schedules: 5 fields, or 6 with leading
// seconds, or a descriptor (@every 10m, @hourly, @daily, ...).
var Parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Job is one schedule.
type Job struct {
	Name     string
	Spec     string // cron spec, see Parser
	Timezone string // IANA name; "" is UTC
	// Run does the work. Its context is cancelled when Stop gives up waiting; Run should
	// then return at its next safe point.
	Run func(ctx context.Context) error
}

// Options configure a Scheduler.
type Options struct {
	Log *slog.Logger
	// Skipped is called for each trigger skipped because a job was still running.
	Skipped func(job string)
	// Started and Finished are called around each run (for status reporting).
	Started  func(job string, at time.Time)
	Finished func(job string, at time.Time, elapsed time.Duration, err error)
}

// State is a job's status as reported by Status.
type State struct {
	Name      string        `json:"name"`
	Spec      string        `json:"spec"`
	Timezone  string        `json:"timezone"`
	Running   bool          `json:"running"`
	Next      time.Time     `json:"next"`
	Runs      int64         `json:"runs"`
	Skipped   int64         `json:"skipped"`
	LastStart time.Time     `json:"last_start,omitzero"`
	LastEnd   time.Time     `json:"last_end,omitzero"`
	LastError string        `json:"last_error,omitempty"`
	LastTook  time.Duration `json:"last_took_ns,omitempty"`
}

// Scheduler triggers jobs; create it with New, add jobs, then Start and Stop it.
type Scheduler struct {
	opt  Options
	cron *cron.Cron

	ctx    context.Context // parent of every run; cancelled by Stop when draining gives up
	cancel context.CancelFunc

	mu      sync.Mutex
	busy    bool          // a job is running
	done    chan struct{} // closed when the running job returns
	jobs    map[string]*State
	defs    map[string]Job
	entries map[string]cron.EntryID
	stopped bool
}

// New returns a Scheduler that is not started.
func New(opt Options) *Scheduler {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{
		opt:     opt,
		cron:    cron.New(cron.WithParser(Parser), cron.WithLocation(time.UTC)),
		ctx:     ctx,
		cancel:  cancel,
		jobs:    map[string]*State{},
		defs:    map[string]Job{},
		entries: map[string]cron.EntryID{},
	}
}

// Add registers a job; it fails on a duplicate name, a bad spec or an unknown time zone.
func (s *Scheduler) Add(j Job) error {
	if j.Run == nil {
		return fmt.Errorf("schedule %s: no job", j.Name)
	}
	tz := j.Timezone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return fmt.Errorf("schedule %s: time zone: %w", j.Name, err)
	}
	sched, err := Parser.Parse(j.Spec)
	if err != nil {
		return fmt.Errorf("schedule %s: cron %q: %w", j.Name, j.Spec, err)
	}
	if spec, ok := sched.(*cron.SpecSchedule); ok && !strings.HasPrefix(j.Spec, "CRON_TZ=") && !strings.HasPrefix(j.Spec, "TZ=") {
		spec.Location = loc // the spec's fields are read in the job's time zone
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.jobs[j.Name]; dup {
		return fmt.Errorf("schedule %s: duplicate name", j.Name)
	}
	s.jobs[j.Name] = &State{Name: j.Name, Spec: j.Spec, Timezone: tz}
	s.defs[j.Name] = j
	s.entries[j.Name] = s.cron.Schedule(sched, cron.FuncJob(func() { s.run(j) }))
	return nil
}

// Start begins triggering jobs in the background.
func (s *Scheduler) Start() { s.cron.Start() }

// Trigger runs a job now, in the background, under the same no-overlap rule as a timed
// trigger; it reports whether the job started (false: skipped, stopped or unknown).
func (s *Scheduler) Trigger(name string) bool {
	s.mu.Lock()
	j, ok := s.defs[name]
	s.mu.Unlock()
	if !ok {
		return false
	}
	done, start := s.begin(j)
	if done == nil {
		return false
	}
	go s.execute(j, done, start)
	return true
}

// run is the cron callback of job j: it runs j unless a job is running (then it counts a
// skip) or the scheduler is stopping.
func (s *Scheduler) run(j Job) {
	if done, start := s.begin(j); done != nil {
		s.execute(j, done, start)
	}
}

// begin marks j running and returns the channel execute closes, or nil when j must not run.
func (s *Scheduler) begin(j Job) (chan struct{}, time.Time) {
	s.mu.Lock()
	st := s.jobs[j.Name]
	if s.stopped {
		s.mu.Unlock()
		return nil, time.Time{}
	}
	if s.busy {
		st.Skipped++
		s.mu.Unlock()
		s.opt.Log.Warn("schedule skipped: the previous run is still going", "schedule", j.Name)
		if s.opt.Skipped != nil {
			s.opt.Skipped(j.Name)
		}
		return nil, time.Time{}
	}
	s.busy = true
	done := make(chan struct{})
	s.done = done
	start := time.Now()
	st.Running, st.LastStart = true, start
	st.Runs++
	s.mu.Unlock()
	return done, start
}

// execute runs j (begun by begin) and marks the scheduler idle again.
func (s *Scheduler) execute(j Job, done chan struct{}, start time.Time) {
	if s.opt.Started != nil {
		s.opt.Started(j.Name, start)
	}
	s.opt.Log.Info("schedule started", "schedule", j.Name)
	err := safeRun(s.ctx, j.Run)
	took := time.Since(start)
	if err != nil {
		s.opt.Log.Error("schedule failed", "schedule", j.Name, "seconds", fmt.Sprintf("%.2f", took.Seconds()), "err", err)
	} else {
		s.opt.Log.Info("schedule finished", "schedule", j.Name, "seconds", fmt.Sprintf("%.2f", took.Seconds()))
	}
	if s.opt.Finished != nil {
		s.opt.Finished(j.Name, time.Now(), took, err)
	}
	s.mu.Lock()
	st := s.jobs[j.Name]
	st.Running, st.LastEnd, st.LastTook, st.LastError = false, time.Now(), took, ""
	if err != nil {
		st.LastError = err.Error()
	}
	s.busy = false
	s.done = nil
	s.mu.Unlock()
	close(done)
}

// safeRun turns a panic of a job into an error so that one bad run does not kill serve.
func safeRun(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("job panicked: %v", r)
		}
	}()
	return f(ctx)
}

// Status returns every job's state, sorted by name.
func (s *Scheduler) Status() []State {
	next := map[cron.EntryID]time.Time{}
	for _, e := range s.cron.Entries() {
		next[e.ID] = e.Next
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]State, 0, len(s.jobs))
	for name, st := range s.jobs {
		c := *st
		c.Next = next[s.entries[name]]
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b State) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Running reports whether a job is running now.
func (s *Scheduler) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

// ErrAbandoned is returned by Stop when a cancelled job did not return before the deadline.
var ErrAbandoned = errors.New("scheduler: the running job did not stop before the deadline")

// Stop stops triggering, lets the running job finish until drain, then cancels it and
// waits until ctx ends. It returns nil when no job is left running, ctx's error wrapped in
// ErrAbandoned otherwise. drain after ctx's deadline is the same as ctx's deadline.
func (s *Scheduler) Stop(ctx context.Context, drain time.Time) error {
	s.mu.Lock()
	s.stopped = true
	done := s.done
	s.mu.Unlock()
	// No new triggers. (The context cron.Stop returns waits for the running job without a
	// bound; we wait below, bounded.)
	s.cron.Stop()
	if done == nil {
		s.cancel()
		return nil
	}
	s.opt.Log.Info("waiting for the running job to reach its end", "until", drain.Format(time.RFC3339))
	t := time.NewTimer(time.Until(drain))
	defer t.Stop()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	s.opt.Log.Warn("cancelling the running job")
	s.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrAbandoned, ctx.Err())
	}
}
