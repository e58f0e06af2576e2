package main

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/gold"
	"goldbridge/serving"
	gbsync "goldbridge/sync"
)

// syncStage pushes (stage "sync") or reconciles (stage "check") the marts' hot windows
// and records the serving metrics. A mart whose circuit is open is skipped by sync.
func (a *app) syncStage(ctx context.Context, p *pipeline, stage string, marts []string) (err error) {
	return a.syncMarts(ctx, p, stage, marts, false)
}

// syncMarts is syncStage; with purge (a forget) every copy of rows that left a served
// table is deleted from ClickHouse's disk after its push (sync.Options.Purge).
func (a *app) syncMarts(ctx context.Context, p *pipeline, stage string, marts []string, purge bool) (err error) {
	start := time.Now()
	defer func() { p.observe(stage, start, err) }()
	var served []string
	for _, name := range marts {
		if p.cfg.Marts[name].Serving.IsEnabled() {
			served = append(served, name)
		}
	}
	if len(served) == 0 {
		return nil
	}
	// A mart whose push record matches its Gold table has nothing to push or drop: it
	// is answered from the record, and ClickHouse is reached (started, for the
	// embedded server) only for the others.
	recs, target := pushRecords(p.cfg), syncTarget(p.cfg)
	type job struct {
		name string
		m    *serving.Mart
		tbl  *table.Table
	}
	var todo []job
	failed := failures{stage: stage}
	for _, name := range served {
		m, err := servedMart(p.cfg, name)
		if err != nil {
			failed.add(name, err)
			continue
		}
		tbl, err := p.lh.LoadTable(ctx, p.cfg.Marts[name].Table)
		if err != nil {
			failed.add(name, fmt.Errorf("%s %s: gold table: %w (run gold first)", stage, name, err))
			continue
		}
		if err := gbsync.Servable(m, tbl); err != nil {
			failed.add(name, err)
			continue
		}
		if stage == "sync" {
			if rec, ok := unchangedRecord(p.cfg, recs, m, tbl, target, time.Now()); ok {
				res := rec.Result()
				fmt.Fprintln(a.stdout, res.Summary(name))
				p.syncedMetrics(name, res, rec.NewestGrain)
				continue
			}
		}
		todo = append(todo, job{name, m, tbl})
	}
	if len(todo) == 0 {
		return failed.err()
	}
	c, stop, err := p.clickhouse(ctx)
	if err != nil {
		return err
	}
	defer stop()
	defer c.Close()
	drifted := 0
	for _, j := range todo {
		name, m, tbl := j.name, j.m, j.tbl
		mc := p.cfg.Marts[name]
		if stage == "check" {
			drifts, err := gbsync.Check(ctx, c, m, tbl, gbsync.Options{})
			if coldOnly(err) != nil {
				failed.add(name, err)
				continue
			}
			a.printUnservable(ctx, m, tbl)
			p.m.Drift.WithLabelValues(name).Set(float64(len(gbsync.DriftPartitions(drifts))))
			switch {
			case len(drifts) > 0:
				drifted++
				gbsync.PrintDrift(a.stdout, name, drifts)
			case err == nil:
				fmt.Fprintf(a.stdout, "check %s: no drift\n", name)
			}
			if err != nil {
				failed.add(name, explainCold(name, err)) // serves nothing: not "no drift"
			}
			continue
		}
		// The freshness (Gold's manifests) is only needed for the metrics after the
		// push: it is read meanwhile.
		freshc := make(chan gold.Freshness, 1)
		go func() {
			f, _ := gold.ReadFreshness(ctx, p.lh, mc.Table)
			freshc <- f
		}()
		if err := recs.Begin(name); err != nil {
			failed.add(name, err)
			continue
		}
		res, err := gbsync.Sync(ctx, c, m, tbl, gbsync.Options{
			Parallelism: mc.Serving.Parallelism, BatchRows: mc.Serving.BatchRows,
			Log: a.log.With("stage", "sync", "mart", name), Ensured: p.ensuredAhead(name), Purge: purge,
		})
		fmt.Fprintln(a.stdout, res.Summary(name))
		fresh := <-freshc
		if err != nil {
			if !fresh.LastCalculated.IsZero() {
				p.m.SyncLag.WithLabelValues(name).Set(time.Since(fresh.LastCalculated).Seconds())
			}
			if ctx.Err() != nil {
				return err
			}
			failed.add(name, explainCold(name, err))
			continue
		}
		p.m.Rows.WithLabelValues("sync", "", name, "pushed").Add(float64(res.Rows))
		if res.Skipped != "" {
			continue // circuit open or serving disabled: ClickHouse keeps what it had
		}
		if err := recs.Write(m, tbl, target, res, fresh.NewestGrain); err != nil {
			a.log.Warn("the next sync plans against ClickHouse again", "mart", name, "err", err)
		}
		p.syncedMetrics(name, res, fresh.NewestGrain)
	}
	if err := failed.err(); err != nil {
		return err
	}
	if drifted > 0 {
		return &exitError{exitDrift, fmt.Errorf("drift found between Gold and ClickHouse in %d mart(s)", drifted)}
	}
	return nil
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

// grainTime parses a grain value as Gold renders it (a date, or RFC 3339 for hours).
func grainTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}
