package main

import (
	"context"
	"errors"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/hotconn"
	"goldbridge/cmd/goldbridge/internal/plan"
	"goldbridge/sync/pipeline"
)

// job is one command's stage runner with the config it was built from.
type job struct {
	*pipeline.Runner
	cfg *config.Config
}

// newJob opens the lakehouse of cfg and the stage runner over it; close it with
// j.close.
func (a *app) newJob(ctx context.Context, cfg *config.Config) (*job, error) {
	lh, err := plan.OpenLakehouse(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if a.metrics == nil {
		a.metrics = pipeline.NewMetrics()
	}
	hot := pipeline.Hot{Name: plan.HotName(cfg), Open: func(ctx context.Context) (pipeline.Target, func(), error) {
		return a.ch().Target(ctx, cfg)
	}}
	if ch := cfg.ClickHouse; ch.IsEmbedded() {
		hot.EmbeddedDir = ch.Local.Path
	}
	r := &pipeline.Runner{
		Lake: lh, Plan: plan.New(cfg), Hot: hot, Metrics: a.metrics, Log: a.log, Out: a.stdout,
		StateDir: cfg.StateDir, Progress: a.progress,
	}
	return &job{Runner: r, cfg: cfg}, nil
}

// close closes the runner, then the lakehouse.
func (j *job) close() {
	j.Close()
	j.Lake.Close()
}

// openWriter is the preamble of every command that writes tables: it loads the config,
// takes the state lock, opens the lakehouse and sweeps the files of failed writes. done
// releases all of it.
func (a *app) openWriter(ctx context.Context) (*job, func(), error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	unlock, err := pipeline.LockState(a.stateDir, a.log)
	if err != nil {
		return nil, nil, err
	}
	j, err := a.newJob(ctx, cfg)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	j.SweepOrphans(ctx)
	return j, func() { j.close(); unlock() }, nil
}

// ch reaches the configured ClickHouse (hotconn), counting the embedded server's
// restarts in the metrics.
func (a *app) ch() hotconn.Opener {
	return hotconn.Opener{Log: a.log, Restarted: func() {
		if a.metrics != nil {
			a.metrics.EmbeddedRestarts.Inc()
		}
	}}
}

// localPorts gives cfg's embedded server the state dir's own ports where the config
// leaves them unset (hotconn.Opener.LocalPorts); a pinned port that clashes with the
// recorded pair is a usage error.
func (a *app) localPorts(cfg *config.Config) error {
	err := a.ch().LocalPorts(cfg)
	if errors.Is(err, hotconn.ErrPortClash) {
		return &exitError{exitUsage, err}
	}
	return err
}
