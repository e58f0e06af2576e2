package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"goldbridge/lakehouse/gold"
)

// Stages are the stages Run knows, in the order it runs them.
var Stages = []string{"ingest", "silver", "gold", "sync", "check", "maintain"}

// Run runs the given stages of entities and marts in data-flow order. A stage's failures
// do not stop the next stages (source isolation); the error joins them. A mart whose
// circuit opened is returned as gold.ErrCircuitOpen when nothing else failed. Unless
// "maintain" is among the stages, a run of a lakehouse or sync stage maintains after
// them when MaintainDue.
func (r *Runner) Run(ctx context.Context, stages, entities, marts []string) error {
	has := func(s string) bool { return slices.Contains(stages, s) }
	if has("ingest") || has("silver") || has("gold") {
		r.SweepOrphans(ctx)
	}
	if has("sync") || has("check") {
		if err := r.connectAhead(ctx, has("sync"), has("check"), marts); err != nil {
			return err
		}
	}
	start := time.Now()
	var circuit error
	var failed []error
	auto := !has("maintain") && (has("ingest") || has("silver") || has("gold") || has("sync"))
	for _, st := range Stages {
		if !has(st) && !(st == "maintain" && auto && r.MaintainDue()) {
			continue
		}
		var err error
		switch st {
		case "ingest":
			err = r.Ingest(ctx, entities)
			if r.landed && r.aheadOnLanding != nil {
				r.openAhead(ctx, r.aheadOnLanding)
			}
		case "silver":
			err = r.Silver(ctx, entities)
		case "gold":
			err = r.Gold(ctx, marts)
		case "sync", "check":
			err = r.Serve(ctx, st, marts, ServeOptions{})
		case "maintain":
			// Last: it touches only the lake, and keeps every snapshot the stages above
			// recorded as a watermark.
			err = r.Maintain(ctx, entities, marts, nil)
		}
		if errors.Is(err, gold.ErrCircuitOpen) {
			circuit = err // keep going: the other marts are still synced
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed = append(failed, err)
		}
	}
	r.Log.Info("run finished", "stages", fmt.Sprint(stages), "seconds", fmt.Sprintf("%.2f", time.Since(start).Seconds()))
	switch {
	case len(failed) == 1:
		return failed[0]
	case len(failed) > 1:
		return errors.Join(failed...)
	}
	return circuit
}

// connectAhead opens the hot tier while the lakehouse stages run, unless every served
// mart's push record already matches its Gold table (a sync then reaches ClickHouse
// only if ingest lands something new, or Gold changes anyway). check always connects;
// with sync the served tables are also ensured on the connection.
func (r *Runner) connectAhead(ctx context.Context, sync, check bool, marts []string) error {
	var served []string
	for _, name := range marts {
		mc, err := r.Plan.Mart(name)
		if err != nil {
			return err
		}
		if mc.Serving {
			served = append(served, name)
		}
	}
	var ensure []string
	if sync {
		ensure = served
	}
	switch {
	case len(served) == 0:
	case check || !r.RecordedAll(ctx, served):
		r.openAhead(ctx, ensure)
	default:
		r.aheadOnLanding = ensure
	}
	return nil
}
