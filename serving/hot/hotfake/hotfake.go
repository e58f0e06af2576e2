// Package hotfake is a hot.Target in memory, for tests that exercise sync's planning,
// publication and records without a server: each method calls its function field when
// it is set, and otherwise the in-memory tier (Memory), which keeps the recorded push
// state and the served row count of each partition and publishes a batch at once.
package hotfake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/serving"
	"goldbridge/serving/hot"
)

// Target is a hot.Target whose methods are its function fields, falling back to
// Memory's. It is safe for concurrent use.
type Target struct {
	EnsureFunc     func(ctx context.Context, m *serving.Mart, tbl *table.Table, rebuild bool) (hot.Outcome, error)
	PartitionsFunc func(ctx context.Context, m *serving.Mart) (hot.Served, error)
	PublishFunc    func(ctx context.Context, m *serving.Mart, tbl *table.Table, b hot.Batch) (hot.Published, error)
	ReadBackFunc   func(ctx context.Context, m *serving.Mart, hot []hot.Partition) (hot.ReadBack, error)

	Memory Memory
}

var _ hot.Target = (*Target)(nil)

// Ensure calls EnsureFunc, or Memory.Ensure.
func (t *Target) Ensure(ctx context.Context, m *serving.Mart, tbl *table.Table, rebuild bool) (hot.Outcome, error) {
	if t.EnsureFunc != nil {
		return t.EnsureFunc(ctx, m, tbl, rebuild)
	}
	return t.Memory.Ensure(m, rebuild), nil
}

// Partitions calls PartitionsFunc, or Memory.Partitions.
func (t *Target) Partitions(ctx context.Context, m *serving.Mart) (hot.Served, error) {
	if t.PartitionsFunc != nil {
		return t.PartitionsFunc(ctx, m)
	}
	return t.Memory.Partitions(m), nil
}

// Publish calls PublishFunc, or Memory.Publish.
func (t *Target) Publish(ctx context.Context, m *serving.Mart, tbl *table.Table, b hot.Batch) (hot.Published, error) {
	if t.PublishFunc != nil {
		return t.PublishFunc(ctx, m, tbl, b)
	}
	return t.Memory.Publish(m, b), nil
}

// ReadBack calls ReadBackFunc; Memory keeps no rows, so without it ReadBack fails.
func (t *Target) ReadBack(ctx context.Context, m *serving.Mart, parts []hot.Partition) (hot.ReadBack, error) {
	if t.ReadBackFunc != nil {
		return t.ReadBackFunc(ctx, m, parts)
	}
	return hot.ReadBack{}, fmt.Errorf("hotfake: no ReadBackFunc for %s", m.Name)
}

// Memory is the in-memory tier: per mart, the recorded state and the served rows of
// each partition, and every batch published, in order. The zero value is empty.
type Memory struct {
	mu      sync.Mutex
	marts   map[string]*mart
	Batches []hot.Batch // every batch published, in order
}

type mart struct {
	states map[string]hot.State
	live   map[string]uint64
	tables bool // Ensure ran since the last rebuild
}

func (mem *Memory) mart(name string) *mart {
	if mem.marts == nil {
		mem.marts = map[string]*mart{}
	}
	mt := mem.marts[name]
	if mt == nil {
		mt = &mart{states: map[string]hot.State{}, live: map[string]uint64{}}
		mem.marts[name] = mt
	}
	return mt
}

// Ensure creates the mart's tables; with rebuild it empties them first (the recorded
// states stay, as hot.Target.Ensure says). It never asks for a rebuild.
func (mem *Memory) Ensure(m *serving.Mart, rebuild bool) hot.Outcome {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	mt := mem.mart(m.Name)
	if rebuild {
		clear(mt.live)
	}
	mt.tables = true
	return hot.Outcome{}
}

// Partitions returns copies of the recorded states and the served row counts.
func (mem *Memory) Partitions(m *serving.Mart) hot.Served {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	mt := mem.mart(m.Name)
	return hot.Served{States: maps.Clone(mt.states), Live: maps.Clone(mt.live)}
}

// Publish serves the batch's partitions with their Gold row counts and records their
// states at the batch's clock, and removes the dropped ones, all at once.
func (mem *Memory) Publish(m *serving.Mart, b hot.Batch) hot.Published {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	mt := mem.mart(m.Name)
	if b.Rebuild {
		clear(mt.live)
	}
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	res := hot.Result{ByID: map[string]int64{}, Exchanged: b.Rebuild}
	for _, p := range b.Push {
		mt.live[p.ID] = uint64(p.Rows)
		mt.states[p.ID] = hot.State{Partition: p.ID, SnapshotID: p.SnapshotID, Rows: uint64(p.Rows), Checksum: p.Checksum, PushedAt: now()}
		res.Rows += p.Rows
		res.ByID[p.ID] = p.Rows
	}
	for _, id := range b.Drop {
		delete(mt.live, id)
		delete(mt.states, id)
	}
	mem.Batches = append(mem.Batches, b)
	return hot.Published{Push: res}
}

// Served lists the partition ids served for a mart, sorted.
func (mem *Memory) Served(mart string) []string {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	return slices.Sorted(maps.Keys(mem.mart(mart).live))
}

// Lose removes a served partition's rows but keeps its recorded state, as a table
// truncated behind the target's back would.
func (mem *Memory) Lose(mart, id string) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	delete(mem.mart(mart).live, id)
}
