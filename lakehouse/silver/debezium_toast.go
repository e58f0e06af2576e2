package silver

import (
	"slices"
	"strings"
)

// Columns a Debezium event does not carry.
//
// A PostgreSQL update that leaves a TOASTed column unchanged carries
// __debezium_unavailable_value for it, and a delete under REPLICA IDENTITY DEFAULT
// carries only the key. Such a column is not a NULL: the row keeps the value it had. So
// the value Silver writes for a column is the one of the newest version, up to the
// winning one, that carries it: a version of the same run (whatever order they arrive
// in) or the version stored in Silver. The winners keep, per key whose winning version
// lacks columns, which version each of those columns' values came from; the lookup of
// stored versions fills what the run could not.

// toastState is the carried columns of one winners shard (used by its goroutine only).
type toastState struct {
	pending []int              // the columns the row being offered lacks (set before each offer)
	fill    map[int][]carryCol // slot -> the columns its winning version lacks
}

// carryCol is a column the winning version of a key lacks: the version whose value the
// record holds, or none yet (from false).
type carryCol struct {
	col  int
	from bool
	ver  version
}

func newToastState() *toastState { return &toastState{fill: map[int][]carryCol{}} }

// first records a key's first version.
func (ts *toastState) first(slot int) {
	if len(ts.pending) == 0 {
		return
	}
	cc := make([]carryCol, len(ts.pending))
	for i, c := range ts.pending {
		cc[i] = carryCol{col: c}
	}
	ts.fill[slot] = cc
}

// newer is called before a newer version (or the same one, arrived earlier) replaces
// the held version of slot: the columns the new one lacks keep the value held, and
// remember where it came from. It returns the row to hold.
func (ts *toastState) newer(w *winners, slot int, row []Value, held version) []Value {
	old := ts.fill[slot]
	if len(ts.pending) == 0 {
		delete(ts.fill, slot)
		return row
	}
	row = slices.Clone(row)
	cc := make([]carryCol, 0, len(ts.pending))
	for _, c := range ts.pending {
		e := carryCol{col: c, from: true, ver: held}
		if i := slices.IndexFunc(old, func(o carryCol) bool { return o.col == c }); i >= 0 {
			e = old[i] // the held version lacked it too: it keeps its origin
		}
		row[c] = w.get(c, slot) // kept (put keeps an equal string's copy)
		cc = append(cc, e)
	}
	ts.fill[slot] = cc
	return row
}

// older is called when an older version than the held one of slot arrives: it gives a
// column the held version lacks its value, if it carries the column and is newer than
// the version that gave the value held.
func (ts *toastState) older(w *winners, slot int, r []uint64, row []Value, v version) {
	cc := ts.fill[slot]
	for i := range cc {
		e := &cc[i]
		if slices.Contains(ts.pending, e.col) || e.from && v.cmp(e.ver) <= 0 {
			continue
		}
		w.put(r, e.col, row[e.col], true)
		e.from, e.ver = true, v
	}
}

// storedFill is what the stored version of a key gives the columns its winner lacks.
type storedFill struct {
	cols []int
	vals []Value
}

// toastColumns are the columns some winner lacks a value for that the stored version
// may give (a run with none reads no more columns than before).
func (e *engine) toastColumns() []int {
	var cols []int
	for _, w := range e.ws {
		if w.toast == nil {
			continue
		}
		for _, cc := range w.toast.fill {
			for _, c := range cc {
				if !slices.Contains(cols, c.col) {
					cols = append(cols, c.col)
				}
			}
		}
	}
	slices.Sort(cols)
	return cols
}

// fillFromStored gives the columns the winner of slot lacks the stored version's values
// (st, of version sv), where no newer version of the run gave one. The winner replaces
// the stored version (it is newer).
func (w *winners) fillFromStored(slot int, sv version, st storedFill) {
	if w.toast == nil {
		return
	}
	cc := w.toast.fill[slot]
	if len(cc) == 0 {
		return
	}
	r := w.record(slot)
	for _, e := range cc {
		if e.from && e.ver.cmp(sv) > 0 {
			continue
		}
		if i := slices.Index(st.cols, e.col); i >= 0 {
			w.put(r, e.col, st.vals[i], true)
		}
	}
}

// cloneValue copies a stored value's string out of the Arrow buffer it points into.
func cloneValue(v Value) Value {
	v.S = strings.Clone(v.S)
	return v
}
