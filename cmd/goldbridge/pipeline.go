package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/metrics"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
	"goldbridge/serving/chtarget"
	gbsync "goldbridge/sync"
)

// pipeline runs stages for one command invocation or one scheduled job.
type pipeline struct {
	a   *app
	cfg *config.Config
	lh  *catalog.Lakehouse
	m   *metrics.Metrics

	reingest         bool
	retryQuarantined bool
	full             bool
	rebuild          bool           // gold --rebuild
	ch               *chOpening     // ClickHouse connection opened ahead (run), or nil
	aheadOnLanding   []string       // open ClickHouse ahead (ensuring these marts) once ingest lands rows
	landed           bool           // ingest committed something to Bronze
	committed        bool           // a stage committed something to the lake (maintainDue)
	outcomes         runOutcomes    // what failed in the stages run so far, for the later stages' errors
	bg               sync.WaitGroup // metric reads left to run beside the next stages; close waits
}

// chOpening is a ClickHouse connection being opened while earlier stages run.
type chOpening struct {
	done  chan struct{}
	t     hotTarget
	close func() // closes the connection and stops the embedded server it started
	err   error
	taken bool
}

// openClickHouseAhead starts connecting to ClickHouse (and starting the embedded server
// if needed) in the background; the sync stage takes the connection.
//
// The tables of the served marts whose Gold table exists are ensured (DDL checked and
// created) on it too (chtarget.ClickHouse.Prepare): ~8 statements, 20-35 ms a mart, that
// the sync stage then skips unless the gold stage changed the Gold schema. A failure
// there is left to the sync stage, which ensures again and reports it.
func (p *pipeline) openClickHouseAhead(ctx context.Context, ensure []string) {
	o := &chOpening{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.t, o.close, o.err = p.openTarget(ctx)
		if o.err != nil {
			return
		}
		for _, name := range ensure {
			tbl, err := p.lh.LoadTable(ctx, p.cfg.Marts[name].Table)
			if err != nil || gbsync.CircuitOpen(tbl) {
				continue // no Gold table yet, or a sync that may be skipped: left to the sync stage
			}
			if m, err := servedMart(p.cfg, name); err == nil {
				_ = o.t.Prepare(ctx, m, tbl) // a failure is left to the sync stage, which reports it
			}
		}
	}()
	p.ch = o
}

// hotTarget is the sync target of the configured ClickHouse (chtarget.ClickHouse, or
// chtarget.Sharded with clickhouse.shards), which can ensure a mart's tables ahead.
type hotTarget interface {
	gbsync.Target
	Prepare(ctx context.Context, m *serving.Mart, tbl *table.Table) error
}

// clickhouse returns the target opened ahead, or opens one; done closes it.
func (p *pipeline) clickhouse(ctx context.Context) (t hotTarget, done func(), err error) {
	if o := p.ch; o != nil && !o.taken {
		<-o.done
		o.taken = true
		return o.t, o.close, o.err
	}
	return p.openTarget(ctx)
}

// openTarget connects to the configured ClickHouse (openClickHouse, or every node of
// clickhouse.shards: openSharded) as a sync target.
func (p *pipeline) openTarget(ctx context.Context) (hotTarget, func(), error) {
	if len(p.cfg.ClickHouse.Shards) > 0 {
		t, done, err := p.a.openSharded(ctx, p.cfg)
		if err != nil {
			return nil, nil, err // not a nil *Sharded in a non-nil interface
		}
		return t, done, nil
	}
	c, stop, err := p.a.openClickHouse(ctx, p.cfg)
	if err != nil {
		return nil, nil, err
	}
	return chtarget.NewClickHouse(c), func() { c.Close(); stop() }, nil
}

// newPipeline opens the lakehouse of cfg; close it with p.close.
func (a *app) newPipeline(ctx context.Context, cfg *config.Config) (*pipeline, error) {
	lh, err := openLakehouse(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if a.metrics == nil {
		a.metrics = metrics.New()
	}
	return &pipeline{a: a, cfg: cfg, lh: lh, m: a.metrics}, nil
}

func (p *pipeline) close() {
	p.bg.Wait()
	if o := p.ch; o != nil && !o.taken { // a run that ended before its sync stage
		<-o.done
		o.taken = true
		if o.err == nil {
			o.close()
		}
	}
	p.lh.Close()
}

// observe records a stage run's duration and outcome.
func (p *pipeline) observe(stage string, start time.Time, err error) {
	outcome := "success"
	switch {
	case errors.Is(err, gold.ErrCircuitOpen):
		outcome = "circuit_open"
	case err != nil:
		outcome = "failure"
	}
	p.m.StageDuration.WithLabelValues(stage, outcome).Observe(time.Since(start).Seconds())
	p.m.Runs.WithLabelValues(stage, outcome).Inc()
}

// failures collects what failed in a stage while the other entities, sources or marts
// went on (source isolation): err names each of them.
type failures struct {
	stage string
	names []string
	errs  []error
}

func (f *failures) add(name string, err error) {
	f.names = append(f.names, name)
	f.errs = append(f.errs, err)
}

// err is nil when nothing failed; its exit code is that of the first failure that has one
// (exitError), else exitFailure.
func (f *failures) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	if len(f.errs) == 1 {
		return f.errs[0]
	}
	return fmt.Errorf("%s failed for %s: %w", f.stage, strings.Join(f.names, ", "), errors.Join(f.errs...))
}

// ingest lands each entity's sources; a source that fails (a broker down, a landing
// directory gone) is reported and the other sources and entities are still ingested.
func (p *pipeline) ingest(ctx context.Context, entities []string) (err error) {
	start := time.Now()
	defer func() { p.observe("ingest", start, err) }()
	a := p.a
	failed := failures{stage: "ingest"}
	for _, name := range entities {
		e := p.cfg.Entities[name]
		kafka, err := kafkaSources(p.cfg, name)
		if err != nil {
			return err
		}
		ok := true
		encrypt, _, err := piiOptions(ctx, p.lh, p.cfg, name)
		if err != nil {
			return err
		}
		for _, ks := range kafka {
			res, err := bronze.IngestKafka(ctx, p.lh, e.Bronze.Table, ks, bronze.Options{
				BatchRows: e.Bronze.BatchRows, Transform: encrypt, Log: a.log.With("stage", "ingest", "entity", name, "source", ks.Name),
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				ok = false
				failed.add(name+" source "+ks.Name, fmt.Errorf("ingest %s from %s: %w", name, ks.Name, err))
				a.log.Error("source failed; the other sources go on", "stage", "ingest", "entity", name, "source", ks.Name, "err", err)
				continue
			}
			p.landed = p.landed || res.SnapshotID != 0
			p.m.Rows.WithLabelValues("ingest", name, "", "ingested").Add(float64(res.Rows))
			fmt.Fprintf(a.stdout, "ingest %s: kafka %s: %d records, %.0f rows/s, batch %s, snapshot %d\n",
				name, ks.Topic, res.Rows, float64(res.Rows)/max(res.Elapsed.Seconds(), 1e-9), res.BatchID, res.SnapshotID)
		}
		if srcs := fileSources(p.cfg, name); len(srcs) > 0 {
			if names, err := p.ingestFiles(ctx, name, srcs, encrypt); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				ok = false
				failed.add(name+" source "+strings.Join(names, ","), fmt.Errorf("ingest %s: %w", name, err))
				a.log.Error("source failed; the other sources go on", "stage", "ingest", "entity", name, "source", strings.Join(names, ","), "err", err)
			}
		}
		if ok {
			p.m.LastSuccess.WithLabelValues("ingest", name, "").SetToCurrentTime()
		} else {
			p.outcomes.entityFailed(name, "ingest")
		}
	}
	return failed.err()
}

// ingestFiles lands the landing files of one entity's file sources. A source that cannot
// be read does not stop the others (bronze.ErrSourceFailed): what they landed is reported
// and failed names the sources that failed (all of them when the error is another).
func (p *pipeline) ingestFiles(ctx context.Context, name string, srcs []bronze.FileSource, encrypt func([]byte) ([]byte, error)) (failed []string, err error) {
	a, e := p.a, p.cfg.Entities[name]
	var total int64
	for _, s := range srcs {
		total += dirSize(s)
	}
	progress, done := a.progress(name, total)
	res, err := bronze.IngestFiles(ctx, p.lh, e.Bronze.Table, srcs, bronze.Options{
		BatchRows: e.Bronze.BatchRows, Transform: encrypt, Reingest: p.reingest, RetryQuarantined: p.retryQuarantined,
		Progress: progress, Log: a.log.With("stage", "ingest", "entity", name),
	})
	done()
	if err != nil && !errors.Is(err, bronze.ErrSourceFailed) {
		for _, s := range srcs {
			failed = append(failed, s.Name)
		}
		return failed, err
	}
	for _, f := range res.Failed {
		failed = append(failed, f.Name)
	}
	p.landed = p.landed || res.SnapshotID != 0
	p.m.Rows.WithLabelValues("ingest", name, "", "ingested").Add(float64(res.Rows))
	p.m.Rows.WithLabelValues("ingest", name, "", "blank").Add(float64(res.Blank))
	p.m.FilesQuarantined.WithLabelValues(name).Set(float64(len(res.Quarantined)))
	fmt.Fprintf(a.stdout, "ingest %s: %d files (%d already ingested, %d changed and skipped, %d quarantined), %d rows, %d blank lines, %.1f MB, %.0f rows/s, batch %s, snapshot %d\n",
		name, len(res.Files), res.Skipped, len(res.Changed), len(res.Quarantined), res.Rows, res.Blank, float64(res.Bytes)/1e6,
		float64(res.Rows)/max(res.Elapsed.Seconds(), 1e-9), res.BatchID, res.SnapshotID)
	for _, q := range res.Quarantined {
		fmt.Fprintf(a.stdout, "    quarantined %s (%d bytes, since %s): %s\n", q.Path, q.Size, q.FirstSeen, q.Reason)
	}
	for _, w := range res.Waiting {
		fmt.Fprintf(a.stdout, "    waiting for the newline of the last line of %s (read when it comes, or after tail_wait)\n", w)
	}
	return failed, err
}

func (p *pipeline) silver(ctx context.Context, entities []string) (err error) {
	start := time.Now()
	defer func() { p.observe("silver", start, err) }()
	a := p.a
	failed := failures{stage: "silver"}
	for _, name := range lookupsFirst(p.cfg, entities) {
		spec, err := entitySpec(p.cfg, name)
		if err != nil {
			return err
		}
		_, decrypt, err := piiOptions(ctx, p.lh, p.cfg, name)
		if err != nil {
			return err
		}
		res, err := silver.Run(ctx, p.lh, spec, p.cfg.Entities[name].Bronze.Table, silver.Options{
			Log: a.log.With("stage", "silver", "entity", name), Decrypt: decrypt, PassRows: p.cfg.Entities[name].Silver.PassRows,
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, silver.ErrQuarantineGate) {
			p.m.QuarantineGate.WithLabelValues(name).Set(1)
		}
		p.observeQuality(name, res)
		if errors.Is(err, silver.ErrCriticalCheck) {
			a.printSilverResult("silver", spec, res) // which check failed, on what
		}
		if err != nil {
			p.outcomes.entityFailed(name, "silver")
			failed.add(name, err) // silver.Run names the entity
			a.log.Error("entity failed; the other entities go on", "stage", "silver", "entity", name, "err", err)
			continue
		}
		p.m.QuarantineGate.WithLabelValues(name).Set(0)
		p.committed = p.committed || res.SnapshotID != 0 || res.QuarantineSnapshotID != 0 || res.KeysSnapshotID != 0
		c := res.Counts
		merged := "merged"
		if spec.Mode == silver.ModeAppend {
			merged = "appended"
		}
		for outcome, n := range map[string]int64{merged: c.Current, "superseded": c.Superseded, "duplicate": c.Duplicates, "quarantined": c.Quarantined, "skipped": c.Skipped} {
			p.m.Rows.WithLabelValues("silver", name, "", outcome).Add(float64(n))
		}
		p.m.LastSuccess.WithLabelValues("silver", name, "").SetToCurrentTime()
		a.printSilverResult("silver", spec, res)
	}
	return failed.err()
}

// lookupsFirst orders entities so that an entity comes after the entities its lookups
// read (validate refuses cycles), and otherwise as given.
func lookupsFirst(cfg *config.Config, entities []string) []string {
	out := make([]string, 0, len(entities))
	placed := map[string]bool{}
	var place func(name string)
	place = func(name string) {
		if placed[name] {
			return
		}
		placed[name] = true
		for _, dep := range cfg.LookupEntities(name) {
			if slices.Contains(entities, dep) {
				place(dep)
			}
		}
		out = append(out, name)
	}
	for _, name := range entities {
		place(name)
	}
	return out
}

// observeQuality counts a Silver run's failed checks and, when it read rows, replaces
// the entity's undeclared fields gauge with the run's (bounded by the run's report).
func (p *pipeline) observeQuality(name string, res silver.Result) {
	for _, f := range res.Quality.Failures {
		p.m.SilverCheckFailures.WithLabelValues(name, f.Check, f.Severity).Inc()
	}
	if res.Quality.BronzeRows == 0 { // read nothing, or stopped before the report
		return
	}
	p.m.SilverUndeclared.DeletePartialMatch(prometheus.Labels{"entity": name})
	for _, f := range res.Quality.Undeclared {
		p.m.SilverUndeclared.WithLabelValues(name, f.Field).Set(float64(f.Rows))
	}
	if n := res.Quality.UndeclaredOverflow; n > 0 {
		p.m.SilverUndeclared.WithLabelValues(name, "").Set(float64(n))
	}
}

// gold runs every mart; a mart whose circuit opens does not stop the others, and the
// returned error then wraps gold.ErrCircuitOpen.
func (p *pipeline) gold(ctx context.Context, marts []string) (err error) {
	start := time.Now()
	defer func() { p.observe("gold", start, err) }()
	a := p.a
	var opened []string
	failed := failures{stage: "gold"}
	for _, name := range marts {
		spec, err := martSpec(p.cfg, name)
		if err != nil {
			return err
		}
		res, err := gold.Run(ctx, p.lh, spec, gold.Options{Full: p.full, Rebuild: p.rebuild, Log: a.log.With("stage", "gold", "mart", name)})
		p.outcomes.goldRan(name, err)
		for _, f := range res.Report.Failures {
			p.m.DQFailures.WithLabelValues(name, f.Check, f.Severity).Inc()
			fmt.Fprintf(a.stdout, "gold %s: check %s (%s, %s) failed on %d rows\n", name, f.Check, f.Type, f.Severity, f.Count)
			for _, ex := range f.Examples {
				fmt.Fprintf(a.stdout, "    %s\n", ex)
			}
		}
		if errors.Is(err, gold.ErrCircuitOpen) {
			p.m.CircuitOpen.WithLabelValues(name).Set(1)
			opened = append(opened, name)
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			err = p.outcomes.withUpstream(p.cfg, name, err)
			failed.add(name, err)
			a.log.Error("mart failed; the other marts go on", "stage", "gold", "mart", name, "err", err)
			continue
		}
		p.m.CircuitOpen.WithLabelValues(name).Set(0)
		p.committed = p.committed || res.SnapshotID != 0
		p.m.Rows.WithLabelValues("gold", "", name, "computed").Add(float64(res.Rows))
		p.m.Rows.WithLabelValues("gold", "", name, "null_grain").Add(float64(res.NullGrainRows))
		p.m.LastSuccess.WithLabelValues("gold", "", name).SetToCurrentTime()
		p.bg.Go(func() { // the freshness gauges read Gold's manifests: beside the next stage
			if f, ferr := gold.ReadFreshness(ctx, p.lh, spec.Table); ferr == nil && !f.LastCalculated.IsZero() {
				p.m.CalculatedAt.WithLabelValues(name).Set(float64(f.LastCalculated.Unix()))
				if t, ok := grainTime(f.NewestGrain); ok {
					p.m.DataNewest.WithLabelValues(name, "gold").Set(float64(t.Unix()))
				}
			}
		})
		scope := fmt.Sprintf("%d partitions", len(res.Partitions))
		if res.Full {
			scope = "full rebuild, " + scope
			if res.Passes > 1 {
				scope += fmt.Sprintf(" in %d passes", res.Passes)
			}
		} else if len(res.Partitions) > 0 && len(res.Partitions) <= 5 {
			scope += " (" + strings.Join(res.Partitions, ", ") + ")"
		}
		nulls := ""
		if res.NullGrainRows > 0 {
			nulls = fmt.Sprintf(" (+%d without a grain, not aggregated)", res.NullGrainRows)
		}
		fmt.Fprintf(a.stdout, "gold %s: %s, %d silver rows%s -> %d gold rows, %.2fs, run %s, snapshot %d\n",
			name, scope, res.SilverRows, nulls, res.Rows, res.Elapsed.Seconds(), res.RunID, res.SnapshotID)
	}
	if err := failed.err(); err != nil {
		return err
	}
	if len(opened) > 0 {
		return fmt.Errorf("marts %s: %w", strings.Join(opened, ", "), gold.ErrCircuitOpen)
	}
	return nil
}

// openWriter is the preamble of every command that writes tables: it loads the config,
// takes the state lock and opens the lakehouse. done releases all three.
func (a *app) openWriter(ctx context.Context) (*pipeline, func(), error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	unlock, err := a.lockState()
	if err != nil {
		return nil, nil, err
	}
	p, err := a.newPipeline(ctx, cfg)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	p.sweepOrphans(ctx)
	return p, func() { p.close(); unlock() }, nil
}

// sweepOrphans deletes the files that writes killed midway left in the lakehouse, once
// they are older than catalog.SweepAge (docs/operations.md, "Failed writes and disk
// space"). The caller holds the state lock. A failure is logged: the run goes on. It
// sweeps at most once per SweepAge (the stamp <state-dir>/orphan-sweep): listing every
// table's files and reading all its manifests is a cost a run with nothing to do should
// not pay each time, and a file younger than SweepAge is kept anyway.
func (p *pipeline) sweepOrphans(ctx context.Context) {
	stamp := filepath.Join(p.cfg.StateDir, "orphan-sweep")
	if fi, err := os.Stat(stamp); err == nil && time.Since(fi.ModTime()) < catalog.SweepAge {
		return
	}
	start := time.Now()
	sw, err := p.lh.SweepOrphans(ctx, catalog.SweepAge)
	if sw.Files > 0 {
		p.a.log.Info("removed files of failed writes", "files", sw.Files, "bytes", sw.Bytes, "seconds", fmt.Sprintf("%.2f", time.Since(start).Seconds()))
	}
	if err == nil {
		_ = os.WriteFile(stamp, nil, 0o600)
	}
	if err != nil && ctx.Err() == nil {
		p.a.log.Warn("sweeping files of failed writes", "err", err)
	}
}
