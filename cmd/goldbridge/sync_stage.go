package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/gold"
	"goldbridge/serving"
	"goldbridge/serving/chlocal"
	gbsync "goldbridge/sync"
)

// serveOptions are what the sync, check and forget commands add to the stages of `run`.
type serveOptions struct {
	force   bool // sync --force: push every hot partition
	rebuild bool // sync --rebuild: drop and recreate the served tables first
	repair  bool // check --repair: re-push the drifting partitions, then check again
	purge   bool // forget: delete every copy of rows that left a served table from disk
}

// servedJob is one mart a sync or check stage reaches ClickHouse for.
type servedJob struct {
	name string
	m    *serving.Mart
	tbl  *table.Table
}

// syncStage pushes (stage "sync") or reconciles (stage "check") the marts' hot windows
// and records the serving metrics: the one flow of `run`'s stages and of the sync, check
// and forget commands. A mart whose circuit is open is skipped by sync; a mart that
// fails is reported and the others still run. Check exits 4 (exitDrift) when any mart
// drifts and nothing failed.
func (a *app) syncStage(ctx context.Context, p *pipeline, stage string, marts []string, o serveOptions) (err error) {
	start := time.Now()
	defer func() { p.observe(stage, start, err) }()
	failed := failures{stage: stage}
	defer p.dataDirMetrics() // after done below: what a run leaves on disk
	todo := a.servedJobs(ctx, p, stage, marts, o, &failed)
	if len(todo) == 0 {
		return failed.err()
	}
	t, done, err := p.clickhouse(ctx)
	if err != nil {
		return err
	}
	defer done()
	drifted := 0
	for _, j := range todo {
		var err error
		if stage == "check" {
			var drift bool
			drift, err = a.checkMart(ctx, p, t, j, o)
			if drift {
				drifted++
			}
		} else {
			err = a.syncMart(ctx, p, t, j, gbsync.Options{Force: o.force, Rebuild: o.rebuild, Purge: o.purge}, "")
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed.add(j.name, explainCold(j.name, err))
		}
	}
	if err := failed.err(); err != nil {
		return err
	}
	if drifted > 0 {
		return &exitError{exitDrift, fmt.Errorf("drift found between Gold and ClickHouse in %d mart(s)", drifted)}
	}
	return nil
}

// servedJobs are the marts of the stage that need ClickHouse. A mart whose push
// record matches its Gold table has nothing to push or drop: a sync answers it from the
// record, and ClickHouse is reached (started, for the embedded server) only for the
// others. A mart that cannot be served is added to failed.
func (a *app) servedJobs(ctx context.Context, p *pipeline, stage string, marts []string, o serveOptions, failed *failures) []servedJob {
	recs, target := pushRecords(p.cfg), syncTarget(p.cfg)
	var todo []servedJob
	for _, name := range marts {
		if !p.cfg.Marts[name].Serving.IsEnabled() {
			if stage == "sync" {
				fmt.Fprintf(a.stdout, "sync %s: serving disabled\n", name)
			}
			continue
		}
		m, err := servedMart(p.cfg, name)
		if err != nil {
			failed.add(name, err)
			continue
		}
		tbl, err := p.lh.LoadTable(ctx, p.cfg.Marts[name].Table)
		if why, ok := p.noDataYet(ctx, name, err); err != nil && ok {
			fmt.Fprintf(a.stdout, "%s %s: no data yet (%s)\n", stage, name, why)
			continue
		}
		if err != nil {
			failed.add(name, p.outcomes.noGoldTable(p.cfg, stage, name, err))
			continue
		}
		if err := m.CheckGold(tbl); err != nil {
			failed.add(name, err)
			continue
		}
		if stage == "sync" && !o.force && !o.rebuild {
			if rec, ok := unchangedRecord(p.cfg, recs, m, tbl, target, time.Now()); ok {
				res := rec.Result()
				fmt.Fprintln(a.stdout, res.Summary(name))
				if rec.Cold != nil {
					p.coldMetrics(ctx, name)
					failed.add(name, explainCold(name, rec.Cold))
					continue
				}
				p.syncedMetrics(name, res, rec.NewestGrain)
				continue
			}
		}
		todo = append(todo, servedJob{name, m, tbl})
	}
	return todo
}

// syncMart syncs one mart (gbsync.Sync) between the removal of its push record and the
// new record (gbsync.Records), prints the summary (after prefix) and records the metrics.
func (a *app) syncMart(ctx context.Context, p *pipeline, t gbsync.Target, j servedJob, opt gbsync.Options, prefix string) error {
	mc := p.cfg.Marts[j.name]
	// The freshness (Gold's manifests) is only needed for the metrics after the push:
	// it is read meanwhile.
	freshc := make(chan gold.Freshness, 1)
	go func() {
		f, _ := gold.ReadFreshness(ctx, p.lh, mc.Table)
		freshc <- f
	}()
	recs := pushRecords(p.cfg)
	if err := recs.Begin(j.name); err != nil {
		return err
	}
	opt.Parallelism, opt.BatchRows = mc.Serving.Parallelism, mc.Serving.BatchRows
	opt.Log = a.log.With("stage", "sync", "mart", j.name)
	res, err := gbsync.Sync(ctx, t, j.m, j.tbl, opt)
	fmt.Fprintln(a.stdout, prefix+res.Summary(j.name))
	fresh := <-freshc
	if err != nil {
		p.lagMetric(j.name, fresh)
		var cold *gbsync.ColdError
		if errors.As(err, &cold) {
			if err := recs.WriteCold(j.m, j.tbl, syncTarget(p.cfg), res, fresh.NewestGrain, cold); err != nil {
				a.log.Warn("the next sync plans against ClickHouse again", "mart", j.name, "err", err)
			}
		}
		return err
	}
	p.m.Rows.WithLabelValues("sync", "", j.name, "pushed").Add(float64(res.Rows))
	if res.Skipped != "" {
		return nil // circuit open: ClickHouse keeps what it had
	}
	if err := recs.Write(j.m, j.tbl, syncTarget(p.cfg), res, fresh.NewestGrain); err != nil {
		a.log.Warn("the next sync plans against ClickHouse again", "mart", j.name, "err", err)
	}
	p.syncedMetrics(j.name, res, fresh.NewestGrain)
	p.storageMetrics(ctx, t, j)
	return nil
}

// checkMart compares one mart's hot window between Gold and ClickHouse (gbsync.Check),
// prints the drift and, with o.repair, re-pushes the drifting partitions and checks
// again. drift reports what is left. A mart that serves nothing under a clock-anchored
// window is an error (gbsync.ColdError), not "no drift".
func (a *app) checkMart(ctx context.Context, p *pipeline, t gbsync.Target, j servedJob, o serveOptions) (drift bool, err error) {
	drifts, err := gbsync.Check(ctx, t, j.m, j.tbl, gbsync.Options{})
	if coldOnly(err) != nil {
		return false, err
	}
	a.printUnservable(ctx, j.m, j.tbl)
	if len(drifts) > 0 && o.repair {
		gbsync.PrintDrift(a.stdout, j.name, drifts)
		only := gbsync.Options{Only: gbsync.DriftPartitions(drifts)}
		if err := a.syncMart(ctx, p, t, j, only, "repair: "); err != nil {
			return false, err
		}
		if drifts, err = gbsync.Check(ctx, t, j.m, j.tbl, gbsync.Options{}); coldOnly(err) != nil {
			return false, err
		}
	}
	p.m.Drift.WithLabelValues(j.name).Set(float64(len(gbsync.DriftPartitions(drifts))))
	switch {
	case len(drifts) > 0:
		gbsync.PrintDrift(a.stdout, j.name, drifts)
	case err == nil:
		fmt.Fprintf(a.stdout, "check %s: no drift\n", j.name)
	}
	return len(drifts) > 0, err
}

// lagMetric records how long ago Gold was calculated, for a sync that served nothing.
func (p *pipeline) lagMetric(mart string, fresh gold.Freshness) {
	if !fresh.LastCalculated.IsZero() {
		p.m.SyncLag.WithLabelValues(mart).Set(time.Since(fresh.LastCalculated).Seconds())
	}
}

// coldMetrics records the metrics of a sync answered by a cold push record, as syncMart
// records those of the cold sync itself.
func (p *pipeline) coldMetrics(ctx context.Context, mart string) {
	fresh, _ := gold.ReadFreshness(ctx, p.lh, p.cfg.Marts[mart].Table)
	p.lagMetric(mart, fresh)
}

// syncedMetrics records a sync of mart that left ClickHouse equal to Gold.
func (p *pipeline) syncedMetrics(mart string, res gbsync.Result, newestGrain string) {
	p.m.SyncLag.WithLabelValues(mart).Set(0)
	p.m.HotPartitions.WithLabelValues(mart, "clickhouse").Set(float64(len(res.Pushed) + res.Unchanged))
	if t, ok := grainTime(newestGrain); ok {
		p.m.DataNewest.WithLabelValues(mart, "clickhouse").Set(float64(t.Unix()))
	}
	p.m.LastSuccess.WithLabelValues("sync", "", mart).SetToCurrentTime()
}

// storageMetrics records what the mart's served table holds on ClickHouse's disk, when
// the target can tell (gbsync.StorageReporter); failing to read it fails no sync.
func (p *pipeline) storageMetrics(ctx context.Context, t gbsync.Target, j servedJob) {
	r, ok := t.(gbsync.StorageReporter)
	if !ok {
		return
	}
	s, err := r.Storage(ctx, j.m)
	if err != nil {
		p.a.log.Warn("reading the served table's parts for the metrics", "mart", j.name, "err", err)
		return
	}
	p.m.CHParts.WithLabelValues(j.name).Set(float64(s.Parts))
	p.m.CHBytes.WithLabelValues(j.name).Set(float64(s.Bytes))
	p.m.CHInactiveParts.WithLabelValues(j.name).Set(float64(s.InactiveParts))
	p.m.CHInactiveBytes.WithLabelValues(j.name).Set(float64(s.InactiveBytes))
}

// dataDirMetrics records what the embedded ClickHouse's data directory takes on disk
// (nothing for an external server, or before the embedded one first started).
func (p *pipeline) dataDirMetrics() {
	ch := p.cfg.ClickHouse
	if !ch.IsEmbedded() {
		return
	}
	u, err := chlocal.DiskUsage(ch.Local.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		p.a.log.Warn("measuring the clickhouse data directory for the metrics", "err", err)
		return
	}
	p.m.CHDataPartDirs.WithLabelValues().Set(float64(u.PartDirs))
	p.m.CHDataBytes.WithLabelValues().Set(float64(u.Bytes))
}

// grainTime parses a grain value as Gold renders it (a date, or RFC 3339 for hours).
func grainTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}
