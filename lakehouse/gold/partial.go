package gold

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

// partial is the aggregation state of one run. Rows are folded into base groups only:
// one per grain value and combination of the base dimensions (every dimension that some
// grouping set keeps). Each grouping set's groups are merged from the base groups at the
// end (rows), which is exact for every aggregate: sums and counts add, min and max
// compare, distinct sets unite and quantile inputs concatenate.
//
// Nothing it keeps points into a scan's Arrow buffers: dimension values, distinct values
// and min/max strings are copied once when first seen, so the scan may recycle them.
type partial struct {
	m        MartSpec
	levels   []mart.Level
	baseDims []int // indexes into m.Dims, ascending

	dims     []interner       // per dimension: value → code; code 0 is NULL
	distinct []*keySets       // per measure: the count_distinct values (nil for other aggs)
	index    map[string]int32 // base key (grain, dimension codes) → position in base
	base     []baseGroup
	keyBuf   []byte
	finished bool // rank-ordered ids, sorted and unique (finish)

	served     []mart.Agg   // per measure: the aggregate it is computed as (mart.Agg.Served, once)
	conds      []*rowFilter // per measure: its compiled if expression (nil without one)
	joins      []*joined    // loaded joins, in MartSpec.Joins order
	fixedGrain int64        // snapshot mode: the grain of every row
	nullGrain  int64        // rows read that passed the filter with a NULL grain (not aggregated)
	workers    int          // goroutines of scanSilver (0: scanWorkers)
}

// baseGroup is one group of the base level.
type baseGroup struct {
	grain int64
	codes []int32 // per dimension of m.Dims (0: NULL, or not a base dimension)
	accs  []acc
}

func newPartial(m MartSpec) (*partial, error) {
	levels, err := m.levels()
	if err != nil {
		return nil, err
	}
	p := &partial{m: m, levels: levels, index: map[string]int32{}, dims: make([]interner, len(m.Dims)), distinct: make([]*keySets, len(m.Measures))}
	for _, lv := range levels {
		for _, d := range lv.Keep {
			if !slices.Contains(p.baseDims, d) {
				p.baseDims = append(p.baseDims, d)
			}
		}
	}
	slices.Sort(p.baseDims)
	for i, d := range m.Dims {
		p.dims[i].init(d.Type)
	}
	p.conds = make([]*rowFilter, len(m.Measures))
	p.served = make([]mart.Agg, len(m.Measures))
	for i, ms := range m.Measures {
		p.served[i] = ms.Agg.Served()
		if p.served[i] == mart.CountDistinct {
			p.distinct[i] = &keySets{typ: ms.InputType, byGrain: map[int64]*keySet{}}
		}
		if p.conds[i], err = compileExpr("if", ms.If, m.rowColumns()); err != nil {
			return nil, fmt.Errorf("measure %s: %w", ms.Name, err)
		}
	}
	return p, nil
}

// absorb moves q's groups and distinct sets into p. q holds none of p's grain values
// (scanParallel splits the rows by grain), so no group meets another: only q's
// dimension codes are renumbered into p's.
func (p *partial) absorb(q *partial) {
	recode := make([][]int32, len(q.dims))
	for d := range q.dims {
		recode[d] = make([]int32, len(q.dims[d].vals))
		for c, v := range q.dims[d].vals {
			recode[d][c] = p.dims[d].code(v)
		}
	}
	for _, g := range q.base {
		b := binary.LittleEndian.AppendUint64(p.keyBuf[:0], uint64(g.grain))
		for _, d := range p.baseDims {
			g.codes[d] = recode[d][g.codes[d]]
			b = binary.LittleEndian.AppendUint32(b, uint32(g.codes[d]))
		}
		p.keyBuf = b
		p.index[string(b)] = int32(len(p.base))
		p.base = append(p.base, g)
	}
	for i, ks := range q.distinct {
		if ks != nil {
			maps.Copy(p.distinct[i].byGrain, ks.byGrain)
		}
	}
	p.nullGrain += q.nullGrain
}

// add folds one Silver row (grain value, dimension values, measure inputs and the by
// inputs of max_by and min_by) into its base group.
func (p *partial) add(grain int64, dims, vals, bys []silver.Value) {
	b := binary.LittleEndian.AppendUint64(p.keyBuf[:0], uint64(grain))
	for _, d := range p.baseDims {
		b = binary.LittleEndian.AppendUint32(b, uint32(p.dims[d].code(dims[d])))
	}
	p.keyBuf = b
	gi, ok := p.index[string(b)]
	if !ok {
		gi = int32(len(p.base))
		g := baseGroup{grain: grain, codes: make([]int32, len(p.m.Dims)), accs: make([]acc, len(p.m.Measures))}
		for i, d := range p.baseDims {
			g.codes[d] = int32(binary.LittleEndian.Uint32(b[8+4*i:]))
		}
		p.base = append(p.base, g)
		p.index[string(b)] = gi
	}
	p.base[gi].add(p.m.Measures, p.served, vals, bys, p.distinct)
}

// add folds one row's measure inputs into the group: each measure is computed as the
// aggregate it is served as (mart.Agg.Served) over its non-NULL inputs (a count's input
// is a mark on every row; a condition's false rows are NULL: scanSilver; max_by and
// min_by skip a row whose by is NULL too).
func (g *baseGroup) add(ms []MeasureSpec, served []mart.Agg, vals, bys []silver.Value, distinct []*keySets) {
	for i, m := range ms {
		v := vals[i]
		if v.Null {
			continue
		}
		a := &g.accs[i]
		if m.By != "" {
			if !bys[i].Null {
				a.n++
				a.pick(bys[i], v, m)
			}
			continue
		}
		a.n++
		// The per-row fold: the one place of the package outside shapes.go that switches
		// on the aggregate, kept a switch because it runs per row and measure (an
		// indirect call there, and a distinct count's key sets, cost more than they save).
		switch served[i] {
		case mart.Sum, mart.Avg:
			switch m.InputType.Kind {
			case silver.Decimal:
				a.dsum = a.dsum.Add(v.D)
			case silver.Float64:
				a.fsum += v.F
			default:
				a.isum += v.I
			}
		case mart.Min, mart.Max:
			a.minMax(v, m.InputType)
		case mart.CountDistinct:
			id := distinct[i].of(g.grain).id(v)
			if k := len(a.ids); k == 0 || a.ids[k-1] != id {
				a.ids = append(a.ids, id)
			}
		case mart.Quantiles:
			a.vals = append(a.vals, floatOf(v, m.InputType))
		}
	}
}

// minMax widens a's range by v (strings are copied: v may point into a scan buffer).
func (a *acc) minMax(v silver.Value, t silver.Type) {
	if !a.hasMM || less(v, a.min, t) {
		a.min = v
		a.min.S = strings.Clone(v.S)
	}
	if !a.hasMM || less(a.max, v, t) {
		a.max = v
		a.max.S = strings.Clone(v.S)
	}
	a.hasMM = true
}

// pick keeps the pair (by, v) if it beats the one kept (max_by: the larger by, then the
// larger value; min_by: the smaller): a.min holds the by, a.max the value (strings
// are copied: they may point into a scan buffer).
func (a *acc) pick(by, v silver.Value, ms MeasureSpec) {
	if a.hasMM && !beats(by, v, a.min, a.max, ms) {
		return
	}
	a.min, a.max, a.hasMM = by, v, true
	a.min.S, a.max.S = strings.Clone(by.S), strings.Clone(v.S)
}

// beats reports whether the pair (by, v) comes before (byB, vB) in the order of ms's
// max_by (descending) or min_by (ascending).
func beats(by, v, byB, vB silver.Value, ms MeasureSpec) bool {
	if ms.Agg == mart.MinBy {
		by, v, byB, vB = byB, vB, by, v
	}
	if less(byB, by, ms.ByType) {
		return true
	}
	return !less(by, byB, ms.ByType) && less(vB, v, ms.InputType)
}

// finish puts the distinct ids of every base group in rank order (the order of the
// values' text), sorted and without duplicates. The grains' sets are ranked, and the
// groups' ids renumbered, on every core (scanWorkers): each is on its own.
func (p *partial) finish() {
	if p.finished {
		return
	}
	p.finished = true
	n := p.workers
	if n <= 0 {
		n = scanWorkers()
	}
	for i, ks := range p.distinct {
		if ks == nil {
			continue
		}
		grains := slices.Collect(maps.Keys(ks.byGrain))
		ranks := make([][]uint32, len(grains))
		at := make(map[int64]int, len(grains))
		for j, g := range grains {
			at[g] = j
		}
		parallel(n, len(grains), func(j int) { ranks[j] = ks.byGrain[grains[j]].rank() })
		parallel(n, len(p.base), func(gi int) {
			a := &p.base[gi].accs[i]
			rank := ranks[at[p.base[gi].grain]]
			for j, id := range a.ids {
				a.ids[j] = rank[id]
			}
			slices.Sort(a.ids)
			a.ids = slices.Compact(a.ids)
			a.distinct = int64(len(a.ids))
		})
	}
}

// parallel calls f(0) .. f(n-1) on up to workers goroutines at a time.
func parallel(workers, n int, f func(int)) {
	var g errgroup.Group
	g.SetLimit(max(workers, 1))
	for i := range n {
		g.Go(func() error { f(i); return nil })
	}
	_ = g.Wait() // f returns nothing
}

// rows returns the groups of every grouping set, merged from the base groups, sorted by
// grain, level and dimensions (deterministic output).
func (p *partial) rows() []*group {
	p.finish()
	var out []*group
	stamps := make([][]uint32, len(p.distinct))
	for i, ks := range p.distinct {
		if ks == nil {
			continue
		}
		n := 0
		for _, in := range ks.byGrain {
			n = max(n, len(in.sorted))
		}
		stamps[i] = make([]uint32, n)
	}
	var gen uint32
	for si, lv := range p.levels {
		set := lv.Keep
		var groups []*group
		var children [][]int32
		if len(set) == len(p.baseDims) {
			// The base level itself: one group per base group.
			for gi := range p.base {
				groups = append(groups, p.outGroup(si, set, &p.base[gi]))
			}
		} else {
			index := map[string]int32{}
			for gi := range p.base {
				bg := &p.base[gi]
				b := binary.LittleEndian.AppendUint64(p.keyBuf[:0], uint64(bg.grain))
				for _, d := range set {
					b = binary.LittleEndian.AppendUint32(b, uint32(bg.codes[d]))
				}
				p.keyBuf = b
				oi, ok := index[string(b)]
				if !ok {
					oi = int32(len(groups))
					index[string(b)] = oi
					groups = append(groups, p.outGroup(si, set, bg))
					children = append(children, nil)
					for i := range groups[oi].accs {
						groups[oi].accs[i] = acc{}
					}
				}
				children[oi] = append(children[oi], int32(gi))
			}
			for oi, g := range groups {
				for i, ms := range p.m.Measures {
					a := &g.accs[i]
					if ms.Agg.Served() == mart.CountDistinct {
						gen++
						if gen == 0 { // wrapped: start the stamps over
							clear(stamps[i])
							gen = 1
						}
						st := stamps[i]
						carries := lv.Carries(si) // its rows list the keys: keep the union
						for _, c := range children[oi] {
							for _, id := range p.base[c].accs[i].ids {
								if st[id] != gen {
									st[id] = gen
									a.distinct++
									if carries {
										a.ids = append(a.ids, id)
									}
								}
							}
						}
						slices.Sort(a.ids)
					}
					for _, c := range children[oi] {
						a.merge(&p.base[c].accs[i], ms)
					}
				}
			}
		}
		out = append(out, groups...)
	}
	p.sortGroups(out)
	return out
}

// sortGroups sorts groups by grain, level and dimensions (deterministic output).
func (p *partial) sortGroups(groups []*group) {
	slices.SortFunc(groups, func(a, b *group) int {
		if a.grain != b.grain {
			return cmpInt(a.grain, b.grain)
		}
		if a.set != b.set {
			return a.set - b.set
		}
		for i, d := range a.dims {
			if c := silver.CompareValues(d, b.dims[i], p.m.Dims[i].Type.Kind); c != 0 {
				return c
			}
		}
		return 0
	})
}

// outGroup is the output group of set si that base group bg belongs to, with bg's
// measures (the caller resets them when it merges several base groups).
func (p *partial) outGroup(si int, set []int, bg *baseGroup) *group {
	g := &group{grain: bg.grain, set: si, dims: make([]silver.Value, len(p.m.Dims)), accs: slices.Clone(bg.accs)}
	for i := range g.dims {
		g.dims[i] = silver.Value{Null: true}
	}
	for _, d := range set {
		g.dims[d] = p.dims[d].value(bg.codes[d])
	}
	return g
}

// merge folds another group's measure (of the same spec) into a. Distinct counts are
// not merged here (rows counts them over the union of the ids).
func (a *acc) merge(b *acc, ms MeasureSpec) {
	a.n += b.n
	if m := shapeOf(ms).merge; m != nil {
		m(a, b, ms)
	}
}

// distinctTexts are the texts of a finished group's distinct ids, in order.
func (p *partial) distinctTexts(measure int, grain int64, ids []uint32) []string {
	sorted := p.distinct[measure].byGrain[grain].sorted
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = sorted[id]
	}
	return out
}

// keySets are the distinct values of one count_distinct measure, one keySet per grain
// value: ids are local to a grain (every group of every level lies within one grain),
// and a grain's values are few enough to stay in cache while its rows are folded in.
type keySets struct {
	typ       silver.Type
	byGrain   map[int64]*keySet
	lastGrain int64
	last      *keySet
}

// of returns the keySet of a grain value.
func (k *keySets) of(grain int64) *keySet {
	if k.last != nil && k.lastGrain == grain {
		return k.last
	}
	in := k.byGrain[grain]
	if in == nil {
		in = &keySet{typ: k.typ, offs: []uint32{0}}
		k.byGrain[grain] = in
	}
	k.last, k.lastGrain = in, grain
	return in
}

var keySeed = maphash.MakeSeed()

// keySet numbers distinct values by their text (keyText), from 0. The texts live in one
// arena; an open-addressing table over the ids finds them (a Go map of strings costs
// a header per value and a rehash of every key at each growth).
type keySet struct {
	typ    silver.Type
	arena  []byte   // the texts, back to back
	offs   []uint32 // text of id i: arena[offs[i]:offs[i+1]]
	hashes []uint32 // by id
	slots  []uint32 // 0: empty, else id+1
	num    map[int64]uint32

	sorted []string // after rank: the texts in order
}

func (k *keySet) text(id uint32) []byte { return k.arena[k.offs[id]:k.offs[id+1]] }

func (k *keySet) len() int { return len(k.offs) - 1 }

// id returns the id of a non-NULL value, numbering it if it is new.
func (k *keySet) id(v silver.Value) uint32 {
	switch k.typ.Kind {
	case silver.String:
		return k.textID(v.S)
	case silver.Int32, silver.Int64, silver.Date, silver.Timestamp:
		if k.num == nil {
			k.num = map[int64]uint32{}
		}
		id, ok := k.num[v.I]
		if !ok {
			id = k.textID(keyText(v, k.typ))
			k.num[v.I] = id
		}
		return id
	}
	return k.textID(keyText(v, k.typ))
}

func (k *keySet) textID(s string) uint32 {
	if 2*(k.len()+1) > len(k.slots) {
		k.grow()
	}
	h := maphash.String(keySeed, s)
	mask := uint64(len(k.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := k.slots[i]
		if e == 0 {
			id := uint32(k.len())
			k.arena = append(k.arena, s...)
			k.offs = append(k.offs, uint32(len(k.arena)))
			k.hashes = append(k.hashes, uint32(h))
			k.slots[i] = id + 1
			return id
		}
		if id := e - 1; k.hashes[id] == uint32(h) && string(k.text(id)) == s {
			return id
		}
	}
}

// grow doubles the table and places every id again by its stored hash bits. The low
// 32 bits of the hash pick the slot, so a table stays below 2^32 slots.
func (k *keySet) grow() {
	n := max(64, 2*len(k.slots))
	k.slots = make([]uint32, n)
	mask := uint32(n - 1)
	for id, h := range k.hashes {
		i := h & mask
		for k.slots[i] != 0 {
			i = (i + 1) & mask
		}
		k.slots[i] = uint32(id) + 1
	}
}

// rank returns, by id, the position of the value's text in sorted order, keeps the
// sorted texts (distinctTexts) and drops the table.
func (k *keySet) rank() []uint32 {
	n := k.len()
	order := make([]uint32, n)
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return bytes.Compare(k.text(a), k.text(b)) })
	rank := make([]uint32, n)
	k.sorted = make([]string, n)
	for r, id := range order {
		rank[id] = uint32(r)
		k.sorted[r] = string(k.text(id))
	}
	k.arena, k.offs, k.hashes, k.slots, k.num = nil, nil, nil, nil, nil
	return rank
}

// interner numbers the values of one dimension by their text (keyText): values with
// the same text are the same value, as in the grouping key. Code 0 stands for NULL;
// values get codes from 1.
type interner struct {
	typ  silver.Type
	text map[string]int32 // strings, decimals, floats
	num  map[int64]int32  // integers, dates, timestamps, bools
	vals []silver.Value   // by code; vals[0] is NULL
}

func (in *interner) init(t silver.Type) {
	in.typ = t
	in.vals = []silver.Value{{Null: true}}
	switch t.Kind {
	case silver.Int32, silver.Int64, silver.Date, silver.Timestamp, silver.Bool:
		in.num = map[int64]int32{}
	default:
		in.text = map[string]int32{}
	}
}

// code returns v's code, numbering it if it is new.
func (in *interner) code(v silver.Value) int32 {
	if v.Null {
		return 0
	}
	if in.num != nil {
		k := v.I
		if in.typ.Kind == silver.Bool {
			k = 0
			if v.B {
				k = 1
			}
		}
		c, ok := in.num[k]
		if !ok {
			c = int32(len(in.vals))
			in.num[k] = c
			in.vals = append(in.vals, v)
		}
		return c
	}
	var k string
	if in.typ.Kind == silver.String {
		k = v.S
	} else {
		k = keyText(v, in.typ)
	}
	c, ok := in.text[k]
	if !ok {
		c = int32(len(in.vals))
		if in.typ.Kind == silver.String {
			k = strings.Clone(k)
			v.S = k
		}
		in.text[k] = c
		in.vals = append(in.vals, v)
	}
	return c
}

func (in *interner) value(c int32) silver.Value { return in.vals[c] }
