package silver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/zeebo/xxh3"
)

// stringStore is what TestStringStorageKeepsValues exercises: a column of the keys
// table, or a string column of the winners' records.
type stringStore interface {
	add(v Value)
	set(slot int, v Value)
	get(slot int) Value
	spilled() bool
}

type columnStore struct{ c column }

func (s *columnStore) add(v Value)           { s.c.append(v) }
func (s *columnStore) set(slot int, v Value) { s.c.set(slot, v) }
func (s *columnStore) get(slot int) Value    { return s.c.get(slot) }
func (s *columnStore) spilled() bool         { return s.c.strs.spilled }

// recordStore is column 1 of winners keyed by column 0.
type recordStore struct {
	w  *winners
	ua int64
}

func (s *recordStore) add(v Value) {
	k := fmt.Sprint(s.w.len())
	s.w.offer(keyHash(k), k, []Value{{S: k}, v}, version{ua: 1}, 'c', "", 0)
}

func (s *recordStore) set(slot int, v Value) {
	s.ua++
	k := s.w.key(slot)
	s.w.offer(keyHash(k), k, []Value{{S: k}, v}, version{ua: 1 + s.ua}, 'u', "", 0)
}
func (s *recordStore) get(slot int) Value { return s.w.get(1, slot) }
func (s *recordStore) spilled() bool      { return s.w.strs[1].spilled }

// String storage keeps every value exactly through the switch from dictionary codes to
// the arena (internMax distinct values), updates, nulls, empty and very long values.
func TestStringStorageKeepsValues(t *testing.T) {
	stores := map[string]func() stringStore{
		"column": func() stringStore { return &columnStore{c: column{kind: String}} },
		"record": func() stringStore {
			w := newWinners([]ColumnSpec{{Name: "k", Type: Type{Kind: String}}, {Name: "v", Type: Type{Kind: String}}})
			w.keyCol = 0
			return &recordStore{w: w}
		},
	}
	for name, newStore := range stores {
		for _, n := range []int{10, internMax, 3 * internMax} {
			t.Run(fmt.Sprint(name, n), func(t *testing.T) {
				c := newStore()
				want := make([]Value, 0, n+3)
				add := func(v Value) {
					c.add(v)
					want = append(want, v)
				}
				add(Value{Null: true})
				add(Value{S: ""})
				add(Value{S: strings.Repeat("x", arenaLong+10)}) // a long value
				for i := range n {
					add(Value{S: fmt.Sprintf("value-%d", i%(n/2+1))})
				}
				// Updates: to another value, to null, from null, to a long value.
				set := func(slot int, v Value) {
					c.set(slot, v)
					want[slot] = v
				}
				set(3, Value{S: "changed"})
				set(4, Value{Null: true})
				set(0, Value{S: "was null"})
				set(5, Value{S: strings.Repeat("y", arenaLong)})
				set(1, Value{S: ""})
				for slot, w := range want {
					got := c.get(slot)
					if got.Null != w.Null || got.S != w.S {
						t.Fatalf("slot %d: got %v %.20q, want %v %.20q", slot, got.Null, got.S, w.Null, w.S)
					}
				}
				if spilled := n/2+1 > internMax; c.spilled() != spilled { // distinct values
					t.Errorf("spilled = %v, want %v", c.spilled(), spilled)
				}
			})
		}
	}
}

// Keys whose hashes share the low 64 bits (the index's) are still told apart.
func TestWinnersHashCollision(t *testing.T) {
	w := newWinners([]ColumnSpec{{Name: "k", Type: Type{Kind: String}}})
	row := func(s string) []Value { return []Value{{S: s}} }
	ha, hb, hc := xxh3.Uint128{Hi: 1, Lo: 7}, xxh3.Uint128{Hi: 2, Lo: 7}, xxh3.Uint128{Hi: 3, Lo: 7}
	w.offer(ha, "a", row("a"), version{ua: 1}, 'c', "e1", 1)
	w.offer(hb, "b", row("b"), version{ua: 1}, 'c', "e2", 1) // same low half, another key
	w.offer(ha, "a", row("a"), version{ua: 2}, 'u', "e3", 1) // newer version of a
	if w.len() != 2 {
		t.Fatalf("%d keys, want 2", w.len())
	}
	for k, h := range map[string]xxh3.Uint128{"a": ha, "b": hb} {
		slot, ok := w.lookup(h)
		if !ok || w.key(slot) != k || w.get(0, slot).S != k {
			t.Fatalf("key %s: slot %d ok %v", k, slot, ok)
		}
	}
	if slot, _ := w.lookup(ha); w.version(slot).ua != 2 {
		t.Errorf("key a kept version %d, want 2", w.version(slot).ua)
	}
	if _, ok := w.lookup(hc); ok {
		t.Error("absent key found")
	}
}

// icebergBucket computes Iceberg's bucket transform, so that each Silver data file is
// written from one winners shard.
func TestIcebergBucketMatchesTransform(t *testing.T) {
	for _, buckets := range []int{4, 16, 1000} {
		tr := iceberg.BucketTransform{NumBuckets: buckets}
		for i := range 500 {
			s := fmt.Sprintf("order-%d-%x", i, i*7919)
			want := tr.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.NewLiteral(s)})
			if got, ok := icebergBucket(s, String, buckets); !ok || int32(got) != want.Val.(iceberg.Int32Literal).Value() {
				t.Fatalf("string %q, %d buckets: got %d, want %v", s, buckets, got, want.Val)
			}
			n := int64(i*i*104729 - 250000)
			want = tr.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.NewLiteral(n)})
			if got, ok := icebergBucket(fmt.Sprint(n), Int64, buckets); !ok || int32(got) != want.Val.(iceberg.Int32Literal).Value() {
				t.Fatalf("int %d, %d buckets: got %d, want %v", n, buckets, got, want.Val)
			}
		}
	}
}

// The replaced-values property lists exactly the values recorded, as ranges.
func TestReplacedRoundTrip(t *testing.T) {
	for _, vals := range [][]int64{nil, {5}, {1, 2, 3, 7, 9, 10}, {-5, -4, -1, 0, 1}, {-3}} {
		set := map[int64]bool{}
		for _, v := range vals {
			set[v] = true
		}
		enc := encodeReplaced(set)
		got := map[int64]bool{}
		ok, err := DecodeReplaced(enc, func(lo, hi int64) {
			for v := lo; v <= hi; v++ {
				got[v] = true
			}
		})
		if err != nil || !ok || len(got) != len(set) {
			t.Fatalf("%v -> %q -> %v (ok %v, err %v)", vals, enc, got, ok, err)
		}
		for v := range set {
			if !got[v] {
				t.Fatalf("%v -> %q: %d missing", vals, enc, v)
			}
		}
	}
	many := map[int64]bool{}
	for i := range int64(2 * maxReplacedRanges) {
		many[2*i] = true
	}
	if enc := encodeReplaced(many); enc != "*" {
		t.Fatalf("too many ranges encoded as %.40q, want *", enc)
	}
	if ok, _ := DecodeReplaced("*", func(int64, int64) {}); ok {
		t.Fatal(`"*" decoded as listed`)
	}
	if k, _ := replacedKey(Value{I: -1}, Timestamp); k != -1 {
		t.Fatalf("timestamp -1µs in hour %d, want -1", k)
	}
}

// TestKeySetByHash: keys are told apart by the whole 128-bit hash, those sharing the low
// half included (they go to the index's coll), across the table's growth; adding a key
// again adds nothing; the key columns keep slot order.
func TestKeySetByHash(t *testing.T) {
	k := newKeySet([]ColumnSpec{{Name: "id", Type: Type{Kind: Int64}}})
	const n = 5000
	hashOf := func(i int) xxh3.Uint128 { return xxh3.Uint128{Hi: uint64(i), Lo: uint64(i / 3)} } // three keys a low half
	for round := range 2 {
		for i := range n {
			k.add(hashOf(i), []Value{{I: int64(i)}}, []int{0}, round == 1)
		}
	}
	if len(k.fresh) != n || len(k.index.coll) != n-n/3-1 {
		t.Fatalf("%d keys, %d in coll; want %d, %d", len(k.fresh), len(k.index.coll), n, n-n/3-1)
	}
	for i := range n {
		s, ok := k.slot(hashOf(i))
		if !ok || s != i || k.cols[0].get(s).I != int64(i) || k.pre[s] {
			t.Fatalf("key %d: slot %d %v, column %v, pre %v", i, s, ok, k.cols[0].get(s), k.pre[s])
		}
	}
	for _, h := range []xxh3.Uint128{{Hi: 1, Lo: 1}, {Hi: n, Lo: 0}, {Hi: 0, Lo: n}} {
		if s, ok := k.slot(h); ok {
			t.Fatalf("%v found at slot %d", h, s)
		}
	}
}
