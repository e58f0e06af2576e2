package sync

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/shopspring/decimal"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/push"
)

// Drift is one difference found by Check.
type Drift struct {
	Partition  string
	Level      string
	Metric     string // rows, a measure name (sum over the level's rows), rows fingerprint, column <name>, or partition
	Gold       string
	ClickHouse string
}

// summed lists the measures whose sum over a level's rows is compared (and reported)
// besides the fingerprint: the numeric ones. Quantile lists, dates and timestamps are
// covered by the fingerprint only.
func summed(m *serving.Mart) []serving.Measure {
	var out []serving.Measure
	for _, ms := range m.Measures {
		// Minima and maxima of dates and timestamps have no sum: the fingerprint covers them.
		temporal := (ms.Agg == mart.Min || ms.Agg == mart.Max) && (ms.Type == "Date32" || strings.HasPrefix(ms.Type, "DateTime64"))
		if d, _ := ms.Agg.Desc(); d.Checked && !temporal {
			out = append(out, ms)
		}
	}
	return out
}

// isFloat reports whether readers see the measure as a double (serving.Measure.FinalType):
// its sums are then compared within a relative 1e-9. An avg over an integer column is
// one, though its hidden __sum column is Int64.
func isFloat(ms serving.Measure) bool { return ms.FinalType() == "Float64" }

// Check compares every hot partition of the mart between Gold and ClickHouse, row for
// row: per partition and grouping level, the row count and an order-independent
// fingerprint of every served row (grain, level, dimensions, grouping flags and every
// finished measure value: distinct counts, quantiles, averages, dates, timestamps,
// decimals), computed the same way from Gold's rows and from the served view
// (fingerprint.go). So a single changed cell, a swapped dimension value, a compensating
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
	if err := Servable(m, tbl); err != nil {
		return nil, err
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
	var hot []push.Partition
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
		hot = append(hot, g)
	}
	plan.Hot = hot
	for id := range live {
		if !isHot[id] {
			drifts = append(drifts, Drift{id, "", "partition", "not hot", "present"})
		}
	}
	rb, err := t.ReadBack(ctx, m, hot)
	if err != nil {
		return nil, err
	}
	if changes := rb.Columns; len(changes) > 0 {
		// The served rows cannot be read as the mart defines them: every hot partition
		// drifts (check --repair rebuilds the table).
		for _, h := range hot {
			for _, ch := range changes {
				drifts = append(drifts, Drift{h.ID, "", "column " + ch.Column, ch.Want, ch.Have})
			}
		}
	} else if len(hot) > 0 {
		gs, err := goldStats(ctx, m, tbl, hot)
		if err != nil {
			return nil, err
		}
		for _, h := range hot {
			drifts = append(drifts, compare(m, h.ID, gs[h.ID], rb.Stats[h.ID])...)
			if d, ok := rb.Diverged[h.ID]; ok {
				drifts = append(drifts, Drift{h.ID, "", "copies", "equal", d})
			}
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
func Unservable(ctx context.Context, m *serving.Mart, tbl *table.Table, now time.Time) ([]push.Partition, error) {
	gold, err := GoldPartitions(ctx, m, tbl)
	if err != nil {
		return nil, err
	}
	var out []push.Partition
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
	for _, ms := range summed(m) {
		gv, cv := g.Sums[ms.Name], c.Sums[ms.Name]
		eq := gv.Equal(cv)
		if !eq && isFloat(ms) {
			a, _ := gv.Float64()
			b, _ := cv.Float64()
			eq = near(a, b)
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
		if a, b := g.Weighted[ms.Name], c.Weighted[ms.Name]; approx(ms) && !near(a, b) {
			out = append(out, Drift{id, l, ms.Name + " weighted sum", fmt.Sprint(a), fmt.Sprint(b)})
		}
	}
	if g.Hash != c.Hash {
		out = append(out, Drift{id, l, "rows fingerprint", fmt.Sprintf("%016x", g.Hash), fmt.Sprintf("%016x", c.Hash)})
	}
	for _, sc := range checkedStates(m) {
		if a, b := g.States[sc.ms.Name], c.States[sc.ms.Name]; a != b {
			out = append(out, Drift{id, l, sc.ms.Name + " states", fmt.Sprintf("%016x", a), fmt.Sprintf("%016x", b)})
		}
	}
	return out
}

// near reports whether two doubles agree within a relative 1e-9.
func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// hotRange is the grain range [from, to) of the sorted hot partitions.
func hotRange(hot []push.Partition) (time.Time, time.Time) {
	return hot[0].Start, hot[len(hot)-1].End
}

// goldStats reads the Gold rows (all levels) of the hot partitions, as a push reads
// them with the states it builds, into LevelStats by partition id and level.
func goldStats(ctx context.Context, m *serving.Mart, tbl *table.Table, hot []push.Partition) (map[string]map[string]*LevelStats, error) {
	acc := newGoldAcc(m)
	grains, err := push.ReadGrains(ctx, m, tbl, hot, acc.names(), stateMeasures(acc.states))
	if err != nil {
		return nil, fmt.Errorf("check %s: read gold: %w", m.Name, err)
	}
	for g, err := range grains {
		if err != nil {
			return nil, fmt.Errorf("check %s: read gold: %w", m.Name, err)
		}
		if err := acc.add(g); err != nil {
			return nil, fmt.Errorf("check %s: %w", m.Name, err)
		}
	}
	return acc.out, nil
}

// goldAcc adds Gold's rows up into LevelStats (by partition id and level), computing
// each row's fingerprint, sums, weighted sums and state fingerprints as ClickHouse does
// over the served rows.
type goldAcc struct {
	m      *serving.Mart
	fields []canonField
	nkey   int          // key fields (keyFields)
	sums   []int        // fields of the summed measures
	approx []int        // fields of the approx measures
	states []stateCheck // state k is the grain's state k
	out    map[string]map[string]*LevelStats
	ids    map[int64]string // grain value -> partition id
	buf    []byte           // a row's canonical text
	sbuf   []byte           // a row's state text
}

func newGoldAcc(m *serving.Mart) *goldAcc {
	a := &goldAcc{m: m, fields: canonFields(m), nkey: keyFields(m), states: checkedStates(m),
		out: map[string]map[string]*LevelStats{}, ids: map[int64]string{}}
	at := func(name string) int {
		return slices.IndexFunc(a.fields, func(f canonField) bool { return f.gold == name })
	}
	for _, ms := range summed(m) {
		a.sums = append(a.sums, at(ms.Name))
	}
	for _, ms := range m.Measures {
		if approx(ms) {
			a.approx = append(a.approx, at(ms.Name))
		}
	}
	return a
}

// names are the Gold columns of the fields, in order.
func (a *goldAcc) names() []string {
	out := make([]string, len(a.fields))
	for i, f := range a.fields {
		out[i] = f.gold
	}
	return out
}

// add adds the rows of one grain.
func (a *goldAcc) add(g push.GoldGrain) error {
	row := 0
	for _, rec := range g.Recs {
		for i := range int(rec.NumRows()) {
			if err := a.addRow(g, rec, i, row); err != nil {
				return err
			}
			row++
		}
	}
	return nil
}

// addRow adds row i of rec, the grain's row-th.
func (a *goldAcc) addRow(g push.GoldGrain, rec arrow.RecordBatch, i, row int) error {
	id, err := partitionOf(a.m, rec.Column(0), i, a.ids)
	if err != nil {
		return err
	}
	st := a.level(id, rec.Column(1).ValueStr(i))
	st.Rows++
	keyLen, err := a.text(rec, i)
	if err != nil {
		return err
	}
	st.Hash += push.SipHash64(a.buf)
	if err := a.addSums(st, rec, i); err != nil {
		return err
	}
	key := a.buf[:keyLen]
	if err := a.addWeighted(st, rec, i, key); err != nil {
		return err
	}
	for s, sc := range a.states {
		b, err := appendStateDigest(append(a.sbuf[:0], key...), g.State(s, row), sc.width)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.ms.Name, err)
		}
		a.sbuf = append(b, ';')
		st.States[sc.ms.Name] += push.SipHash64(a.sbuf)
	}
	return nil
}

// text puts the canonical text of row i of rec into a.buf and returns the length of its
// key fields' text.
func (a *goldAcc) text(rec arrow.RecordBatch, i int) (int, error) {
	b, keyLen := a.buf[:0], 0
	var err error
	for k, f := range a.fields {
		if k == a.nkey {
			keyLen = len(b)
		}
		if b, err = appendField(b, rec.Column(k), i, f); err != nil {
			return 0, fmt.Errorf("%s: %w", f.gold, err)
		}
		b = append(b, ';')
	}
	if a.nkey == len(a.fields) {
		keyLen = len(b)
	}
	a.buf = b
	return keyLen, nil
}

// addSums adds row i of rec to the sums of the summed measures (NULLs skipped).
func (a *goldAcc) addSums(st *LevelStats, rec arrow.RecordBatch, i int) error {
	for _, k := range a.sums {
		if col := rec.Column(k); !col.IsNull(i) {
			d, err := toDecimal(col, i)
			if err != nil {
				return fmt.Errorf("%s: %w", a.fields[k].gold, err)
			}
			st.Sums[a.fields[k].gold] = st.Sums[a.fields[k].gold].Add(d)
		}
	}
	return nil
}

// addWeighted adds row i of rec, whose key text is key, to the weighted sums of the
// approx measures (NULLs skipped).
func (a *goldAcc) addWeighted(st *LevelStats, rec arrow.RecordBatch, i int, key []byte) error {
	if len(a.approx) == 0 {
		return nil
	}
	w := rowWeight(push.SipHash64(key))
	for _, k := range a.approx {
		col, ok := rec.Column(k).(*array.Float64)
		if !ok {
			return fmt.Errorf("%s: a double measure of type %s", a.fields[k].gold, rec.Column(k).DataType())
		}
		if !col.IsNull(i) {
			st.Weighted[a.fields[k].gold] += w * col.Value(i)
		}
	}
	return nil
}

// level returns the LevelStats of partition id and level l, created empty.
func (a *goldAcc) level(id, l string) *LevelStats {
	byLevel := a.out[id]
	if byLevel == nil {
		byLevel = map[string]*LevelStats{}
		a.out[id] = byLevel
	}
	st := byLevel[l]
	if st == nil {
		st = newLevelStats()
		byLevel[l] = st
	}
	return st
}

// partitionOf is the ClickHouse partition id of row i of the grain column a (ids
// caches them by grain value).
func partitionOf(m *serving.Mart, a arrow.Array, i int, ids map[int64]string) (string, error) {
	var v int64
	var t func() time.Time
	switch g := a.(type) {
	case *array.Date32:
		v = int64(g.Value(i))
		t = func() time.Time { return g.Value(i).ToTime() }
	case *array.Timestamp:
		v = micros(g, i)
		t = func() time.Time { return time.UnixMicro(v).UTC() }
	default:
		return "", fmt.Errorf("check %s: grain type %s", m.Name, a.DataType())
	}
	if a.IsNull(i) {
		return "", fmt.Errorf("check %s: gold row with a NULL grain", m.Name)
	}
	id, ok := ids[v]
	if !ok {
		id = m.PartitionID(t())
		ids[v] = id
	}
	return id, nil
}

func toDecimal(a arrow.Array, i int) (decimal.Decimal, error) {
	switch v := a.(type) {
	case *array.Decimal128:
		scale := v.DataType().(*arrow.Decimal128Type).Scale
		return decimal.NewFromBigInt(v.Value(i).BigInt(), -scale), nil
	case *array.Int64:
		return decimal.NewFromInt(v.Value(i)), nil
	case *array.Int32:
		return decimal.NewFromInt(int64(v.Value(i))), nil
	case *array.Float64:
		return decimal.NewFromFloat(v.Value(i)), nil
	}
	return decimal.Decimal{}, fmt.Errorf("unsupported type %s", a.DataType())
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
