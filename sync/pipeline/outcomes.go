package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"goldbridge/lakehouse/catalog"
)

// outcomes remembers what failed in the earlier stages of one Runner, so that a later
// stage's error names that cause rather than "run gold first" right after Run ran gold
// (issue 37).
type outcomes struct {
	entities map[string]string // entity -> the first stage that failed for it ("ingest", "silver")
	gold     map[string]error  // mart -> the outcome of its gold stage (nil: it ran)
}

func (o *outcomes) entityFailed(entity, stage string) {
	if o.entities == nil {
		o.entities = map[string]string{}
	}
	if _, ok := o.entities[entity]; !ok {
		o.entities[entity] = stage
	}
}

func (o *outcomes) goldRan(mart string, err error) {
	if o.gold == nil {
		o.gold = map[string]error{}
	}
	o.gold[mart] = err
}

// upstream names the failures of this run among the entities a mart reads ("ingest
// failed for orders"), or "".
func (o *outcomes) upstream(reads []string) string {
	var out []string
	for _, e := range reads {
		if stage, ok := o.entities[e]; ok {
			out = append(out, fmt.Sprintf("%s failed for %s", stage, e))
		}
	}
	return strings.Join(slices.Compact(out), ", ")
}

// withUpstream adds to a mart's gold error the failures of this run it may follow from.
func (o *outcomes) withUpstream(reads []string, err error) error {
	if up := o.upstream(reads); up != "" {
		return fmt.Errorf("%w (%s in this run)", err, up)
	}
	return err
}

// noGoldTable is the error of a sync or check stage that could not load mart's Gold
// table (err): it says why there is none when this Runner ran gold for the mart.
func (o *outcomes) noGoldTable(stage, mart string, reads []string, err error) error {
	goldErr, ran := o.gold[mart]
	switch {
	case !ran || !errors.Is(err, catalog.ErrNoSuchTable):
		return fmt.Errorf("%s %s: gold table: %w (run gold first)", stage, mart, err)
	case goldErr != nil:
		return fmt.Errorf("%s %s: no Gold table: gold did not finish for the mart in this run (reported above): %w", stage, mart, err)
	}
	cause := "its Silver table has no rows yet"
	if up := o.upstream(reads); up != "" {
		cause = up + " in this run"
	}
	return fmt.Errorf("%s %s: no Gold table: gold ran in this run but had no Silver rows to build it from (%s): %w", stage, mart, cause, err)
}
