package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/plan"
	"goldbridge/cmd/goldbridge/internal/scheduler"
	"goldbridge/cmd/goldbridge/internal/web"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chlocal"
	"goldbridge/sync/pipeline"
)

func (a *app) serveCmd() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the config's schedules and serve /metrics, /healthz, /readyz and /status",
		Long: `Long-running mode: runs each schedule of the config (cron specs with an optional seconds
field, @every, a time zone per schedule) and serves HTTP on server.listen:
  /metrics  Prometheus metrics (goldbridge_*, Go and process collectors)
  /healthz  200 while the process runs
  /readyz   200 when the Iceberg catalog and ClickHouse answer, 503 otherwise
  /status   JSON: schedules, and per mart the last run, freshness, circuit, last sync, drift
One job runs at a time: a trigger that fires while a job still runs is skipped and counted
(goldbridge_skipped_overlapping_runs_total). The state lock <state-dir>/goldbridge.lock is
held for the whole life of the process, so one-shot commands on the same state fail fast.
The embedded ClickHouse is started once and stopped at exit.
SIGTERM/SIGINT: stop scheduling, let the running step finish for half of
server.shutdown_timeout, then cancel it; the process exits within server.shutdown_timeout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if listen != "" {
				cfg.Server.Listen = listen
			}
			return a.serve(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "HTTP address, host:port (default server.listen)")
	return cmd
}

// server is the state of one `goldbridge serve` process.
type server struct {
	a     *app
	cfg   *config.Config
	lh    *catalog.Lakehouse
	m     *pipeline.Metrics
	sched *scheduler.Scheduler
	start time.Time

	pingCatalog    func(context.Context) error
	pingClickHouse func(context.Context) error

	mu       sync.Mutex
	stopping bool
	lastRun  map[string]martRun // per mart
}

// martRun is the last scheduled run that covered a mart.
type martRun struct {
	Schedule string    `json:"schedule"`
	Started  time.Time `json:"started_at"`
	Finished time.Time `json:"finished_at,omitzero"`
	Outcome  string    `json:"outcome"` // running, success, failure, circuit_open
	Error    string    `json:"error,omitempty"`
}

// serve runs until ctx is cancelled (SIGTERM), then shuts down within the configured bound.
func (a *app) serve(ctx context.Context, cfg *config.Config) (err error) {
	unlock, err := pipeline.LockState(a.stateDir, a.log)
	if err != nil {
		return err
	}
	defer unlock()
	if a.metrics == nil {
		a.metrics = pipeline.NewMetrics()
	}
	s := &server{a: a, cfg: cfg, m: a.metrics, start: time.Now(), lastRun: map[string]martRun{}}

	s.lh, err = plan.OpenLakehouse(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.lh.Close()
	s.pingCatalog = s.lh.Ping

	stopCH, err := s.openClickHouse(ctx)
	if err != nil {
		return err
	}
	// stopCH runs last, with whatever is left of the shutdown bound.
	var shutdownDeadline time.Time
	defer func() {
		if shutdownDeadline.IsZero() {
			shutdownDeadline = time.Now().Add(cfg.Server.ShutdownTimeout.D())
		}
		sctx, cancel := context.WithDeadline(context.Background(), shutdownDeadline)
		defer cancel()
		stopCH(sctx)
	}()

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("server.listen: %w", err)
	}
	httpSrv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	httpErr := make(chan error, 1)
	go func() { httpErr <- httpSrv.Serve(ln) }()
	a.log.Info("serving", "listen", ln.Addr().String(), "schedules", len(cfg.Schedules), "state_dir", a.stateDir)

	var stages []string
	for _, sc := range cfg.Schedules {
		stages = append(stages, sc.Stages...)
	}
	if err := s.m.InitSeries(plan.New(cfg), stages); err != nil {
		return err
	}
	s.m.RefreshState(ctx, s.lh, plan.New(cfg))

	s.sched = scheduler.New(scheduler.Options{
		Log:     a.log,
		Skipped: func(string) { s.m.SkippedRuns.Inc() },
	})
	for _, name := range slices.Sorted(maps.Keys(cfg.Schedules)) {
		sc := cfg.Schedules[name]
		if err := s.sched.Add(scheduler.Job{Name: name, Spec: sc.Cron, Timezone: sc.Timezone, Run: s.job(name, sc)}); err != nil {
			_ = httpSrv.Close()
			return &exitError{exitUsage, fmt.Errorf("schedules.%s: %w", name, err)}
		}
	}
	if len(cfg.Schedules) == 0 {
		a.log.Warn("no schedules in the config: serving metrics and status only")
	}
	s.sched.Start()

	select {
	case <-ctx.Done():
	case err := <-httpErr:
		shutdownDeadline = time.Now().Add(cfg.Server.ShutdownTimeout.D())
		_ = s.sched.Stop(context.Background(), time.Now())
		return fmt.Errorf("http server: %w", err)
	}

	// Shutdown: the whole of it fits in server.shutdown_timeout. Half of it is for the
	// running step to end on its own, then it is cancelled; a reserve at the end is for
	// the HTTP server and the embedded ClickHouse.
	bound := cfg.Server.ShutdownTimeout.D()
	begin := time.Now()
	shutdownDeadline = begin.Add(bound - 200*time.Millisecond)
	reserve := min(bound/4, 5*time.Second)
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	a.log.Info("shutting down", "bound", bound.String(), "job_running", s.sched.Running())
	jctx, cancel := context.WithDeadline(context.Background(), begin.Add(bound-reserve))
	serr := s.sched.Stop(jctx, begin.Add(bound/2))
	cancel()
	hctx, cancel := context.WithTimeout(context.Background(), min(time.Second, reserve/2))
	_ = httpSrv.Shutdown(hctx)
	cancel()
	if serr != nil {
		return fmt.Errorf("shutdown: %w", serr)
	}
	a.log.Info("stopped", "seconds", fmt.Sprintf("%.2f", time.Since(begin).Seconds()))
	return nil
}

// openClickHouse starts the embedded ClickHouse once for the life of serve, unless this
// state dir's server already runs (hotconn.Opener.UseEmbedded; one-shot stages then find it running),
// and sets the readiness ping. The returned function stops the embedded server it started
// within its context.
func (s *server) openClickHouse(ctx context.Context) (func(context.Context), error) {
	// The readiness client connects lazily and reconnects after a failure; it never
	// starts a server (the supervisor restarts ours).
	var (
		mu     sync.Mutex
		client *chconn.Client
	)
	withClient := func(ctx context.Context, do func(*chconn.Client) error) error {
		mu.Lock()
		defer mu.Unlock()
		if client == nil {
			// Reachability only: the mart database appears with the first sync.
			cfg := *s.cfg
			cfg.ClickHouse.Database = "default"
			c, err := s.a.ch().Dial(ctx, &cfg)
			if err != nil {
				return err
			}
			client = c
		}
		if err := do(client); err != nil {
			_ = client.Close()
			client = nil
			return err
		}
		return nil
	}
	s.pingClickHouse = func(ctx context.Context) error {
		return withClient(ctx, func(c *chconn.Client) error { return c.Conn().Ping(ctx) })
	}
	var srv *chlocal.Server
	stopSrv := func() {}
	if s.cfg.ClickHouse.IsEmbedded() {
		// The embedded server's errors, read at each scrape (docs/operations.md).
		err := s.m.WatchClickHouseErrors(func(ctx context.Context) (counts map[string]uint64, err error) {
			err = withClient(ctx, func(c *chconn.Client) error {
				counts, err = clickhouseErrors(ctx, c)
				return err
			})
			return counts, err
		})
		if err != nil {
			return nil, err
		}
		if srv, stopSrv, err = s.a.ch().UseEmbedded(ctx, s.cfg); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) {
		mu.Lock()
		if client != nil {
			_ = client.Close()
			client = nil
		}
		mu.Unlock()
		if srv != nil {
			if err := srv.Stop(ctx); err != nil {
				s.a.log.Warn("stopping embedded clickhouse", "err", err)
			}
		}
		stopSrv() // ends the supervision; the server is stopped already
	}, nil
}

// clickhouseErrors reads the counts of pipeline.ClickHouseErrorNames from the server's
// system.errors (summed over local and remote).
func clickhouseErrors(ctx context.Context, c *chconn.Client) (map[string]uint64, error) {
	// The names are goldbridge's own constants (upper-case letters and underscores).
	in := "'" + strings.Join(pipeline.ClickHouseErrorNames(), "', '") + "'"
	rows, err := c.Conn().Query(ctx, "SELECT name, sum(value) FROM system.errors WHERE name IN ("+in+") GROUP BY name")
	if err != nil {
		return nil, fmt.Errorf("clickhouse errors: %w", err)
	}
	defer rows.Close()
	counts := map[string]uint64{}
	for rows.Next() {
		var (
			name string
			n    uint64
		)
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("clickhouse errors: %w", err)
		}
		counts[name] = n
	}
	return counts, rows.Err()
}

// job returns the scheduled function of one schedule: the same work as `goldbridge run`
// restricted to the schedule's stages, entities and marts.
func (s *server) job(name string, sc config.Schedule) func(context.Context) error {
	marts := sc.Marts
	if len(marts) == 0 {
		marts = slices.Sorted(maps.Keys(s.cfg.Marts))
	}
	coversMarts := slices.ContainsFunc(sc.Stages, func(st string) bool { return st == "gold" || st == "sync" || st == "check" })
	return func(ctx context.Context) error {
		start := time.Now()
		if coversMarts {
			s.mu.Lock()
			for _, m := range marts {
				s.lastRun[m] = martRun{Schedule: name, Started: start, Outcome: "running"}
			}
			s.mu.Unlock()
		}
		err := s.a.runOnce(ctx, s.cfg, sc.Stages, sc.Entities, sc.Marts)
		// Refresh even after a cancelled run: the state metrics must show what is committed.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		circuits := s.m.RefreshState(rctx, s.lh, plan.New(s.cfg))
		cancel()
		if coversMarts {
			s.mu.Lock()
			for _, m := range marts {
				r := martRun{Schedule: name, Started: start, Finished: time.Now(), Outcome: "success"}
				switch {
				case errors.Is(err, gold.ErrCircuitOpen) && circuits[m]:
					r.Outcome, r.Error = "circuit_open", err.Error()
				case errors.Is(err, gold.ErrCircuitOpen):
				case err != nil:
					r.Outcome, r.Error = "failure", err.Error()
				}
				s.lastRun[m] = r
			}
			s.mu.Unlock()
		}
		return err
	}
}

// handler is serve's HTTP interface (web.Handler).
func (s *server) handler() http.Handler {
	return web.Handler(web.Probes{Registry: s.m.Registry, PingCatalog: s.pingCatalog, PingClickHouse: s.pingClickHouse,
		Stopping: func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.stopping },
		Status:   func(ctx context.Context) any { return s.status(ctx) }})
}

// statusDoc is the /status document.
type statusDoc struct {
	StartedAt time.Time         `json:"started_at"`
	Running   bool              `json:"running"` // a job is running now
	Stopping  bool              `json:"stopping"`
	Schedules []scheduler.State `json:"schedules"`
	Marts     []martStatus      `json:"marts"`
}

type martStatus struct {
	pipeline.MartStatus
	LastRun *martRun `json:"last_run"`
}

// status is the /status document now.
func (s *server) status(ctx context.Context) statusDoc {
	doc := statusDoc{StartedAt: s.start, Schedules: []scheduler.State{}, Marts: []martStatus{}}
	if s.sched != nil {
		doc.Running = s.sched.Running()
		doc.Schedules = s.sched.Status()
	}
	s.mu.Lock()
	doc.Stopping = s.stopping
	runs := maps.Clone(s.lastRun)
	s.mu.Unlock()
	for _, st := range s.m.Status(ctx, s.lh, plan.New(s.cfg)) {
		ms := martStatus{MartStatus: st}
		if r, ok := runs[st.Name]; ok {
			ms.LastRun = &r
		}
		doc.Marts = append(doc.Marts, ms)
	}
	return doc
}
