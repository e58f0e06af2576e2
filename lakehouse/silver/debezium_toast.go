package silver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
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

// carryCol is a column the winning version of a key (or a stored row: _cdc_carried)
// lacks, and the position of the version whose value the row holds, or none yet (from
// false).
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
		e := carryCol{col: c, from: true, ver: posOf(held)}
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
		if slices.Contains(ts.pending, e.col) || e.from && posOf(v).cmp(e.ver) <= 0 {
			continue
		}
		w.put(r, e.col, row[e.col], true)
		e.from, e.ver = true, posOf(v)
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

// cloneValue copies a stored value's string out of the Arrow buffer it points into.
func cloneValue(v Value) Value {
	v.S = strings.Clone(v.S)
	return v
}

// encodeCarried renders the carried columns of a winner for _cdc_carried.
func (e *engine) encodeCarried(cc []carryCol) string {
	var b strings.Builder
	for i, c := range cc {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.cols[c.col].Name)
		b.WriteByte('@')
		if c.from {
			fmt.Fprintf(&b, "%d:%d", c.ver.ua, c.ver.seq)
		}
	}
	return b.String()
}

// decodeCarried reads _cdc_carried; columns no longer declared are left out.
func (e *engine) decodeCarried(s string) []carryCol {
	var out []carryCol
	for part := range strings.SplitSeq(s, ",") {
		name, pos, ok := strings.Cut(part, "@")
		i := slices.IndexFunc(e.cols, func(c ColumnSpec) bool { return c.Name == name })
		if !ok || i < 0 {
			continue
		}
		c := carryCol{col: i}
		if hi, lo, ok := strings.Cut(pos, ":"); ok {
			ua, err1 := strconv.ParseInt(hi, 10, 64)
			seq, err2 := strconv.ParseUint(lo, 10, 64)
			c.from, c.ver = err1 == nil && err2 == nil, version{ua: ua, seq: seq}
		}
		out = append(out, c)
	}
	return out
}

// provenance is the version the value of col held for slot comes from (false: none).
func (w *winners) provenance(slot, col int) (version, bool) {
	for _, c := range w.toast.fill[slot] {
		if c.col == col {
			return c.ver, c.from
		}
	}
	return posOf(w.version(slot)), true
}

// posOf is a version's position alone: the origins of carried values are compared by
// it (the same position is the same event).
func posOf(v version) version { return version{ua: v.ua, seq: v.seq} }

// fillFromStored gives the columns the winner of slot lacks the stored version's values
// (st, of version sv, whose own carried columns are carried), where no newer version of
// the run gave one. The winner replaces the stored version (it is newer).
func (e *engine) fillFromStored(w *winners, slot int, sv version, st storedFill, carried string) {
	if w.toast == nil || len(w.toast.fill[slot]) == 0 {
		return
	}
	var stc []carryCol
	if carried != "" {
		stc = e.decodeCarried(carried)
	}
	r := w.record(slot)
	cc := w.toast.fill[slot]
	for k := range cc {
		c := &cc[k]
		from, ver := true, posOf(sv) // the stored value's origin
		if i := slices.IndexFunc(stc, func(s carryCol) bool { return s.col == c.col }); i >= 0 {
			from, ver = stc[i].from, stc[i].ver
		}
		if !from || c.from && c.ver.cmp(ver) > 0 {
			continue
		}
		if i := slices.Index(st.cols, c.col); i >= 0 {
			w.put(r, c.col, st.vals[i], true)
			c.from, c.ver = true, ver
		}
	}
}

// refill is a stored row a late version gives values of columns it lacks.
type refill struct {
	w      *winners
	slot   int
	stored version    // the stored row's version
	cols   []carryCol // the stored row's carried columns, with the origins after the fill
	filled []int      // the columns given a value
	vals   []Value    // their values
}

// lateFill looks at a winner older than the stored version of its key whose stored row
// lacks columns (carried): the columns the winner has a value for from a newer version
// than the stored row's are to be written into it (rewriteStored).
func (e *engine) lateFill(w *winners, slot int, sv version, carried string) {
	rf := refill{w: w, slot: slot, stored: sv, cols: e.decodeCarried(carried)}
	for i := range rf.cols {
		c := &rf.cols[i]
		ver, ok := w.provenance(slot, c.col)
		if !ok || c.from && ver.cmp(c.ver) <= 0 {
			continue
		}
		c.from, c.ver = true, ver
		rf.filled = append(rf.filled, c.col)
		rf.vals = append(rf.vals, cloneValue(w.get(c.col, slot)))
	}
	if len(rf.filled) > 0 {
		e.refill = append(e.refill, rf)
	}
}

// rewriteStored reads the stored rows of the keys in e.refill whole (their version is
// the one resolved), makes each the key's winner again with the late values, and marks
// it an update: its old copy is deleted and it is written again.
func (e *engine) rewriteStored(ctx context.Context, tbl *table.Table, p *keyPruner) error {
	type at struct {
		w    *winners
		slot int
	}
	todo := map[at]*refill{}
	for i := range e.refill {
		todo[at{e.refill[i].w, e.refill[i].slot}] = &e.refill[i]
	}
	fields := make([]string, 0, len(e.tcols))
	for _, c := range e.tcols {
		if hasColumn(tbl, c.Name) {
			fields = append(fields, c.Name)
		}
	}
	streams, err := e.storedRows(ctx, tbl, p, fields)
	if err != nil {
		return err
	}
	row := make([]Value, len(e.cols))
	var keyBuf []byte
	for _, recs := range streams {
		for rec, err := range recs {
			if err != nil {
				return fmt.Errorf("read stored rows to fill: %w", err)
			}
			col := func(name string) arrow.Array {
				if idx := rec.Schema().FieldIndices(name); len(idx) > 0 {
					return rec.Column(idx[0])
				}
				return nil
			}
			ops, hashes, ids := col(ColCDCOp).(*array.String), col(ColVersion).(*array.Int64), col(ColEventID).(*array.String)
			for r := range int(rec.NumRows()) {
				for i, c := range e.cols {
					if a := col(c.Name); a != nil {
						row[i] = ValueAt(a, r, c.Type)
					} else {
						row[i] = Value{Null: true}
					}
				}
				keyBuf = e.appendKey(keyBuf[:0], row)
				w, slot, ok := e.lookupKey(unsafeString(keyBuf))
				rf := todo[at{w, slot}]
				if !ok || rf == nil {
					continue
				}
				v := version{ua: row[e.uaIdx].I, seq: uint64(row[e.seqIdx].I), rank: opRank(ops.Value(r)[0]), hash: uint64(hashes.Value(r))}
				if v.cmp(rf.stored) != 0 {
					continue // an older copy the equality deletes remove
				}
				for i, c := range rf.filled {
					if vals := e.replaced[c]; vals != nil { // a sort_by column: Gold recomputes the old value's grain
						if k, ok := replacedKey(row[c], e.cols[c].Type.Kind); ok && !row[c].Null {
							vals[k] = true
						}
					}
					row[c] = rf.vals[i]
				}
				w.toast.pending = nil
				w.hold(w.record(slot), row, v, ops.Value(r)[0], ids.Value(r), 0, true)
				w.toast.fill[slot] = rf.cols
				w.fate[slot] = fateUpdate
				delete(todo, at{w, slot})
			}
			rec.Release()
		}
	}
	if len(todo) > 0 {
		return fmt.Errorf("fill stored rows: %d of %d stored versions not found again", len(todo), len(e.refill))
	}
	return nil
}

// markCarried writes _cdc_carried of the rows this pass writes.
func (e *engine) markCarried() {
	if e.carriedIdx < 0 {
		return
	}
	for _, w := range e.ws {
		for slot, f := range w.fate {
			if f != fateInsert && f != fateUpdate {
				continue
			}
			v := Value{Null: true}
			if cc := w.toast.fill[slot]; len(cc) > 0 {
				v = Value{S: e.encodeCarried(cc)}
			}
			w.put(w.record(slot), e.carriedIdx, v, true)
		}
	}
}

// hasColumn tells whether a table's schema has a column.
func hasColumn(tbl *table.Table, name string) bool {
	_, ok := tbl.Schema().FindFieldByName(name)
	return ok
}
