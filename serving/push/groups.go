package push

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/filescan"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// maxBlockStateBytes ends an insert block early, before a grain whose states would
// take it past this size: the server decodes a block while the next one is built and
// sent, and the state buffers of a sent block are reused.
const maxBlockStateBytes = 8 << 20

// stageSettings insert each block as it is sent. By default the server squashes the
// blocks of an insert up to min_insert_block_size_rows/bytes (1M rows, 256 MB), and
// squashing a column of aggregate states it does not own copies every state (a uniqExact
// state element by element: see statesSettings), the work of building them again. The
// blocks are sorted by grain and hold whole grains where the state budget allows, so
// a block still makes about one part per partition.
var stageSettings = []string{"min_insert_block_size_rows = 0", "min_insert_block_size_bytes = 0"}

// goldReadBatch is the Arrow batch size of the direct Gold reads.
const goldReadBatch = 16384

// goldGroups yields the Gold rows (columns fields, in that order) of the sorted
// partitions parts one Gold partition (grain value) at a time, in grain order. Gold is
// partitioned by its grain, so a grain's rows are whole data files: they are read with
// filescan when no file has deletes and the schema never changed, else through the table
// scan. The table must be partitioned by identity on the grain (grainField).
func goldGroups(ctx context.Context, m *serving.Mart, tbl *table.Table, parts []Partition, fields []string) (iter.Seq2[[]arrow.RecordBatch, error], error) {
	fieldID := grainField(m, tbl)
	if fieldID < 0 {
		return nil, fmt.Errorf("gold table %s is not partitioned by its grain %s", tbl.Identifier(), m.Grain.As)
	}
	scan := tbl.Scan(table.WithRowFilter(grainFilter(m, parts)), table.WithSelectedFields(fields...))
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan gold: %w", err)
	}
	type group struct {
		grain int64
		tasks []table.FileScanTask
	}
	var groups []group
	at := map[int64]int{}
	for _, t := range tasks {
		g, ok := grainValue(t.File.Partition()[fieldID])
		if !ok {
			return nil, fmt.Errorf("gold file %s: grain partition value %v", t.File.FilePath(), t.File.Partition()[fieldID])
		}
		i, seen := at[g]
		if !seen {
			i = len(groups)
			at[g] = i
			groups = append(groups, group{grain: g})
		}
		groups[i].tasks = append(groups[i].tasks, t)
	}
	slices.SortFunc(groups, func(a, b group) int { return cmp.Compare(a.grain, b.grain) })
	direct := filescan.Direct(tasks) && !filescan.Evolved(tbl)
	return func(yield func([]arrow.RecordBatch, error) bool) {
		for _, g := range groups {
			var recs iter.Seq2[arrow.RecordBatch, error]
			if direct {
				recs = filescan.Read(ctx, tbl, g.tasks, fields, filescan.Options{BatchRows: goldReadBatch})
			} else {
				var err error
				if _, recs, err = scan.ReadTasks(ctx, g.tasks); err != nil {
					yield(nil, fmt.Errorf("scan gold: %w", err))
					return
				}
			}
			var batch []arrow.RecordBatch
			release := func() {
				for _, r := range batch {
					r.Release()
				}
			}
			for rec, err := range recs {
				if err != nil {
					release()
					yield(nil, fmt.Errorf("scan gold: %w", err))
					return
				}
				p, err := filescan.Project(rec, fields)
				rec.Release()
				if err != nil {
					release()
					yield(nil, fmt.Errorf("gold table %s: %w", tbl.Identifier(), err))
					return
				}
				batch = append(batch, p)
			}
			ok := yield(batch, nil)
			release()
			if !ok {
				return
			}
		}
	}, nil
}

// grainField returns the partition field id of Gold's grain, or -1 if tbl is not
// partitioned by identity on the grain alone (Gold tables are; see lakehouse/gold).
func grainField(m *serving.Mart, tbl *table.Table) int {
	spec := tbl.Spec()
	if spec.NumFields() != 1 {
		return -1
	}
	pf := spec.Field(0)
	if _, ok := pf.Transform.(iceberg.IdentityTransform); !ok || pf.Name != m.Grain.As {
		return -1
	}
	return pf.FieldID
}

// builtGrain is one grain's Gold batches and their states, read and built ahead.
type builtGrain struct {
	recs   []arrow.RecordBatch
	states rowStates
	err    error
}

func (gr *builtGrain) release() {
	for _, r := range gr.recs {
		r.Release()
	}
	gr.recs = nil
}

// grainValue is a grain partition value as days or microseconds.
func grainValue(v any) (int64, bool) {
	switch x := v.(type) {
	case iceberg.Date:
		return int64(x), true
	case iceberg.Timestamp:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// stageGroups streams the Gold rows of the sorted partitions parts into table (one
// INSERT) grain by grain: additive marts as they are, ClientStates marts with
// the states built here. It returns the row count per partition.
func stageGroups(ctx context.Context, c *chconn.Client, m *serving.Mart, tbl *table.Table, parts []Partition, into string, batchRows int) (map[string]int64, error) {
	var (
		wcols   []ddl.Column
		fields  []string
		specs   []stateSpec
		stateAt map[int]int
	)
	if ClientStates(m) {
		wcols, fields, specs, stateAt = stateColumns(m)
	} else {
		wcols = ddl.TargetColumns(m)
		for _, wc := range wcols {
			fields = append(fields, wc.Name)
		}
	}
	groups, err := goldGroups(ctx, m, tbl, parts, fields)
	if err != nil {
		return nil, err
	}
	var gs *grainStates
	if len(specs) > 0 {
		if gs, err = newGrainStates(m, fields, specs); err != nil {
			return nil, err
		}
	}
	cols := make([]*column, len(wcols))
	input := make(proto.Input, len(wcols))
	grain := -1
	for i, wc := range wcols {
		if s, ok := stateAt[i]; ok {
			input[i] = proto.InputColumn{Name: wc.Name, Data: specs[s].col}
			continue
		}
		col, err := newColumn(wc)
		if err != nil {
			return nil, err
		}
		cols[i] = col
		input[i] = proto.InputColumn{Name: wc.Name, Data: col.col}
		if wc.Name == m.Grain.As {
			grain = i
		}
	}
	if grain < 0 {
		return nil, fmt.Errorf("target columns have no grain %s", m.Grain.As)
	}

	// A producer reads the grains and builds their states ahead of the insert, so that
	// the next block is ready while the server decodes the current one.
	pctx, cancel := context.WithCancel(ctx)
	ready := make(chan builtGrain, 2)
	// State buffers come back once the block holding their last chunk was sent.
	free := make(chan []byte, 8*max(1, len(specs)))
	go func() {
		defer close(ready)
		for recs, err := range groups {
			gr := builtGrain{err: err}
			if err == nil && gs != nil {
				if err := gs.compute(recs); err != nil {
					gr.err = fmt.Errorf("states: %w", err)
				} else {
					gr.states = gs.take(free)
				}
			}
			if gr.err == nil {
				for _, r := range recs {
					r.Retain()
				}
				gr.recs = recs
			}
			select {
			case ready <- gr:
			case <-pctx.Done():
				gr.release()
				return
			}
			if gr.err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for gr := range ready {
			gr.release()
		}
	}()

	counts := make([]int64, len(parts))
	starts, ends := make([]int64, len(parts)), make([]int64, len(parts))
	for i, p := range parts {
		starts[i], ends[i] = p.Start.UnixMicro(), p.End.UnixMicro()
	}
	// The grain being appended, the batch and row reached, and the grain-wide index of
	// that row (states are kept per grain row).
	var (
		cur      builtGrain
		ri, off  int
		rowIndex int
		inBlock  []rowStates // the grains with states in the block being built
	)
	defer func() { cur.release() }()
	fill := func() (bool, error) {
		for _, col := range cols {
			if col != nil {
				col.col.Reset()
			}
		}
		for _, sp := range specs {
			sp.col.Reset()
		}
		// The previous block is sent: the states of the grains it finished are free.
		for _, st := range inBlock {
			if !st.same(cur.states) {
				st.recycle(free)
			}
		}
		inBlock = inBlock[:0]
		n, bytes := 0, 0
		for n < batchRows && bytes < maxBlockStateBytes {
			if ri >= len(cur.recs) {
				cur.release()
				gr, more := <-ready
				if !more {
					break
				}
				if gr.err != nil {
					return false, gr.err
				}
				cur, ri, off, rowIndex = gr, 0, 0, 0
				continue
			}
			rec := cur.recs[ri]
			if gs != nil && n > 0 && bytes+cur.states.size(rowIndex, cur.states.rows()) > maxBlockStateBytes {
				break // the rest of the grain goes into the next block: one part per partition
			}
			to := min(int(rec.NumRows()), off+batchRows-n)
			if gs != nil { // at most the block's state budget, but at least one row
				for to > off+1 && bytes+cur.states.size(rowIndex, rowIndex+to-off) > maxBlockStateBytes {
					to = off + max(1, (to-off)/2)
				}
			}
			for i, col := range cols {
				if col == nil {
					continue
				}
				if err := col.append(rec.Column(i), off, to); err != nil {
					return false, err
				}
			}
			if gs != nil {
				bytes += cur.states.appendTo(specs, rowIndex, rowIndex+to-off)
				if len(inBlock) == 0 || !inBlock[len(inBlock)-1].same(cur.states) {
					inBlock = append(inBlock, cur.states)
				}
			}
			if err := countIn(rec.Column(grain), off, to, starts, ends, counts); err != nil {
				return false, err
			}
			n += to - off
			rowIndex += to - off
			off = to
			if off >= int(rec.NumRows()) {
				ri, off = ri+1, 0
			}
		}
		return n > 0, nil
	}
	if err := c.Insert(ctx, into, input, fill, stageSettings...); err != nil {
		return nil, err
	}
	return byID(parts, counts), nil
}
