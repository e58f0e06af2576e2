package demo

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// Target shares of all lines (see Stats for how they are counted).
const (
	shareBad      = 0.01
	shareDup      = 0.05
	shareLate     = 0.03
	shareSnapshot = 0.01
	shareHot      = 0.01
	keysDeleted   = 0.03  // share of keys whose last event is a delete
	updatesMoved  = 0.005 // share of in-order updates that move created_at to another day
)

// Tuning of the bounded state.
const (
	ringDays    = 14      // an order receives events for ~this many days of the stream (fewer when maxRing caps it)
	minRing     = 1024    // lower bound on the active-key ring
	maxRing     = 1 << 16 // upper bound on the active-key ring (~3 MB of state, cache friendly)
	maxPending  = 1 << 12 // bound on duplicate and late lines held back for re-emission
	dupDelay    = 5000    // a duplicate is re-emitted 1..dupDelay lines after its original
	lateDelay   = 2000    // a late event is emitted 1..lateDelay lines after the newer event
	maxJitterMs = 1000    // updated_at lags the stream clock by 0..999 ms
	dayMs       = 86400 * 1000
	maxCents    = 99_999_99 // amounts stay below 100000.00
)

// keyState is the current row of one order, kept only while the order is active.
type keyState struct {
	id, user, cents      int64
	createdAt, updatedAt int64 // unix ms
	status, country      uint8
	category, currency   uint8
	alive, snapped       bool // snapped: an r line was written since the last change
}

// gen produces the line stream; it is independent of how lines are split into files.
type gen struct {
	rng        *rand.Rand
	seed       uint64
	start, end int64   // unix ms: created_at span and newest updated_at
	step       float64 // stream clock advance per line, ms
	keys       int64   // target number of distinct order ids
	keysPerEv  float64 // keys / events, for pacing creates
	users      int64
	created    int64
	hot        keyState   // order 1 is the hot key; it is never evicted or deleted
	ring       []keyState // active orders, overwritten oldest first
	ringHead   int
	ringFilled int
	pending    pendQueue

	pBad, pDup, pSnap, pHot, pDel, pLate float64 // per-decision probabilities

	st      *Stats
	buf     []byte // the current line, newline included
	scratch []byte
}

func newGen(opt Options, st *Stats) *gen {
	e, k := float64(opt.Events), float64(opt.Keys)
	g := &gen{
		rng:       rand.New(rand.NewPCG(opt.Seed, mix(opt.Seed^0x6f7264657273))),
		seed:      opt.Seed,
		end:       opt.End.UnixMilli(),
		keys:      opt.Keys,
		keysPerEv: k / e,
		users:     max(1, opt.Keys/2),
		st:        st,
		buf:       make([]byte, 0, 512),
		scratch:   make([]byte, 0, 512),
	}
	g.start = g.end - int64(opt.Days)*dayMs
	g.step = float64(g.end-g.start) / e

	ring := min(max(opt.Keys*ringDays/int64(opt.Days), minRing), maxRing, opt.Keys-1)
	g.ring = make([]keyState, ring)

	// Shares of lines: bad rolls only happen on slots not taken by a held-back
	// line; duplicates copy good lines; late lines come from in-order updates.
	real := 1 - shareBad - shareDup - shareLate
	creates := k / e
	deletes := keysDeleted * k / e
	updates := real - creates - deletes - shareSnapshot
	g.pBad = shareBad / (1 - shareDup - shareLate)
	g.pDup = shareDup / (1 - shareDup - shareBad)
	if rest := real - creates; rest > 0 { // snapshot/hot/delete rolls happen on real non-create lines
		g.pSnap = min(shareSnapshot/rest, 0.25)
		g.pHot = min(shareHot/rest, 0.25)
		g.pDel = min(deletes/rest, 0.25)
	}
	if updates > 0 {
		g.pLate = min(shareLate/updates, 1)
	}
	return g
}

// next builds line i (0-based) into g.buf and counts it.
func (g *gen) next(i int64) []byte {
	now := min(g.start+int64(g.step*float64(i+1)), g.end) // stream clock
	if idx := g.pending.popDue(i); idx >= 0 {
		it := &g.pending.items[idx]
		g.buf = append(g.buf[:0], it.line...)
		late := it.late
		g.pending.release(idx)
		if !late {
			g.st.Duplicates++
			return g.buf
		}
		g.st.Updates++
		g.st.Late++
	} else if g.created > 0 && g.rng.Float64() < g.pBad {
		g.bad(now)
		return g.buf
	} else if !g.real(i, now) {
		return g.buf
	}
	if g.rng.Float64() < g.pDup {
		g.pending.push(i+1+g.rng.Int64N(dupDelay), false, g.buf)
	}
	return g.buf
}

// real writes an in-order event: create, snapshot, update or delete. It
// reports false if it had to write a bad line instead (see update).
func (g *gen) real(i, now int64) bool {
	if g.created == 0 || (g.created < g.keys && float64(g.created) < g.keysPerEv*float64(i+1)) {
		g.create(now)
		return true
	}
	r := g.rng.Float64()
	switch {
	case r < g.pSnap:
		k := g.pick()
		if k.snapped { // a second r without a change would equal the first byte for byte
			return g.update(i, now, k, 'u')
		}
		k.snapped = true
		g.emit(k, 'r', k.updatedAt)
		g.st.Snapshots++
		return true
	case r < g.pSnap+g.pHot:
		return g.update(i, now, &g.hot, 'u')
	case r < g.pSnap+g.pHot+g.pDel:
		k := g.pick()
		if k == &g.hot {
			return g.update(i, now, k, 'u')
		}
		return g.update(i, now, k, 'd')
	default:
		return g.update(i, now, g.pick(), 'u')
	}
}

// create starts a new order with attributes derived from (seed, id).
func (g *gen) create(now int64) {
	g.created++
	id := g.created
	h := mix(g.seed ^ mix(uint64(id)))
	k := keyState{id: id, alive: true, status: statusCreated}
	k.user = g.user(unit(mix(h + 1)))
	k.country = pickWeighted(countries[:], unit(mix(h+2)))
	k.category = pickWeighted(categories[:], unit(mix(h+3)))
	switch c := unit(mix(h + 4)); {
	case c < 0.05:
		k.currency = currencyMissing
	case c < 0.10:
		k.currency = currencyNull
	}
	// Lognormal amount around the category's typical value, at least 0.50.
	amount := categories[k.category].mean * math.Exp(0.7*g.rng.NormFloat64()-0.245)
	k.cents = max(50, min(int64(amount*100), maxCents))

	k.createdAt = floorDiv(max(g.start, now-g.rng.Int64N(60_000)), 1000) * 1000
	k.updatedAt = min(k.createdAt+g.rng.Int64N(maxJitterMs), now)

	var slot *keyState
	if id == 1 {
		slot = &g.hot
	} else {
		slot = &g.ring[g.ringHead]
		g.ringHead = (g.ringHead + 1) % len(g.ring)
		g.ringFilled = max(g.ringFilled, g.ringHead)
		if g.ringHead == 0 {
			g.ringFilled = len(g.ring)
		}
	}
	*slot = k
	g.emit(slot, 'c', k.updatedAt)
	g.st.Creates++
	g.st.Keys++
}

// update applies a change to k and writes it with op 'u', or writes the last row
// with a newer updated_at and op 'd' and retires k. An update may also queue a
// late event: an intermediate version that reaches the landing zone after k's
// newer version.
//
// If k's last version is already at End there is no room for a newer one: it
// writes a snapshot instead, or a bad line if k was just snapshotted (only
// possible when there are more events than milliseconds per order) and
// reports false.
func (g *gen) update(i, now int64, k *keyState, op byte) bool {
	prev := *k
	ts := max(now-g.rng.Int64N(maxJitterMs), k.updatedAt+1)
	if ts > g.end {
		if k.snapped {
			g.bad(now)
			return false
		}
		g.emit(k, 'r', k.updatedAt)
		g.st.Snapshots++
		k.snapped = true
		return true
	}
	k.updatedAt = ts
	k.snapped = false
	if op == 'd' {
		k.alive = false
		g.emit(k, 'd', ts)
		g.st.Deletes++
		return true
	}
	if k.status < statusDelivered && g.rng.Float64() < 0.75 {
		k.status++
	} else if g.rng.Float64() < 0.5 {
		k.cents = min(max(1, k.cents*(80+g.rng.Int64N(41))/100), maxCents)
	}
	if g.rng.Float64() < updatesMoved {
		d := (1 + g.rng.Int64N(3)) * dayMs
		if c := k.createdAt - d; c >= g.start {
			k.createdAt = c
		} else if c := k.createdAt + d; c <= ts {
			k.createdAt = c
		}
	}
	g.emit(k, 'u', ts)
	g.st.Updates++

	if gap := ts - prev.updatedAt; gap >= 2 && g.rng.Float64() < g.pLate {
		late := prev
		late.updatedAt += 1 + g.rng.Int64N(gap-1)
		g.scratch = appendRow(g.scratch[:0], &late, 'u', late.updatedAt, badNone)
		g.scratch = append(g.scratch, '\n')
		g.pending.push(i+1+g.rng.Int64N(lateDelay), true, g.scratch)
	}
	return true
}

// bad writes one bad line of a random kind, based on an active order.
func (g *gen) bad(now int64) {
	g.st.Bad++
	kind := badKind(1 + g.rng.IntN(int(numBadKinds)-1))
	if kind == badNotJSON {
		g.buf = append(g.buf[:0], notJSON[g.rng.IntN(len(notJSON))]...)
		g.buf = appendUint(g.buf, g.rng.Uint64N(1<<40), 1)
		g.buf = append(g.buf, '\n')
		return
	}
	k := g.pick()
	g.buf = appendRow(g.buf[:0], k, 'u', max(now-g.rng.Int64N(maxJitterMs), k.createdAt), kind)
	if kind == badTruncated { // drop at least the closing brace
		n := len(g.buf)
		g.buf = g.buf[:n/2+g.rng.IntN(n-1-n/2)]
	}
	g.buf = append(g.buf, '\n')
}

// emit builds a good line for k into g.buf.
func (g *gen) emit(k *keyState, op byte, ts int64) {
	g.buf = appendRow(g.buf[:0], k, op, ts, badNone)
	g.buf = append(g.buf, '\n')
}

// pick returns a random live active order, or the hot key if none is found quickly.
func (g *gen) pick() *keyState {
	if g.ringFilled == 0 {
		return &g.hot
	}
	j := g.rng.IntN(g.ringFilled)
	for range min(16, g.ringFilled) {
		if g.ring[j].alive {
			return &g.ring[j]
		}
		if j++; j == g.ringFilled {
			j = 0
		}
	}
	return &g.hot
}

// user maps a uniform u to a user id with a Zipf-like (exponent 0.8) rank
// distribution, scattering ranks over the id space.
func (g *gen) user(u float64) int64 {
	const s = 0.8
	n := float64(g.users)
	rank := int64(math.Pow(1+u*(math.Pow(n+1, 1-s)-1), 1/(1-s))) // 1..users
	rank = min(max(rank, 1), g.users)
	// (rank-1)*prime mod users is a bijection unless users is a multiple of the prime.
	hi, lo := bits.Mul64(uint64(rank-1), 2654435761)
	_, rem := bits.Div64(hi%uint64(g.users), lo, uint64(g.users))
	return int64(rem) + 1
}

// pickWeighted returns the index in w at cumulative position u in [0,1).
func pickWeighted(w []weighted, u float64) uint8 {
	total := 0.0
	for i := range w {
		total += w[i].weight
	}
	x := u * total
	for i := range w {
		if x < w[i].weight {
			return uint8(i)
		}
		x -= w[i].weight
	}
	return uint8(len(w) - 1)
}

// mix is the splitmix64 finalizer: a stateless, well-spread 64-bit hash.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// unit maps a hash to a float64 in [0,1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// pendItem is a line held back for later emission: a duplicate or a late event.
type pendItem struct {
	due, seq int64
	late     bool
	line     []byte
}

// pendQueue is a bounded min-heap of pendItem by (due, seq); item buffers are reused.
type pendQueue struct {
	items []pendItem
	heap  []int32 // indexes into items
	free  []int32
	seq   int64
}

// push copies line into the queue; it drops the line when the queue is full.
func (q *pendQueue) push(due int64, late bool, line []byte) {
	if len(q.heap) >= maxPending {
		return
	}
	var idx int32
	if n := len(q.free); n > 0 {
		idx = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		q.items = append(q.items, pendItem{})
		idx = int32(len(q.items) - 1)
	}
	it := &q.items[idx]
	it.due, it.seq, it.late = due, q.seq, late
	it.line = append(it.line[:0], line...)
	q.seq++
	q.heap = append(q.heap, idx)
	for j := len(q.heap) - 1; j > 0; {
		p := (j - 1) / 2
		if !q.less(q.heap[j], q.heap[p]) {
			break
		}
		q.heap[j], q.heap[p] = q.heap[p], q.heap[j]
		j = p
	}
}

// popDue removes and returns the earliest item if it is due at line i, else -1.
// The caller must release the returned index after using its line.
func (q *pendQueue) popDue(i int64) int32 {
	if len(q.heap) == 0 || q.items[q.heap[0]].due > i {
		return -1
	}
	top := q.heap[0]
	n := len(q.heap) - 1
	q.heap[0] = q.heap[n]
	q.heap = q.heap[:n]
	for j := 0; ; {
		l, r, m := 2*j+1, 2*j+2, j
		if l < n && q.less(q.heap[l], q.heap[m]) {
			m = l
		}
		if r < n && q.less(q.heap[r], q.heap[m]) {
			m = r
		}
		if m == j {
			break
		}
		q.heap[j], q.heap[m] = q.heap[m], q.heap[j]
		j = m
	}
	return top
}

func (q *pendQueue) release(idx int32) { q.free = append(q.free, idx) }

func (q *pendQueue) less(a, b int32) bool {
	x, y := &q.items[a], &q.items[b]
	if x.due != y.due {
		return x.due < y.due
	}
	return x.seq < y.seq
}
