package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/serving"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/ddl"
	gbsync "goldbridge/sync"
)

// ErrDrift is returned by the check stage when a mart's hot window differs between Gold
// and ClickHouse (and nothing failed).
var ErrDrift = errors.New("drift found between Gold and ClickHouse")

// ServeOptions are what the sync, check and forget commands add to the stages of Run.
type ServeOptions struct {
	Force   bool // sync --force: push every hot partition
	Rebuild bool // sync --rebuild: drop and recreate the served tables first
	Repair  bool // check --repair: re-push the drifting partitions, then check again
	Purge   bool // forget: delete every copy of rows that left a served table from disk
}

// servedJob is one mart a sync or check stage reaches ClickHouse for.
type servedJob struct {
	name string
	mc   Mart
	m    *serving.Mart
	tbl  *table.Table
}

// Serve pushes (stage "sync") or reconciles (stage "check") the marts' hot windows and
// records the serving metrics: the one flow of Run's stages and of the sync, check and
// forget commands. A mart whose circuit is open is skipped by sync; a mart that fails is
// reported and the others still run. Check returns ErrDrift when any mart drifts and
// nothing failed.
func (r *Runner) Serve(ctx context.Context, stage string, marts []string, o ServeOptions) (err error) {
	start := time.Now()
	defer func() { r.observe(stage, start, err) }()
	failed := failures{stage: stage}
	defer r.dataDirMetrics() // after done below: what a run leaves on disk
	todo := r.servedJobs(ctx, stage, marts, o, &failed)
	if len(todo) == 0 {
		return failed.err()
	}
	t, done, err := r.hot(ctx)
	if err != nil {
		return err
	}
	defer done()
	drifted := 0
	for _, j := range todo {
		var err error
		if stage == "check" {
			var drift bool
			drift, err = r.checkMart(ctx, t, j, o)
			if drift {
				drifted++
			}
		} else {
			err = r.syncMart(ctx, t, j, gbsync.Options{Force: o.Force, Rebuild: o.Rebuild, Purge: o.Purge}, "")
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed.add(j.name, ExplainCold(j.name, err))
		}
	}
	if err := failed.err(); err != nil {
		return err
	}
	if drifted > 0 {
		return fmt.Errorf("%w in %d mart(s)", ErrDrift, drifted)
	}
	return nil
}

// servedJobs are the marts of the stage that need ClickHouse. A mart whose push
// record matches its Gold table has nothing to push or drop: a sync answers it from the
// record, and ClickHouse is reached (started, for the embedded server) only for the
// others. A mart that cannot be served is added to failed.
func (r *Runner) servedJobs(ctx context.Context, stage string, marts []string, o ServeOptions, failed *failures) []servedJob {
	recs := r.records()
	var todo []servedJob
	for _, name := range marts {
		mc, err := r.Plan.Mart(name)
		if err != nil {
			failed.add(name, err)
			continue
		}
		if !mc.Serving {
			if stage == "sync" {
				fmt.Fprintf(r.Out, "sync %s: serving disabled\n", name)
			}
			continue
		}
		m, err := r.Plan.Served(name)
		if err != nil {
			failed.add(name, err)
			continue
		}
		tbl, err := r.Lake.LoadTable(ctx, mc.Gold.Table)
		if why, ok := r.noDataYet(ctx, mc, err); err != nil && ok {
			fmt.Fprintf(r.Out, "%s %s: no data yet (%s)\n", stage, name, why)
			continue
		}
		if err != nil {
			failed.add(name, r.outcomes.noGoldTable(stage, name, mc.Reads, err))
			continue
		}
		if err := m.CheckGold(tbl); err != nil {
			failed.add(name, err)
			continue
		}
		if stage == "sync" && !o.Force && !o.Rebuild {
			if rec, ok := r.unchangedRecord(recs, m, tbl, time.Now()); ok {
				res := rec.Result()
				fmt.Fprintln(r.Out, res.Summary(name))
				if rec.Cold != nil {
					r.coldMetrics(ctx, name, mc)
					failed.add(name, ExplainCold(name, rec.Cold))
					continue
				}
				r.syncedMetrics(name, res, rec.NewestGrain)
				continue
			}
		}
		todo = append(todo, servedJob{name, mc, m, tbl})
	}
	return todo
}

// syncMart syncs one mart (gbsync.Sync) between the removal of its push record and the
// new record (gbsync.Records), prints the summary (after prefix) and records the metrics.
func (r *Runner) syncMart(ctx context.Context, t gbsync.Target, j servedJob, opt gbsync.Options, prefix string) error {
	// The freshness (Gold's manifests) is only needed for the metrics after the push:
	// it is read meanwhile.
	freshc := make(chan gold.Freshness, 1)
	go func() {
		f, _ := gold.ReadFreshness(ctx, r.Lake, j.mc.Gold.Table)
		freshc <- f
	}()
	recs := r.records()
	if err := recs.Begin(j.name); err != nil {
		return err
	}
	opt.Parallelism, opt.BatchRows = j.mc.Parallelism, j.mc.BatchRows
	opt.Log = r.Log.With("stage", "sync", "mart", j.name)
	res, err := gbsync.Sync(ctx, t, j.m, j.tbl, opt)
	fmt.Fprintln(r.Out, prefix+res.Summary(j.name))
	fresh := <-freshc
	if err != nil {
		r.lagMetric(j.name, fresh)
		var cold *gbsync.ColdError
		if errors.As(err, &cold) {
			if err := recs.WriteCold(j.m, j.tbl, r.Hot.Name, res, fresh.NewestGrain, cold); err != nil {
				r.Log.Warn("the next sync plans against ClickHouse again", "mart", j.name, "err", err)
			}
		}
		return err
	}
	r.Metrics.Rows.WithLabelValues("sync", "", j.name, "pushed").Add(float64(res.Rows))
	if res.Skipped != "" {
		return nil // circuit open: ClickHouse keeps what it had
	}
	if err := recs.Write(j.m, j.tbl, r.Hot.Name, res, fresh.NewestGrain); err != nil {
		r.Log.Warn("the next sync plans against ClickHouse again", "mart", j.name, "err", err)
	}
	r.syncedMetrics(j.name, res, fresh.NewestGrain)
	r.storageMetrics(ctx, t, j)
	return nil
}

// checkMart compares one mart's hot window between Gold and ClickHouse (gbsync.Check),
// prints the drift and, with o.Repair, re-pushes the drifting partitions and checks
// again. drift reports what is left. A mart that serves nothing under a clock-anchored
// window is an error (gbsync.ColdError), not "no drift".
func (r *Runner) checkMart(ctx context.Context, t gbsync.Target, j servedJob, o ServeOptions) (drift bool, err error) {
	drifts, err := gbsync.Check(ctx, t, j.m, j.tbl, gbsync.Options{})
	if coldOnly(err) != nil {
		return false, err
	}
	r.PrintUnservable(ctx, j.m, j.tbl)
	if len(drifts) > 0 && o.Repair {
		gbsync.PrintDrift(r.Out, j.name, drifts)
		only := gbsync.Options{Only: gbsync.DriftPartitions(drifts)}
		if err := r.syncMart(ctx, t, j, only, "repair: "); err != nil {
			return false, err
		}
		if drifts, err = gbsync.Check(ctx, t, j.m, j.tbl, gbsync.Options{}); coldOnly(err) != nil {
			return false, err
		}
	}
	r.Metrics.Drift.WithLabelValues(j.name).Set(float64(len(gbsync.DriftPartitions(drifts))))
	switch {
	case len(drifts) > 0:
		gbsync.PrintDrift(r.Out, j.name, drifts)
	case err == nil:
		fmt.Fprintf(r.Out, "check %s: no drift\n", j.name)
	}
	return len(drifts) > 0, err
}

// PrintUnservable prints the hot Gold partitions that are not served (their grain is
// outside what ClickHouse's grain type holds), if any.
func (r *Runner) PrintUnservable(ctx context.Context, m *serving.Mart, tbl *table.Table) {
	if u, err := gbsync.Unservable(ctx, m, tbl, time.Now()); err == nil && len(u) > 0 {
		fmt.Fprintf(r.Out, "check %s: %s\n", m.Name, gbsync.UnservableSummary(u))
	}
}

// ExplainCold adds the keys that serve a backfill to the error of a sync that found
// nothing in a clock-anchored hot window (gbsync.ColdError).
func ExplainCold(mart string, err error) error {
	var ce *gbsync.ColdError
	if !errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%w; to serve it set marts.%s.serving.hot_window_anchor: data (the window then counts back from the newest Gold partition) or widen marts.%s.serving.hot_window",
		err, mart, mart)
}

// coldOnly returns err unless it is a gbsync.ColdError: a check that found nothing in a
// clock-anchored window has still compared what there is.
func coldOnly(err error) error {
	var ce *gbsync.ColdError
	if errors.As(err, &ce) {
		return nil
	}
	return err
}

// records are the marts' push records (gbsync.Records), in the state directory.
func (r *Runner) records() gbsync.Records {
	return gbsync.Records{Dir: filepath.Join(r.StateDir, "pushed"), Definition: ddl.Statements}
}

// RecordedAll reports whether every mart's push record matches its Gold table as it is
// now: a sync of them has nothing to do and need not reach ClickHouse.
func (r *Runner) RecordedAll(ctx context.Context, marts []string) bool {
	recs, now := r.records(), time.Now()
	for _, name := range marts {
		mc, err := r.Plan.Mart(name)
		if err != nil {
			return false
		}
		tbl, err := r.Lake.LoadTable(ctx, mc.Gold.Table)
		if err != nil {
			return false
		}
		m, err := r.Plan.Served(name)
		if err != nil || m.CheckGold(tbl) != nil {
			return false
		}
		if _, ok := r.unchangedRecord(recs, m, tbl, now); !ok {
			return false
		}
	}
	return true
}

// unchangedRecord is recs.Unchanged, unless the embedded server has a definition it
// cannot load (a full disk's leftover): the record then no longer says what the server
// holds, and the sync must reach it (its start moves the definition aside, the sync
// recreates the object).
func (r *Runner) unchangedRecord(recs gbsync.Records, m *serving.Mart, tbl *table.Table, now time.Time) (gbsync.Record, bool) {
	if dir := r.Hot.EmbeddedDir; dir != "" && chlocal.MetadataBroken(dir) {
		return gbsync.Record{}, false
	}
	return recs.Unchanged(m, tbl, r.Hot.Name, now)
}

// lagMetric records how long ago Gold was calculated, for a sync that served nothing.
func (r *Runner) lagMetric(mart string, fresh gold.Freshness) {
	if !fresh.LastCalculated.IsZero() {
		r.Metrics.SyncLag.WithLabelValues(mart).Set(time.Since(fresh.LastCalculated).Seconds())
	}
}

// coldMetrics records the metrics of a sync answered by a cold push record, as syncMart
// records those of the cold sync itself.
func (r *Runner) coldMetrics(ctx context.Context, name string, mc Mart) {
	fresh, _ := gold.ReadFreshness(ctx, r.Lake, mc.Gold.Table)
	r.lagMetric(name, fresh)
}

// syncedMetrics records a sync of mart that left ClickHouse equal to Gold.
func (r *Runner) syncedMetrics(mart string, res gbsync.Result, newestGrain string) {
	r.Metrics.SyncLag.WithLabelValues(mart).Set(0)
	r.Metrics.HotPartitions.WithLabelValues(mart, "clickhouse").Set(float64(len(res.Pushed) + res.Unchanged))
	if t, ok := grainTime(newestGrain); ok {
		r.Metrics.DataNewest.WithLabelValues(mart, "clickhouse").Set(float64(t.Unix()))
	}
	r.Metrics.LastSuccess.WithLabelValues("sync", "", mart).SetToCurrentTime()
}

// storageMetrics records what the mart's served table holds on ClickHouse's disk, when
// the target can tell (gbsync.StorageReporter); failing to read it fails no sync.
func (r *Runner) storageMetrics(ctx context.Context, t gbsync.Target, j servedJob) {
	sr, ok := t.(gbsync.StorageReporter)
	if !ok {
		return
	}
	s, err := sr.Storage(ctx, j.m)
	if err != nil {
		r.Log.Warn("reading the served table's parts for the metrics", "mart", j.name, "err", err)
		return
	}
	r.Metrics.CHParts.WithLabelValues(j.name).Set(float64(s.Parts))
	r.Metrics.CHBytes.WithLabelValues(j.name).Set(float64(s.Bytes))
	r.Metrics.CHInactiveParts.WithLabelValues(j.name).Set(float64(s.InactiveParts))
	r.Metrics.CHInactiveBytes.WithLabelValues(j.name).Set(float64(s.InactiveBytes))
	if j.m.Bitmap() {
		r.Metrics.CHDictKeys.WithLabelValues(j.name).Set(float64(s.DictionaryKeys))
		r.Metrics.CHDictBytes.WithLabelValues(j.name).Set(float64(s.DictionaryBytes))
	}
}

// dataDirMetrics records what the embedded ClickHouse's data directory takes on disk
// (nothing for an external server, or before the embedded one first started).
func (r *Runner) dataDirMetrics() {
	dir := r.Hot.EmbeddedDir
	if dir == "" {
		return
	}
	u, err := chlocal.DiskUsage(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		r.Log.Warn("measuring the clickhouse data directory for the metrics", "err", err)
		return
	}
	r.Metrics.CHDataPartDirs.WithLabelValues().Set(float64(u.PartDirs))
	r.Metrics.CHDataBytes.WithLabelValues().Set(float64(u.Bytes))
}

// grainTime parses a grain value as Gold renders it (a date, or RFC 3339 for hours).
func grainTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// noDataYet tells whether a mart whose Gold table could not be loaded (err) has simply
// received no data yet, and why: gold ran for it in this pipeline and found no Silver
// rows, or its source's Silver table exists and holds none (a table of a new pipeline
// that nothing has reached yet, issue 40). A sync or check of such a mart has nothing
// to do and is no failure. A Silver table with rows but no Gold table still fails
// ("run gold first"), and so does one whose upstream failed in this run.
func (r *Runner) noDataYet(ctx context.Context, mc Mart, err error) (string, bool) {
	if !errors.Is(err, catalog.ErrNoSuchTable) || r.outcomes.upstream(mc.Reads) != "" {
		return "", false
	}
	if goldErr, ran := r.outcomes.gold[mc.Gold.Name]; ran {
		return "gold found no Silver rows to build it from", goldErr == nil
	}
	src := mc.Gold.SourceTable
	tbl, err := r.Lake.LoadTable(ctx, src)
	if err != nil {
		return "", false // Silver has not run either: run silver and gold first
	}
	if s := tbl.CurrentSnapshot(); s != nil && (s.Summary == nil || s.Summary.Properties["total-records"] != "0") {
		return "", false
	}
	return src + " has no rows yet", true
}
