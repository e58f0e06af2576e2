package chtarget

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/apache/iceberg-go/table"
	"github.com/cespare/xxhash/v2"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/fingerprint"
	"goldbridge/serving/hot"
)

// Sharded is the hot.Target of a ClickHouse cluster of plain nodes grouped in shards, with no
// Keeper (no replication, no ON CLUSTER): each hot partition lives on one shard, its home
// (Home: a stable function of the partition id and the number of shards), and is pushed
// to every node of that shard, each node a single server of its own (ClickHouse: the push
// there is one EXCHANGE TABLES). <t>_final on each node reads <t>_dist, the Distributed
// table over the nodes' <t> (serving.Mart.Sharded), which reads one node of each shard and
// fails over to another node of the shard when one is down.
//
// Promise, per shard: a reader of one node sees, for every partition homed on its shard,
// the old or the new state of a push, never a mix. Across shards a publication is not
// atomic: a Distributed reader during a push sees each shard old or new independently,
// and during a partition's move between shards (a change in the number of shards) it may
// see it on neither or on both shards; Partitions reports a partition that is not on
// every node of its home shard with the same state, or that also lives elsewhere, as not
// served, so the next Sync pushes it again (and drops the stray copy).
type Sharded struct {
	shards [][]*ClickHouse
}

// NewSharded returns the target of the nodes reached by clients, one slice per shard (in
// the order of the cluster's remote_servers: the order decides each partition's home).
// The clients stay the caller's to close.
func NewSharded(shards [][]*chconn.Client) (*Sharded, error) {
	if len(shards) == 0 {
		return nil, errors.New("sharded target: no shards")
	}
	s := &Sharded{}
	for i, nodes := range shards {
		if len(nodes) == 0 {
			return nil, fmt.Errorf("sharded target: shard %d has no node", i+1)
		}
		var ts []*ClickHouse
		for _, c := range nodes {
			t := NewClickHouse(c)
			t.local = true
			ts = append(ts, t)
		}
		s.shards = append(s.shards, ts)
	}
	return s, nil
}

// Home is the shard (0-based) of partition id among n shards: xxhash64 of the id modulo
// n, stable across runs and machines.
func Home(id string, n int) int { return int(xxhash.Sum64String(id) % uint64(n)) }

// each runs fn for every node, shards in parallel, and joins the errors, each named by
// its node.
func (s *Sharded) each(fn func(shard int, t *ClickHouse) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i, nodes := range s.shards {
		for _, t := range nodes {
			wg.Go(func() {
				if err := fn(i, t); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("shard %d node %s: %w", i+1, t.c, err))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Ensure implements hot.Target on every node; the served table is rebuilt when it differs
// on any node.
func (s *Sharded) Ensure(ctx context.Context, m *serving.Mart, tbl *table.Table, rebuild bool) (hot.Outcome, error) {
	var mu sync.Mutex
	var out hot.Outcome
	err := s.each(func(_ int, t *ClickHouse) error {
		o, err := t.Ensure(ctx, m, tbl, rebuild)
		mu.Lock()
		defer mu.Unlock()
		out.Rebuild = out.Rebuild || o.Rebuild
		out.Changes = append(out.Changes, o.Changes...)
		return err
	})
	return out, err
}

// nodeServed is what one node serves.
type nodeServed struct {
	shard int
	hot.Served
}

// Partitions implements hot.Target. A partition is listed as served (its state, its rows)
// only when every node of its home shard holds it with the same recorded state and rows
// and no other shard holds it; a partition held only outside its home is listed as live
// with no state, so that a Sync drops it when it left the window and pushes it (dropping
// the strays) when it is hot.
func (s *Sharded) Partitions(ctx context.Context, m *serving.Mart) (hot.Served, error) {
	var mu sync.Mutex
	var all []nodeServed
	err := s.each(func(shard int, t *ClickHouse) error {
		sv, err := t.Partitions(ctx, m)
		mu.Lock()
		all = append(all, nodeServed{shard, sv})
		mu.Unlock()
		return err
	})
	if err != nil {
		return hot.Served{}, err
	}
	n := len(s.shards)
	ids := map[string]bool{}
	for _, ns := range all {
		for id := range ns.States {
			ids[id] = true
		}
		for id := range ns.Live {
			ids[id] = true
		}
	}
	out := hot.Served{States: map[string]hot.State{}, Live: map[string]uint64{}}
	for id := range ids {
		home := Home(id, n)
		consistent, stray := true, false
		var st *hot.State
		var rows *uint64
		for _, ns := range all {
			r, live := ns.Live[id]
			if ns.shard != home {
				stray = stray || live
				continue
			}
			if nst, ok := ns.States[id]; !ok || (st != nil && !sameState(*st, nst)) {
				consistent = false
			} else if st == nil {
				st = &nst
			}
			if !live || (rows != nil && *rows != r) {
				consistent = false
			} else if rows == nil {
				rows = &r
			}
		}
		switch {
		case consistent && !stray:
			out.States[id], out.Live[id] = *st, *rows
		case rows != nil || stray:
			out.Live[id] = 0 // on some node: dropped if not parts, pushed again (state unknown) if hot
		}
	}
	return out, nil
}

func sameState(a, b hot.State) bool {
	return a.SnapshotID == b.SnapshotID && a.Checksum == b.Checksum && a.Rows == b.Rows
}

// Publish implements hot.Target: each node pushes the batch's partitions homed on its shard
// and drops Batch.Drop and the batch's partitions homed elsewhere (a stray copy), shards
// and nodes in parallel. An error names every node that failed; the others published.
func (s *Sharded) Publish(ctx context.Context, m *serving.Mart, tbl *table.Table, b hot.Batch) (hot.Published, error) {
	n := len(s.shards)
	var mu sync.Mutex
	var pub hot.Published
	pub.Push.ByID = map[string]int64{}
	err := s.each(func(shard int, t *ClickHouse) error {
		nb := b
		nb.Push, nb.Drop = nil, slices.Clone(b.Drop)
		for _, p := range b.Push {
			if Home(p.ID, n) == shard {
				nb.Push = append(nb.Push, p)
			} else {
				nb.Drop = append(nb.Drop, p.ID)
			}
		}
		p, err := t.Publish(ctx, m, tbl, nb)
		mu.Lock()
		defer mu.Unlock()
		if t == s.shards[shard][0] { // rows are counted once per shard
			pub.Push.Rows += p.Push.Rows
			maps.Copy(pub.Push.ByID, p.Push.ByID)
			pub.Push.Elapsed = max(pub.Push.Elapsed, p.Push.Elapsed)
		}
		pub.Purged.DroppedTables += p.Purged.DroppedTables
		pub.Purged.OutdatedParts += p.Purged.OutdatedParts
		pub.Purged.DictionaryKeys += p.Purged.DictionaryKeys
		return err
	})
	return pub, err
}

// ReadBack implements hot.Target: every node is read by itself (its local <t>, not the
// Distributed table); a partition is read from its home shard, and a node that differs
// from the first node of its shard, or a copy outside the home shard, is reported in
// ReadBack.Diverged.
func (s *Sharded) ReadBack(ctx context.Context, m *serving.Mart, parts []hot.Partition) (hot.ReadBack, error) {
	n := len(s.shards)
	reads := make([][]hot.ReadBack, n)
	for i := range s.shards {
		reads[i] = make([]hot.ReadBack, len(s.shards[i]))
	}
	err := s.each(func(shard int, t *ClickHouse) error {
		rb, err := t.ReadBack(ctx, m, parts)
		reads[shard][slices.Index(s.shards[shard], t)] = rb
		return err
	})
	if err != nil {
		return hot.ReadBack{}, err
	}
	out := hot.ReadBack{Stats: map[string]map[string]*hot.LevelStats{}, Diverged: map[string]string{}}
	for i, nodes := range reads {
		for k, rb := range nodes {
			out.Columns = append(out.Columns, rb.Columns...)
			for id, st := range rb.Stats {
				switch {
				case Home(id, n) != i:
					out.Diverged[id] = fmt.Sprintf("a copy on shard %d, its home is shard %d", i+1, Home(id, n)+1)
				case k == 0:
					out.Stats[id] = st
				case !sameLevels(st, nodes[0].Stats[id]):
					out.Diverged[id] = fmt.Sprintf("node %s of shard %d differs from node %s", s.shards[i][k].c, i+1, s.shards[i][0].c)
				}
			}
			if k > 0 {
				for id := range nodes[0].Stats {
					if _, ok := rb.Stats[id]; !ok {
						out.Diverged[id] = fmt.Sprintf("missing on node %s of shard %d", s.shards[i][k].c, i+1)
					}
				}
			}
		}
	}
	return out, nil
}

func sameLevels(a, b map[string]*hot.LevelStats) bool {
	if len(a) != len(b) {
		return false
	}
	for l, x := range a {
		y := b[l]
		if y == nil || x.Rows != y.Rows || x.Hash != y.Hash || len(x.Sums) != len(y.Sums) ||
			!maps.Equal(x.States, y.States) || !maps.EqualFunc(x.Weighted, y.Weighted, fingerprint.Near) {
			return false
		}
		for k, v := range x.Sums {
			if !v.Equal(y.Sums[k]) {
				return false
			}
		}
	}
	return true
}

// Storage implements StorageReporter: the sums over every node.
func (s *Sharded) Storage(ctx context.Context, m *serving.Mart) (hot.Storage, error) {
	var mu sync.Mutex
	var sum hot.Storage
	err := s.each(func(_ int, t *ClickHouse) error {
		st, err := t.Storage(ctx, m)
		mu.Lock()
		defer mu.Unlock()
		sum.Parts += st.Parts
		sum.Bytes += st.Bytes
		sum.InactiveParts += st.InactiveParts
		sum.InactiveBytes += st.InactiveBytes
		sum.DictionaryKeys += st.DictionaryKeys
		sum.DictionaryBytes += st.DictionaryBytes
		return err
	})
	return sum, err
}

// Prepare ensures the mart's tables on every node ahead of its Sync (ClickHouse.Prepare).
func (s *Sharded) Prepare(ctx context.Context, m *serving.Mart, tbl *table.Table) error {
	return s.each(func(_ int, t *ClickHouse) error { return t.Prepare(ctx, m, tbl) })
}
