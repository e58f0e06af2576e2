package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/catalog"
)

// runOutcomes remembers what failed in the earlier stages of one pipeline, so that a
// later stage's error names that cause rather than "run gold first" right after `run`
// ran gold (issue 37).
type runOutcomes struct {
	entities map[string]string // entity -> the first stage that failed for it ("ingest", "silver")
	gold     map[string]error  // mart -> the outcome of its gold stage (nil: it ran)
}

func (o *runOutcomes) entityFailed(entity, stage string) {
	if o.entities == nil {
		o.entities = map[string]string{}
	}
	if _, ok := o.entities[entity]; !ok {
		o.entities[entity] = stage
	}
}

func (o *runOutcomes) goldRan(mart string, err error) {
	if o.gold == nil {
		o.gold = map[string]error{}
	}
	o.gold[mart] = err
}

// upstream names the failures of this run among the entities mart reads ("ingest failed
// for orders"), or "".
func (o *runOutcomes) upstream(cfg *config.Config, mart string) string {
	m := cfg.Marts[mart]
	entities := []string{m.Source}
	for _, j := range m.Joins {
		entities = append(entities, j.Entity)
	}
	var out []string
	for _, e := range entities {
		if stage, ok := o.entities[e]; ok {
			out = append(out, fmt.Sprintf("%s failed for %s", stage, e))
		}
	}
	return strings.Join(slices.Compact(out), ", ")
}

// withUpstream adds to a mart's gold error the failures of this run it may follow from.
func (o *runOutcomes) withUpstream(cfg *config.Config, mart string, err error) error {
	if up := o.upstream(cfg, mart); up != "" {
		return fmt.Errorf("%w (%s in this run)", err, up)
	}
	return err
}

// noGoldTable is the error of a sync or check stage that could not load mart's Gold
// table (err): it says why there is none when this pipeline ran gold for the mart.
func (o *runOutcomes) noGoldTable(cfg *config.Config, stage, mart string, err error) error {
	goldErr, ran := o.gold[mart]
	switch {
	case !ran || !errors.Is(err, catalog.ErrNoSuchTable):
		return fmt.Errorf("%s %s: gold table: %w (run gold first)", stage, mart, err)
	case goldErr != nil:
		return fmt.Errorf("%s %s: no Gold table: gold did not finish for the mart in this run (reported above): %w", stage, mart, err)
	}
	cause := "its Silver table has no rows yet"
	if up := o.upstream(cfg, mart); up != "" {
		cause = up + " in this run"
	}
	return fmt.Errorf("%s %s: no Gold table: gold ran in this run but had no Silver rows to build it from (%s): %w", stage, mart, cause, err)
}

// noDataYet tells whether a mart whose Gold table could not be loaded (err) has simply
// received no data yet, and why: gold ran for it in this pipeline and found no Silver
// rows, or its source's Silver table exists and holds none (a table of a new pipeline
// that nothing has reached yet, issue 40). A sync or check of such a mart has nothing
// to do and is no failure. A Silver table with rows but no Gold table still fails
// ("run gold first"), and so does one whose upstream failed in this run.
func (p *pipeline) noDataYet(ctx context.Context, mart string, err error) (string, bool) {
	if !errors.Is(err, catalog.ErrNoSuchTable) || p.outcomes.upstream(p.cfg, mart) != "" {
		return "", false
	}
	if goldErr, ran := p.outcomes.gold[mart]; ran {
		return "gold found no Silver rows to build it from", goldErr == nil
	}
	m := p.cfg.Marts[mart]
	src := p.cfg.Entities[m.Source].Silver.Table
	tbl, err := p.lh.LoadTable(ctx, src)
	if err != nil {
		return "", false // Silver has not run either: run silver and gold first
	}
	if s := tbl.CurrentSnapshot(); s != nil && (s.Summary == nil || s.Summary.Properties["total-records"] != "0") {
		return "", false
	}
	return src + " has no rows yet", true
}
