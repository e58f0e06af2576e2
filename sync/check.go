package sync

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/serving"
	"goldbridge/serving/fingerprint"
	"goldbridge/serving/hot"
)

// Drift is one difference found by Check.
type Drift struct {
	Partition  string
	Level      string
	Metric     string // rows, a measure name (sum over the level's rows), rows fingerprint, column <name>, or partition
	Gold       string
	ClickHouse string
}

// Check compares every hot partition of the mart between Gold and ClickHouse, row for
// row: per partition and grouping level, the row count and an order-independent
// fingerprint of every served row (grain, level, dimensions, grouping flags and every
// finished measure value: distinct counts, quantiles, averages, dates, timestamps,
// decimals), computed the same way from Gold's rows and from the served view
// (serving/fingerprint). So a single changed cell, a swapped dimension value, a compensating
// edit, a missing or an extra row is drift. Per level it also compares the sum of every
// numeric measure, for a readable report (decimals and integers equal, doubles within a
// relative 1e-9: a measure is compared as the type readers see, Measure.FinalType).
// A double that is added up (a sum, an average) may differ in its last bits where the
// server built the level: it is compared by its sums and weighted sums within 1e-9,
// not in the fingerprint. The served states are compared with those a push builds from
// Gold's lists (the distinct keys of uniqExact states, the values of quantile states),
// so a state with other keys or values than Gold's is drift though its finished value
// is right. A served table whose columns differ from the DDL is drift in every
// hot partition, and so is a served partition that is not hot. Partitions not served
// (Plan.Unservable) are skipped. It returns the drifts, sorted; and, like Sync, a
// ColdError when the window counts back from the clock and none of Gold's partitions is
// in it: Gold and ClickHouse then agree only in serving nothing.
func Check(ctx context.Context, t Target, m *serving.Mart, tbl *table.Table, opt Options) ([]Drift, error) {
	opt.defaults()
	if err := m.CheckGold(tbl); err != nil {
		return nil, err
	}
	ws, err := windowsServer(t, m)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", m.Name, err)
	}
	gold, err := GoldPartitions(ctx, m, tbl)
	if err != nil {
		return nil, err
	}
	cutoff := Cutoff(m, opt.Now(), gold)
	served, err := t.Partitions(ctx, m)
	if err != nil {
		return nil, err
	}
	live := served.Live
	var drifts []Drift
	var hotParts []hot.Partition
	isHot := map[string]bool{}
	plan := Plan{Gold: len(gold), Cutoff: cutoff}
	for _, g := range gold {
		plan.Newest = g.Start
		if !g.End.After(cutoff) {
			continue // not hot
		}
		if g.Unservable != "" {
			plan.Unservable = append(plan.Unservable, g)
			continue // not served
		}
		isHot[g.ID] = true
		hotParts = append(hotParts, g)
	}
	plan.Hot = hotParts
	for id := range live {
		if !isHot[id] {
			drifts = append(drifts, Drift{id, "", "partition", "not hot", "present"})
		}
	}
	rb, err := t.ReadBack(ctx, m, hotParts)
	if err != nil {
		return nil, err
	}
	if changes := rb.Columns; len(changes) > 0 {
		// The served rows cannot be read as the mart defines them: every hot partition
		// drifts (check --repair rebuilds the table).
		for _, h := range hotParts {
			for _, ch := range changes {
				drifts = append(drifts, Drift{h.ID, "", "column " + ch.Column, ch.Want, ch.Have})
			}
		}
	} else if len(hotParts) > 0 {
		gs, err := fingerprint.GoldStats(ctx, m, tbl, hotParts)
		if err != nil {
			return nil, err
		}
		for _, h := range hotParts {
			drifts = append(drifts, compare(m, h.ID, gs[h.ID], rb.Stats[h.ID])...)
			if d, ok := rb.Diverged[h.ID]; ok {
				drifts = append(drifts, Drift{h.ID, "", "copies", "equal", d})
			}
		}
	}
	if ws != nil && len(rb.Columns) == 0 {
		want, have, err := ws.CheckWindows(ctx, m, plan.Unservable)
		if err != nil {
			return nil, err
		}
		if want != have {
			drifts = append(drifts, Drift{WindowsPartition, "", "rolling windows", want, have})
		}
	}
	sort.Slice(drifts, func(i, j int) bool {
		a, b := drifts[i], drifts[j]
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		if a.Level != b.Level {
			return a.Level < b.Level
		}
		return a.Metric < b.Metric
	})
	return drifts, plan.cold(m)
}

// Unservable returns the hot Gold partitions that are not served (Plan.Unservable).
func Unservable(ctx context.Context, m *serving.Mart, tbl *table.Table, now time.Time) ([]hot.Partition, error) {
	gold, err := GoldPartitions(ctx, m, tbl)
	if err != nil {
		return nil, err
	}
	var out []hot.Partition
	cutoff := Cutoff(m, now, gold)
	for _, g := range gold {
		if g.End.After(cutoff) && g.Unservable != "" {
			out = append(out, g)
		}
	}
	return out, nil
}

func compare(m *serving.Mart, id string, gs, cs map[string]*LevelStats) []Drift {
	var out []Drift
	levels := map[string]bool{}
	for l := range gs {
		levels[l] = true
	}
	for l := range cs {
		levels[l] = true
	}
	empty := newLevelStats()
	for l := range levels {
		g, c := gs[l], cs[l]
		if g == nil {
			g = empty
		}
		if c == nil {
			c = empty
		}
		out = append(out, compareLevel(m, id, l, g, c)...)
	}
	return out
}

// compareLevel compares one level of partition id: rows and sums first; when they
// agree, what only the rows tell apart.
func compareLevel(m *serving.Mart, id, l string, g, c *LevelStats) []Drift {
	var out []Drift
	if g.Rows != c.Rows {
		out = append(out, Drift{id, l, "rows", fmt.Sprint(g.Rows), fmt.Sprint(c.Rows)})
	}
	for _, ms := range fingerprint.Summed(m) {
		gv, cv := g.Sums[ms.Name], c.Sums[ms.Name]
		eq := gv.Equal(cv)
		if !eq && fingerprint.IsFloat(ms) {
			a, _ := gv.Float64()
			b, _ := cv.Float64()
			eq = fingerprint.Near(a, b)
		}
		if !eq {
			out = append(out, Drift{id, l, ms.Name, gv.String(), cv.String()})
		}
	}
	if len(out) > 0 {
		return out
	}
	// Same counts and sums, other rows: a compensating edit, a swapped dimension value,
	// a changed quantile, date or timestamp, a value moved between rows, another state.
	for _, ms := range m.Measures {
		if a, b := g.Weighted[ms.Name], c.Weighted[ms.Name]; fingerprint.Approx(ms) && !fingerprint.Near(a, b) {
			out = append(out, Drift{id, l, ms.Name + " weighted sum", fmt.Sprint(a), fmt.Sprint(b)})
		}
	}
	if g.Hash != c.Hash {
		out = append(out, Drift{id, l, "rows fingerprint", fmt.Sprintf("%016x", g.Hash), fmt.Sprintf("%016x", c.Hash)})
	}
	for _, sc := range fingerprint.CheckedStates(m) {
		if a, b := g.States[sc.Measure.Name], c.States[sc.Measure.Name]; a != b {
			out = append(out, Drift{id, l, sc.Measure.Name + " states", fmt.Sprintf("%016x", a), fmt.Sprintf("%016x", b)})
		}
	}
	return out
}

// PrintDrift writes the drifts as a table.
func PrintDrift(w io.Writer, mart string, drifts []Drift) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "MART\tPARTITION\tLEVEL\tMETRIC\tGOLD\tCLICKHOUSE")
	for _, d := range drifts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", mart, d.Partition, d.Level, d.Metric, d.Gold, d.ClickHouse)
	}
	_ = tw.Flush()
}

// DriftPartitions returns the distinct partitions of drifts.
func DriftPartitions(drifts []Drift) []string {
	var out []string
	for _, d := range drifts {
		if len(out) == 0 || out[len(out)-1] != d.Partition {
			out = append(out, d.Partition)
		}
	}
	return out
}
