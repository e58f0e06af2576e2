package silver

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/arrowmem"
	"goldbridge/lakehouse/bronze"
)

// Reading Bronze: the snapshot ranges of a run, their scan in batches, and the
// consumption of each batch by the parse workers and the merge.

// bronzeReadBatch is the Arrow batch size of Bronze reads: the payload column of a
// large batch is grown (copied and zeroed) over and over by the Parquet reader.
const bronzeReadBatch = 16384

var bronzeFields = []string{bronze.ColPayload, bronze.ColEventID, bronze.ColIngestTS, bronze.ColFile}

// bronzeRange is a range (from, to] of Bronze snapshots a run reads, for sinks.
type bronzeRange struct {
	from, to int64
	sinks    sink
	tasks    []table.FileScanTask
	rowGroup []uint8 // see engine.rowGroup
}

// rows is the number of Bronze rows of the range.
func (r bronzeRange) rows() int64 {
	var n int64
	for _, t := range r.tasks {
		if t.Start == 0 {
			n += t.File.Count()
		}
	}
	return n
}

// planBronze plans the read of the Bronze rows appended in (from, to].
func planBronze(ctx context.Context, bt *table.Table, from, to int64) ([]table.FileScanTask, error) {
	var (
		tasks []table.FileScanTask
		err   error
	)
	if from == 0 {
		tasks, err = bt.Scan(table.WithSnapshotID(to)).PlanFiles(ctx)
	} else {
		tasks, err = bt.NewIncrementalAppendScan().FromSnapshotExclusive(from).ToSnapshot(to).PlanFiles(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("plan bronze (%d, %d]: %w", from, to, err)
	}
	return tasks, nil
}

// scanRanges reads the ranges of the current pass: every range in the first, the
// ranges Silver reads in the others (the quarantine and the keys are done by then).
func (e *engine) scanRanges(ctx context.Context, bt *table.Table, ranges []bronzeRange, opt Options) error {
	for i := range ranges {
		r := &ranges[i]
		if e.group > 0 && r.sinks&sinkSilver == 0 {
			continue
		}
		t0 := time.Now()
		if err := e.scanGroups(ctx, bt, r); err != nil {
			return err
		}
		opt.Log.Debug("silver scan", "from", r.from, "to", r.to, "pass", e.group, "keys", e.winnerCount(), "held_bytes", e.held(), "seconds", time.Since(t0).Seconds())
	}
	return nil
}

// scanGroups scans r, recording the key group of its rows in the first of several passes
// and skipping other groups' rows by it in the others.
func (e *engine) scanGroups(ctx context.Context, bt *table.Table, r *bronzeRange) error {
	// Only the direct reader reads the rows in the same order every time.
	if e.groups == 1 || r.sinks&sinkSilver == 0 || !e.direct(r.tasks) {
		e.rowGroup = nil
		return e.scan(ctx, bt, *r)
	}
	if e.group == 0 {
		r.rowGroup = make([]uint8, r.rows())
	}
	e.rowGroup, e.rowsRead = r.rowGroup, 0
	defer func() { e.rowGroup = nil }()
	if err := e.scan(ctx, bt, *r); err != nil {
		return err
	}
	if n := int64(len(r.rowGroup)); e.rowsRead != n {
		if e.group > 0 {
			return fmt.Errorf("bronze (%d, %d] read %d rows in pass %d, %d in the first", r.from, r.to, e.rowsRead, e.group, n)
		}
		r.rowGroup = nil // the file counts were off: the next passes parse every row
	}
	return nil
}

// scan reads the Bronze rows of r and feeds them to the Silver and/or quarantine side.
func (e *engine) scan(ctx context.Context, bt *table.Table, r bronzeRange) error {
	var (
		recs iter.Seq2[arrow.RecordBatch, error]
		err  error
	)
	// The direct reader decodes into recycled buffers: nothing read here outlives its
	// batch uncopied (the winners, the key set and the quarantine builder copy). The
	// table scan (tasks with deletes, never written by goldbridge) keeps Go's allocator:
	// arrow's filter kernels were seen to fail on recycled buffers.
	pool := arrowmem.NewPool(scanPoolIdle)
	tasks, sinks := r.tasks, r.sinks
	if !e.append && sinks&sinkSilver != 0 {
		// Room for the payload hashes of the shard's share (of the group's), and some.
		share := r.rows() / int64(len(e.ws)*e.groups)
		for _, w := range e.ws {
			w.hashes = slices.Grow(w.hashes, int(share*21/20))
		}
	}
	if e.direct(tasks) {
		recs = readBronzeFiles(ctx, bt, tasks, e.bronzeFields, pool)
	} else if _, recs, err = bt.Scan(table.WithSelectedFields(e.bronzeFields...), table.WithArrowBatchSize(bronzeReadBatch)).ReadTasks(ctx, tasks); err != nil {
		return fmt.Errorf("scan bronze: %w", err)
	}
	return e.consume(ctx, recs, sinks)
}

// consume types the rows of recs on parse workers (one per core, each with its own
// parser and rule set) and merges them into the run's state in scan order, so the
// result is the same as a sequential pass: this goroutine does the accounting and the
// quarantine, and each winners shard's goroutine offers the rows of its keys.
func (e *engine) consume(ctx context.Context, recs iter.Seq2[arrow.RecordBatch, error], sinks sink) error {
	nw := max(1, min(runtime.GOMAXPROCS(0), maxParseWorkers))
	width := len(e.cols)
	inFlight := 2*nw + 2 + 2*len(e.ws)
	jobs := make(chan *chunk, nw)
	ordered := make(chan *chunk, inFlight)
	free := make(chan *chunk, inFlight)
	for range cap(free) {
		free <- &chunk{done: make(chan struct{}, 1)}
	}
	workers := make([]*parseWorker, nw)
	for i := range workers {
		var err error
		if workers[i], err = e.newParseWorker(); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	for _, pw := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				pw.parse(c, width)
				c.done <- struct{}{}
			}
		}()
	}
	// A chunk goes back to free when the last shard is done with it.
	release := func(c *chunk) {
		if c.pending.Add(-1) == 0 {
			c.b.rec.Release()
			c.b = nil
			free <- c
		}
	}
	shardIn := make([]chan *chunk, len(e.ws))
	var shardWG sync.WaitGroup
	if sinks&sinkSilver != 0 {
		for s, w := range e.ws {
			shardIn[s] = make(chan *chunk, inFlight)
			shardWG.Add(1)
			go func() {
				defer shardWG.Done()
				for c := range shardIn[s] {
					e.offerShard(w, s, c, width)
					w.held.Store(w.heldBytes())
					release(c)
				}
			}()
		}
	}
	// The accounting runs here; a feeder goroutine reads Bronze and hands out chunks.
	var scanErr error
	stop := make(chan struct{})
	go func() {
		defer close(ordered)
		defer close(jobs)
		for rec, err := range recs {
			if err != nil {
				scanErr = fmt.Errorf("scan bronze: %w", err)
				return
			}
			b := newBronzeBatch(rec)
			n := int(rec.NumRows())
			base := e.rowsRead
			e.rowsRead += int64(n)
			for lo := 0; lo < n; lo += chunkRows {
				var c *chunk
				select {
				case c = <-free:
				case <-stop:
					rec.Release()
					return
				}
				rec.Retain()
				c.b, c.lo, c.n, c.row = b, lo, min(chunkRows, n-lo), base+int64(lo)
				jobs <- c
				ordered <- c
			}
			rec.Release()
		}
	}()
	var ctxErr error
	for c := range ordered {
		<-c.done
		if ctxErr == nil {
			if e.group == 0 { // the accounting, the quarantine and the keys: once
				e.merge(c, sinks, width)
			}
			if ctxErr = ctx.Err(); ctxErr != nil {
				close(stop)
			}
		}
		if ctxErr != nil || shardIn[0] == nil {
			c.pending.Store(1)
			release(c)
			continue
		}
		c.pending.Store(int32(len(shardIn)))
		for _, in := range shardIn {
			in <- c
		}
		if ctxErr = e.overBudget(c.n); ctxErr != nil {
			close(stop)
		}
	}
	for _, in := range shardIn {
		if in != nil {
			close(in)
		}
	}
	shardWG.Wait()
	wg.Wait()
	if ctxErr == nil && scanErr == nil && shardIn[0] != nil {
		// The shards' last batches, which the checks above may not have seen.
		ctxErr = e.overBudget(0)
	}
	if ctxErr != nil {
		return ctxErr
	}
	return scanErr
}

// resetWinners gives every shard empty winners (for the next group of keys).
func (e *engine) resetWinners() {
	for i := range e.ws {
		w := newWinners(e.cols)
		w.firstWins = e.append
		if e.spec.Debezium != nil {
			w.toast = newToastState()
		}
		if len(e.keyIdx) == 1 && e.cols[e.keyIdx[0]].Type.Kind == String {
			w.keyCol = e.keyIdx[0] // its rendered key is its value
		}
		e.ws[i] = w
	}
}
