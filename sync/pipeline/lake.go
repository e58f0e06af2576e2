package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/silver"
)

// Ingest lands each entity's sources; a source that fails (a broker down, a landing
// directory gone) is reported and the other sources and entities are still ingested.
func (r *Runner) Ingest(ctx context.Context, entities []string) (err error) {
	start := time.Now()
	defer func() { r.observe("ingest", start, err) }()
	failed := failures{stage: "ingest"}
	for _, name := range entities {
		e, err := r.Plan.Entity(name)
		if err != nil {
			return err
		}
		kafka, err := r.Plan.Kafka(name)
		if err != nil {
			return err
		}
		ok := true
		encrypt, _, err := r.Plan.PII(ctx, r.Lake, name)
		if err != nil {
			return err
		}
		for _, ks := range kafka {
			res, err := bronze.IngestKafka(ctx, r.Lake, e.Bronze, ks, bronze.Options{
				BatchRows: e.BatchRows, Codec: e.BronzeCodec, Transform: encrypt, Log: r.Log.With("stage", "ingest", "entity", name, "source", ks.Name),
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				ok = false
				failed.add(name+" source "+ks.Name, fmt.Errorf("ingest %s from %s: %w", name, ks.Name, err))
				r.Log.Error("source failed; the other sources go on", "stage", "ingest", "entity", name, "source", ks.Name, "err", err)
				continue
			}
			r.landed = r.landed || res.SnapshotID != 0
			r.Metrics.Rows.WithLabelValues("ingest", name, "", "ingested").Add(float64(res.Rows))
			fmt.Fprintf(r.Out, "ingest %s: kafka %s: %d records, %.0f rows/s, batch %s, snapshot %d\n",
				name, ks.Topic, res.Rows, float64(res.Rows)/max(res.Elapsed.Seconds(), 1e-9), res.BatchID, res.SnapshotID)
		}
		if len(e.Files) > 0 {
			if names, err := r.ingestFiles(ctx, name, e, encrypt); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				ok = false
				failed.add(name+" source "+strings.Join(names, ","), fmt.Errorf("ingest %s: %w", name, err))
				r.Log.Error("source failed; the other sources go on", "stage", "ingest", "entity", name, "source", strings.Join(names, ","), "err", err)
			}
		}
		if ok {
			r.Metrics.LastSuccess.WithLabelValues("ingest", name, "").SetToCurrentTime()
		} else {
			r.outcomes.entityFailed(name, "ingest")
		}
	}
	return failed.err()
}

// ingestFiles lands the landing files of one entity's file sources. A source that cannot
// be read does not stop the others (bronze.ErrSourceFailed): what they landed is reported
// and failed names the sources that failed (all of them when the error is another).
func (r *Runner) ingestFiles(ctx context.Context, name string, e Entity, encrypt func([]byte) ([]byte, error)) (failed []string, err error) {
	var total int64
	for _, s := range e.Files {
		total += dirSize(s)
	}
	progress, done := func(_, _ int64) {}, func() {}
	if r.Progress != nil {
		progress, done = r.Progress(name, total)
	}
	res, err := bronze.IngestFiles(ctx, r.Lake, e.Bronze, e.Files, bronze.Options{
		BatchRows: e.BatchRows, Codec: e.BronzeCodec, Transform: encrypt, Reingest: r.Reingest, RetryQuarantined: r.RetryQuarantined,
		Progress: progress, Log: r.Log.With("stage", "ingest", "entity", name),
	})
	done()
	if err != nil && !errors.Is(err, bronze.ErrSourceFailed) {
		for _, s := range e.Files {
			failed = append(failed, s.Name)
		}
		return failed, err
	}
	for _, f := range res.Failed {
		failed = append(failed, f.Name)
	}
	r.landed = r.landed || res.SnapshotID != 0
	r.Metrics.Rows.WithLabelValues("ingest", name, "", "ingested").Add(float64(res.Rows))
	r.Metrics.Rows.WithLabelValues("ingest", name, "", "blank").Add(float64(res.Blank))
	r.Metrics.FilesQuarantined.WithLabelValues(name).Set(float64(len(res.Quarantined)))
	fmt.Fprintf(r.Out, "ingest %s: %d files (%d already ingested, %d changed and skipped, %d quarantined), %d rows, %d blank lines, %.1f MB, %.0f rows/s, batch %s, snapshot %d\n",
		name, len(res.Files), res.Skipped, len(res.Changed), len(res.Quarantined), res.Rows, res.Blank, float64(res.Bytes)/1e6,
		float64(res.Rows)/max(res.Elapsed.Seconds(), 1e-9), res.BatchID, res.SnapshotID)
	for _, q := range res.Quarantined {
		fmt.Fprintf(r.Out, "    quarantined %s (%d bytes, since %s): %s\n", q.Path, q.Size, q.FirstSeen, q.Reason)
	}
	for _, w := range res.Waiting {
		fmt.Fprintf(r.Out, "    waiting for the newline of the last line of %s (read when it comes, or after tail_wait)\n", w)
	}
	return failed, err
}

// dirSize is the total size of a source's landing files, for the progress report only.
func dirSize(s bronze.FileSource) int64 {
	var n int64
	entries, _ := os.ReadDir(s.Dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// Silver runs each entity's Silver stage, an entity after the entities its lookups read;
// an entity that fails does not stop the others.
func (r *Runner) Silver(ctx context.Context, entities []string) (err error) {
	start := time.Now()
	defer func() { r.observe("silver", start, err) }()
	failed := failures{stage: "silver"}
	order, err := r.lookupsFirst(entities)
	if err != nil {
		return err
	}
	for _, name := range order {
		e, err := r.Plan.Entity(name)
		if err != nil {
			return err
		}
		spec := e.Silver
		_, decrypt, err := r.Plan.PII(ctx, r.Lake, name)
		if err != nil {
			return err
		}
		res, err := silver.Run(ctx, r.Lake, spec, e.Bronze, silver.Options{
			Log: r.Log.With("stage", "silver", "entity", name), Decrypt: decrypt, PassRows: e.PassRows, PassBytes: e.PassBytes,
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, silver.ErrQuarantineGate) {
			r.Metrics.QuarantineGate.WithLabelValues(name).Set(1)
		}
		r.observeQuality(name, res)
		if errors.Is(err, silver.ErrCriticalCheck) {
			r.PrintSilverResult("silver", spec, res) // which check failed, on what
		}
		if err != nil {
			r.outcomes.entityFailed(name, "silver")
			failed.add(name, err) // silver.Run names the entity
			r.Log.Error("entity failed; the other entities go on", "stage", "silver", "entity", name, "err", err)
			continue
		}
		r.Metrics.QuarantineGate.WithLabelValues(name).Set(0)
		r.committed = r.committed || res.SnapshotID != 0 || res.QuarantineSnapshotID != 0 || res.KeysSnapshotID != 0
		c := res.Counts
		merged := "merged"
		if spec.Mode == silver.ModeAppend {
			merged = "appended"
		}
		for outcome, n := range map[string]int64{merged: c.Current, "superseded": c.Superseded, "duplicate": c.Duplicates, "quarantined": c.Quarantined, "skipped": c.Skipped} {
			r.Metrics.Rows.WithLabelValues("silver", name, "", outcome).Add(float64(n))
		}
		r.Metrics.LastSuccess.WithLabelValues("silver", name, "").SetToCurrentTime()
		r.PrintSilverResult("silver", spec, res)
	}
	return failed.err()
}

// lookupsFirst orders entities so that an entity comes after the entities its lookups
// read (validate refuses cycles), and otherwise as given.
func (r *Runner) lookupsFirst(entities []string) ([]string, error) {
	out := make([]string, 0, len(entities))
	placed := map[string]bool{}
	var place func(name string) error
	place = func(name string) error {
		if placed[name] {
			return nil
		}
		placed[name] = true
		e, err := r.Plan.Entity(name)
		if err != nil {
			return err
		}
		for _, dep := range e.Lookups {
			if slices.Contains(entities, dep) {
				if err := place(dep); err != nil {
					return err
				}
			}
		}
		out = append(out, name)
		return nil
	}
	for _, name := range entities {
		if err := place(name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// observeQuality counts a Silver run's failed checks and, when it read rows, replaces
// the entity's undeclared fields gauge with the run's (bounded by the run's report).
func (r *Runner) observeQuality(name string, res silver.Result) {
	for _, f := range res.Quality.Failures {
		r.Metrics.SilverCheckFailures.WithLabelValues(name, f.Check, f.Severity).Inc()
	}
	if res.Quality.BronzeRows == 0 { // read nothing, or stopped before the report
		return
	}
	r.Metrics.SilverUndeclared.DeletePartialMatch(prometheus.Labels{"entity": name})
	for _, f := range res.Quality.Undeclared {
		r.Metrics.SilverUndeclared.WithLabelValues(name, f.Field).Set(float64(f.Rows))
	}
	if n := res.Quality.UndeclaredOverflow; n > 0 {
		r.Metrics.SilverUndeclared.WithLabelValues(name, "").Set(float64(n))
	}
}

// PrintSilverResult prints a Silver run's accounting (stage "silver" or "replay") and its
// quality report, and logs the report's warnings and its failed checks of severity
// warning (a critical one is the run's error).
func (r *Runner) PrintSilverResult(stage string, spec silver.EntitySpec, res silver.Result) {
	c := res.Counts
	name := spec.Name
	if spec.Mode == silver.ModeAppend {
		fmt.Fprintf(r.Out, "%s %s: %d bronze rows = %d appended + %d duplicates + %d quarantined",
			stage, name, c.Read, c.Current, c.Duplicates, c.Quarantined)
	} else {
		skipped := ""
		if spec.Debezium != nil {
			skipped = fmt.Sprintf(" + %d tombstones", c.Skipped)
		}
		fmt.Fprintf(r.Out, "%s %s: %d bronze rows = %d current + %d superseded + %d duplicates + %d quarantined%s; silver +%d new, %d updated (%d deleted)",
			stage, name, c.Read, c.Current, c.Superseded, c.Duplicates, c.Quarantined, skipped, c.Inserted, c.Updated, c.Deleted)
	}
	if res.Passes > 1 {
		fmt.Fprintf(r.Out, "; in %d passes", res.Passes)
		switch res.Restarts {
		case 0:
		case 1:
			fmt.Fprint(r.Out, " (started again once: a pass held more than pass_bytes)")
		default:
			fmt.Fprintf(r.Out, " (started again %d times: a pass held more than pass_bytes)", res.Restarts)
		}
	}
	fmt.Fprintf(r.Out, "; %.0f rows/s, run %s, snapshot %d\n", float64(c.Read)/max(res.Elapsed.Seconds(), 1e-9), res.RunID, res.SnapshotID)
	for _, l := range res.Quality.Lines() {
		fmt.Fprintf(r.Out, "  %s\n", l)
	}
	for _, w := range res.Quality.Warnings {
		r.Log.Warn(w, "stage", stage, "entity", name)
	}
	for _, f := range res.Quality.Failures {
		if f.Severity == silver.SeverityWarning {
			r.Log.Warn("quality check failed; published (severity warning)", "stage", stage, "entity", name, "check", f.Check, "detail", f.Detail)
		}
	}
}

// Gold runs every mart; a mart whose circuit opens does not stop the others, and the
// returned error then wraps gold.ErrCircuitOpen.
func (r *Runner) Gold(ctx context.Context, marts []string) (err error) {
	start := time.Now()
	defer func() { r.observe("gold", start, err) }()
	var opened []string
	failed := failures{stage: "gold"}
	for _, name := range marts {
		mc, err := r.Plan.Mart(name)
		if err != nil {
			return err
		}
		spec := mc.Gold
		res, err := gold.Run(ctx, r.Lake, spec, gold.Options{Full: r.Full, Rebuild: r.Rebuild, NoDelta: r.NoDelta, Log: r.Log.With("stage", "gold", "mart", name)})
		r.outcomes.goldRan(name, err)
		for _, f := range res.Report.Failures {
			r.Metrics.DQFailures.WithLabelValues(name, f.Check, f.Severity).Inc()
			fmt.Fprintf(r.Out, "gold %s: check %s (%s, %s) failed on %d rows\n", name, f.Check, f.Type, f.Severity, f.Count)
			for _, ex := range f.Examples {
				fmt.Fprintf(r.Out, "    %s\n", ex)
			}
		}
		if errors.Is(err, gold.ErrCircuitOpen) {
			r.Metrics.CircuitOpen.WithLabelValues(name).Set(1)
			opened = append(opened, name)
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			err = r.outcomes.withUpstream(mc.Reads, err)
			failed.add(name, err)
			r.Log.Error("mart failed; the other marts go on", "stage", "gold", "mart", name, "err", err)
			continue
		}
		r.Metrics.CircuitOpen.WithLabelValues(name).Set(0)
		r.committed = r.committed || res.SnapshotID != 0
		r.Metrics.Rows.WithLabelValues("gold", "", name, "computed").Add(float64(res.Rows))
		r.Metrics.Rows.WithLabelValues("gold", "", name, "null_grain").Add(float64(res.NullGrainRows))
		r.Metrics.LastSuccess.WithLabelValues("gold", "", name).SetToCurrentTime()
		r.bg.Go(func() { // the freshness gauges read Gold's manifests: beside the next stage
			if f, ferr := gold.ReadFreshness(ctx, r.Lake, spec.Table); ferr == nil && !f.LastCalculated.IsZero() {
				r.Metrics.CalculatedAt.WithLabelValues(name).Set(float64(f.LastCalculated.Unix()))
				if t, ok := grainTime(f.NewestGrain); ok {
					r.Metrics.DataNewest.WithLabelValues(name, "gold").Set(float64(t.Unix()))
				}
			}
		})
		fmt.Fprintf(r.Out, "gold %s: %s, %d silver rows%s -> %d gold rows, %.2fs, run %s, snapshot %d\n",
			name, goldScope(res), res.SilverRows, nullGrains(res), res.Rows, res.Elapsed.Seconds(), res.RunID, res.SnapshotID)
	}
	if err := failed.err(); err != nil {
		return err
	}
	if len(opened) > 0 {
		return fmt.Errorf("marts %s: %w", strings.Join(opened, ", "), gold.ErrCircuitOpen)
	}
	return nil
}

// goldScope says which partitions a Gold run recomputed.
func goldScope(res gold.Result) string {
	scope := fmt.Sprintf("%d partitions", len(res.Partitions))
	if res.Full {
		scope = "full rebuild, " + scope
		if res.Passes > 1 {
			scope += fmt.Sprintf(" in %d passes", res.Passes)
		}
	} else if len(res.Partitions) > 0 && len(res.Partitions) <= 5 {
		scope += " (" + strings.Join(res.Partitions, ", ") + ")"
	}
	if res.Delta {
		scope += " merged with the added rows"
	}
	return scope
}

// nullGrains notes the rows a Gold run left out for want of a grain.
func nullGrains(res gold.Result) string {
	if res.NullGrainRows > 0 {
		return fmt.Sprintf(" (+%d without a grain, not aggregated)", res.NullGrainRows)
	}
	return ""
}

// Replay rebuilds one entity's Silver table from all of Bronze (silver.Replay) and
// prints the result as the silver stage does.
func (r *Runner) Replay(ctx context.Context, name string) error {
	e, err := r.Plan.Entity(name)
	if err != nil {
		return err
	}
	_, decrypt, err := r.Plan.PII(ctx, r.Lake, name)
	if err != nil {
		return err
	}
	res, err := silver.Replay(ctx, r.Lake, e.Silver, e.Bronze, silver.Options{
		Log: r.Log.With("stage", "replay", "entity", name), Decrypt: decrypt, PassRows: e.PassRows, PassBytes: e.PassBytes,
	})
	r.observeQuality(name, res)
	if errors.Is(err, silver.ErrCriticalCheck) {
		r.PrintSilverResult("replay", e.Silver, res) // which check failed, on what
	}
	if err != nil {
		return fmt.Errorf("replay %s: %w", name, err)
	}
	r.PrintSilverResult("replay", e.Silver, res)
	return nil
}
