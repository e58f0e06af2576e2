package push

import (
	"context"
	"fmt"
	"iter"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// Staging: the Gold rows of the partitions to push, read by their grain and streamed
// into the table the push builds, with the rows counted per partition.

// span names a sorted batch of partitions for errors: "20260501" or "20260501..20260630 (61)".
func span(parts []Partition) string {
	if len(parts) == 1 {
		return parts[0].ID
	}
	return fmt.Sprintf("%s..%s (%d)", parts[0].ID, parts[len(parts)-1].ID, len(parts))
}

// splitStreams cuts the sorted partitions into contiguous runs of whole partitions, one
// insert stream each: at least n runs (when there are n partitions) balanced by rows,
// each of at most maxPartitionsPerStream partitions and (unless one partition is larger)
// maxStreamRows rows.
func splitStreams(parts []Partition, n int) [][]Partition {
	var total int64
	for _, p := range parts {
		total += max(p.Rows, 1)
	}
	k := max(min(n, len(parts)), (len(parts)+maxPartitionsPerStream-1)/maxPartitionsPerStream,
		int((total+maxStreamRows-1)/maxStreamRows))
	target := (total + int64(k) - 1) / int64(k)
	var out [][]Partition
	var cur []Partition
	var acc int64
	for i, p := range parts {
		r := max(p.Rows, 1)
		// Close the run before p when p would overfill it, or when the partitions left
		// are just enough to give every remaining run one.
		left := len(parts) - i
		if len(cur) > 0 && (len(cur) >= maxPartitionsPerStream || acc+r > target || acc+r > maxStreamRows ||
			left <= k-len(out)-1) {
			out = append(out, cur)
			cur, acc = nil, 0
		}
		cur = append(cur, p)
		acc += r
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// goldFilter selects the Gold rows of the sorted partitions parts that the server-side
// path streams: grainFilter, and for a mart with a non-additive measure the rows of the carrier
// levels (mart.Level.Carries), which hold the lists every level is merged from.
func goldFilter(m *serving.Mart, parts []Partition) (iceberg.BooleanExpression, error) {
	f := grainFilter(m, parts)
	if m.Aggregating() {
		levels, err := m.Levels()
		if err != nil {
			return nil, fmt.Errorf("mart %s: %w", m.Name, err)
		}
		f = iceberg.NewAnd(f, iceberg.IsIn(iceberg.Reference(mart.ColGroupingLevel), mart.Carriers(levels)...))
	}
	return f, nil
}

// grainFilter selects the Gold rows of the sorted partitions parts: their grain ranges,
// adjacent ones merged, OR-ed.
func grainFilter(m *serving.Mart, parts []Partition) iceberg.BooleanExpression {
	g := iceberg.Reference(m.Grain.As)
	rng := func(s, e time.Time) iceberg.BooleanExpression {
		if m.Grain.Unit == "hour" {
			return iceberg.NewAnd(iceberg.GreaterThanEqual(g, iceberg.Timestamp(s.UnixMicro())),
				iceberg.LessThan(g, iceberg.Timestamp(e.UnixMicro())))
		}
		return iceberg.NewAnd(iceberg.GreaterThanEqual(g, iceberg.Date(s.Unix()/86400)),
			iceberg.LessThan(g, iceberg.Date(e.Unix()/86400)))
	}
	var f iceberg.BooleanExpression
	s, e := parts[0].Start, parts[0].End
	for _, p := range parts[1:] {
		if p.Start.Equal(e) {
			e = p.End
			continue
		}
		f = or(f, rng(s, e))
		s, e = p.Start, p.End
	}
	return or(f, rng(s, e))
}

// grainWhere is the SQL condition selecting the grain ranges of the sorted partitions
// parts, adjacent ones merged.
func grainWhere(m *serving.Mart, parts []Partition) string {
	g := serving.Q(m.Grain.As)
	var conds []string
	add := func(s, e time.Time) {
		conds = append(conds, fmt.Sprintf("(%s >= fromUnixTimestamp64Micro(%d, 'UTC') AND %s < fromUnixTimestamp64Micro(%d, 'UTC'))",
			g, s.UnixMicro(), g, e.UnixMicro()))
	}
	s, e := parts[0].Start, parts[0].End
	for _, p := range parts[1:] {
		if p.Start.Equal(e) {
			e = p.End
			continue
		}
		add(s, e)
		s, e = p.Start, p.End
	}
	add(s, e)
	return strings.Join(conds, " OR ")
}

func or(a, b iceberg.BooleanExpression) iceberg.BooleanExpression {
	if a == nil {
		return b
	}
	return iceberg.NewOr(a, b)
}

// stage streams the Gold rows of the sorted partitions parts into table (one INSERT) and
// returns the row count per partition.
func stage(ctx context.Context, c *chconn.Client, m *serving.Mart, tbl *table.Table, parts []Partition, into string, batchRows int) (map[string]int64, error) {
	wcols := ddl.WireColumns(m)
	fields := make([]string, len(wcols))
	cols := make([]*column, len(wcols))
	input := make(proto.Input, len(wcols))
	grain := -1
	for i, wc := range wcols {
		col, err := newColumn(wc)
		if err != nil {
			return nil, err
		}
		fields[i], cols[i] = wc.Name, col
		input[i] = proto.InputColumn{Name: wc.Name, Data: col.col}
		if wc.Name == m.Grain.As {
			grain = i
		}
	}
	if grain < 0 {
		return nil, fmt.Errorf("wire columns have no grain %s", m.Grain.As)
	}
	var lists []int // the list columns: a block also ends at maxBlockElems list values
	for i, wc := range wcols {
		if strings.HasPrefix(wc.Type, "Array(") {
			lists = append(lists, i)
		}
	}
	filter, err := goldFilter(m, parts)
	if err != nil {
		return nil, err
	}
	_, recs, err := tbl.Scan(table.WithRowFilter(filter), table.WithSelectedFields(fields...)).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan gold: %w", err)
	}
	next, stop := iter.Pull2(recs)
	defer stop()

	counts := make([]int64, len(parts))
	starts, ends := make([]int64, len(parts)), make([]int64, len(parts))
	for i, p := range parts {
		starts[i], ends[i] = p.Start.UnixMicro(), p.End.UnixMicro()
	}
	var (
		cur arrow.RecordBatch
		off int
		idx []int
	)
	release := func() {
		if cur != nil {
			cur.Release()
			cur = nil
		}
	}
	defer release()
	fill := func() (bool, error) {
		for _, col := range cols {
			col.col.Reset()
		}
		n, elems := 0, 0
		for n < batchRows && elems < maxBlockElems {
			if cur == nil || off >= int(cur.NumRows()) {
				release()
				rec, err, ok := next()
				if !ok {
					break
				}
				if err != nil {
					return false, fmt.Errorf("scan gold: %w", err)
				}
				cur, off = rec, 0
				idx = idx[:0]
				for _, f := range fields {
					ix := rec.Schema().FieldIndices(f)
					if len(ix) == 0 {
						return false, fmt.Errorf("gold table has no column %s", f)
					}
					idx = append(idx, ix[0])
				}
				continue
			}
			to := min(int(cur.NumRows()), off+batchRows-n)
			for _, li := range lists {
				to = listRows(cur.Column(idx[li]), off, to, maxBlockElems-elems)
			}
			for _, li := range lists {
				elems += listLen(cur.Column(idx[li]), off, to)
			}
			for i, col := range cols {
				if err := col.append(cur.Column(idx[i]), off, to); err != nil {
					return false, err
				}
			}
			if err := countIn(cur.Column(idx[grain]), off, to, starts, ends, counts); err != nil {
				return false, err
			}
			n += to - off
			off = to
		}
		return n > 0, nil
	}
	if err := c.Insert(ctx, into, input, fill); err != nil {
		return nil, err
	}
	return byID(parts, counts), nil
}

// listRows returns the end e in (from, to] of the list rows [from, e) of a (a list
// array) holding at most budget values, but at least one row.
func listRows(a arrow.Array, from, to, budget int) int {
	if listLen(a, from, to) <= budget {
		return to
	}
	// The largest e with listLen(from, e) <= budget; one row even if it holds more.
	e := from + sort.Search(to-from, func(k int) bool { return listLen(a, from, from+k+1) > budget })
	return max(e, from+1)
}

// listLen is the number of values in the list rows [from, to) of a (0 if a is not a list).
func listLen(a arrow.Array, from, to int) int {
	if to <= from {
		return 0
	}
	switch l := a.(type) {
	case *array.List:
		s, _ := l.ValueOffsets(from)
		_, e := l.ValueOffsets(to - 1)
		return int(e - s)
	case *array.LargeList:
		s, _ := l.ValueOffsets(from)
		_, e := l.ValueOffsets(to - 1)
		return int(e - s)
	}
	return 0
}

// byID maps the row counts of the sorted partitions parts to their ids.
func byID(parts []Partition, counts []int64) map[string]int64 {
	out := make(map[string]int64, len(parts))
	for i, p := range parts {
		out[p.ID] = counts[i]
	}
	return out
}

// countIn adds the rows [from, to) of the grain column a to the partition they fall in:
// counts[i] for the range [starts[i], ends[i]) holding the grain (in microseconds). A
// grain outside every range is an error: it would be pushed into a partition that is
// not replaced.
func countIn(a arrow.Array, from, to int, starts, ends, counts []int64) error {
	at := func(i int) (int64, error) {
		switch v := a.(type) {
		case *array.Date32:
			return int64(v.Value(i)) * 86_400_000_000, nil
		case *array.Timestamp:
			t := int64(v.Value(i))
			switch v.DataType().(*arrow.TimestampType).Unit {
			case arrow.Second:
				return t * 1e6, nil
			case arrow.Millisecond:
				return t * 1e3, nil
			case arrow.Nanosecond:
				return t / 1e3, nil
			}
			return t, nil
		}
		return 0, fmt.Errorf("grain column: unexpected Arrow type %s", a.DataType())
	}
	for i := from; i < to; i++ {
		if a.IsNull(i) {
			return fmt.Errorf("gold row with a NULL grain")
		}
		t, err := at(i)
		if err != nil {
			return err
		}
		k := sort.Search(len(ends), func(k int) bool { return ends[k] > t })
		if k == len(ends) || t < starts[k] {
			return fmt.Errorf("gold row with grain %s outside the pushed partitions", time.UnixMicro(t).UTC().Format(time.RFC3339))
		}
		counts[k]++
	}
	return nil
}
