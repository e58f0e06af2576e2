package sync

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/shopspring/decimal"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
	"goldbridge/serving/push"
)

// Drift is one difference found by Check.
type Drift struct {
	Partition  string
	Level      string
	Metric     string // rows, a measure name (sum over the level's rows), or partition
	Gold       string
	ClickHouse string
}

// levelStats are the per-level aggregates Check compares.
type levelStats struct {
	rows int64
	sums map[string]decimal.Decimal
}

func checkedMeasures(m *serving.Mart) []serving.Measure {
	var out []serving.Measure
	for _, ms := range m.Measures {
		if d, _ := ms.Agg.Desc(); d.Checked {
			out = append(out, ms)
		}
	}
	return out
}

func isFloat(m *serving.Mart, ms serving.Measure) bool {
	return ms.Type == "Float64" && ms.Agg != mart.CountDistinct && ms.Agg != mart.Count
}

// Check compares every hot partition of the mart between Gold and ClickHouse: rows per
// grouping level, and per level the sum of every measure over its rows (sums of sums
// and counts, of the exact distinct counts from merged uniqExact states, of averages,
// minima and maxima; quantiles are not compared). Decimal and integer measures must be
// equal; float measures within a relative 1e-9. Partitions served but not hot are drift
// too. It returns the drifts, sorted.
func Check(ctx context.Context, c *chconn.Client, m *serving.Mart, tbl *table.Table, opt Options) ([]Drift, error) {
	opt.defaults()
	gold, err := GoldPartitions(ctx, m, tbl)
	if err != nil {
		return nil, err
	}
	cutoff := Cutoff(m, opt.Now())
	live, err := livePartitions(ctx, c, m)
	if err != nil {
		return nil, err
	}
	var drifts []Drift
	hot := map[string]bool{}
	for _, g := range gold {
		if !g.End.After(cutoff) || !serving.Servable(g.Start, g.End) {
			continue // not hot, or not served (Plan.Unservable)
		}
		hot[g.ID] = true
		gs, err := goldStats(ctx, m, tbl, g)
		if err != nil {
			return nil, err
		}
		cs, err := chStats(ctx, c, m, g)
		if err != nil {
			return nil, err
		}
		drifts = append(drifts, compare(m, g.ID, gs, cs)...)
	}
	for id := range live {
		if !hot[id] {
			drifts = append(drifts, Drift{id, "", "partition", "not hot", "present"})
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
	return drifts, nil
}

func compare(m *serving.Mart, id string, gs, cs map[string]*levelStats) []Drift {
	var out []Drift
	levels := map[string]bool{}
	for l := range gs {
		levels[l] = true
	}
	for l := range cs {
		levels[l] = true
	}
	empty := &levelStats{sums: map[string]decimal.Decimal{}}
	for l := range levels {
		g, c := gs[l], cs[l]
		if g == nil {
			g = empty
		}
		if c == nil {
			c = empty
		}
		if g.rows != c.rows {
			out = append(out, Drift{id, l, "rows", fmt.Sprint(g.rows), fmt.Sprint(c.rows)})
		}
		for _, ms := range checkedMeasures(m) {
			gv, cv := g.sums[ms.Name], c.sums[ms.Name]
			eq := gv.Equal(cv)
			if !eq && isFloat(m, ms) {
				a, _ := gv.Float64()
				b, _ := cv.Float64()
				eq = math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
			}
			if !eq {
				out = append(out, Drift{id, l, ms.Name, gv.String(), cv.String()})
			}
		}
	}
	return out
}

// goldStats scans the partition's Gold rows (all levels).
func goldStats(ctx context.Context, m *serving.Mart, tbl *table.Table, p push.Partition) (map[string]*levelStats, error) {
	fields := []string{mart.ColGroupingLevel}
	for _, ms := range checkedMeasures(m) {
		fields = append(fields, ms.Name)
	}
	g := iceberg.Reference(m.Grain.As)
	var f iceberg.BooleanExpression
	if m.Grain.Unit == "hour" {
		f = iceberg.NewAnd(iceberg.GreaterThanEqual(g, iceberg.Timestamp(p.Start.UnixMicro())), iceberg.LessThan(g, iceberg.Timestamp(p.End.UnixMicro())))
	} else {
		f = iceberg.NewAnd(iceberg.GreaterThanEqual(g, iceberg.Date(p.Start.Unix()/86400)), iceberg.LessThan(g, iceberg.Date(p.End.Unix()/86400)))
	}
	_, recs, err := tbl.Scan(table.WithRowFilter(f), table.WithSelectedFields(fields...)).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("check scan gold: %w", err)
	}
	out := map[string]*levelStats{}
	for rec, err := range recs {
		if err != nil {
			return nil, fmt.Errorf("check scan gold: %w", err)
		}
		sch := rec.Schema()
		lv := rec.Column(sch.FieldIndices(mart.ColGroupingLevel)[0])
		for i := 0; i < int(rec.NumRows()); i++ {
			l := lv.ValueStr(i)
			st := out[l]
			if st == nil {
				st = &levelStats{sums: map[string]decimal.Decimal{}}
				out[l] = st
			}
			st.rows++
			for _, ms := range checkedMeasures(m) {
				col := rec.Column(sch.FieldIndices(ms.Name)[0])
				if col.IsNull(i) {
					continue
				}
				d, err := toDecimal(col, i)
				if err != nil {
					return nil, fmt.Errorf("check %s: %w", ms.Name, err)
				}
				st.sums[ms.Name] = st.sums[ms.Name].Add(d)
			}
		}
		rec.Release()
	}
	return out, nil
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

// chStats aggregates the partition in <t>_final.
func chStats(ctx context.Context, c *chconn.Client, m *serving.Mart, p push.Partition) (map[string]*levelStats, error) {
	sel := []string{"toString(grouping_level)", "count()"}
	for _, ms := range checkedMeasures(m) {
		if isFloat(m, ms) {
			sel = append(sel, "toString(toDecimal128(sum("+serving.Q(ms.Name)+"), 9))")
		} else {
			sel = append(sel, "toString(sum("+serving.Q(ms.Name)+"))")
		}
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s >= fromUnixTimestamp64Micro(%d, 'UTC') AND %s < fromUnixTimestamp64Micro(%d, 'UTC') GROUP BY grouping_level",
		strings.Join(sel, ", "), ddl.Name(m, m.Table+ddl.ViewSuffix), serving.Q(m.Grain.As), p.Start.UnixMicro(), serving.Q(m.Grain.As), p.End.UnixMicro())
	rows, err := c.Conn().Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", m.Name, err)
	}
	defer rows.Close()
	out := map[string]*levelStats{}
	ms := checkedMeasures(m)
	for rows.Next() {
		var l string
		var n uint64
		vals := make([]string, len(ms))
		dest := []any{&l, &n}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		st := &levelStats{rows: int64(n), sums: map[string]decimal.Decimal{}}
		for i, v := range vals {
			d, err := decimal.NewFromString(v)
			if err != nil {
				return nil, fmt.Errorf("check %s %s: %w", m.Name, ms[i].Name, err)
			}
			st.sums[ms[i].Name] = d
		}
		out[l] = st
	}
	return out, rows.Err()
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
