package silver

import (
	"fmt"
	"strings"
	"testing"
)

// A string column keeps every value exactly through the switch from dictionary codes
// to the arena (internMax distinct values), updates, nulls, empty and very long values.
func TestStringColumnKeepsValues(t *testing.T) {
	for _, n := range []int{10, internMax, 3 * internMax} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := column{kind: String}
			want := make([]Value, 0, n+3)
			add := func(v Value) {
				c.append(v)
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
			if spilled := n/2+1 > internMax; c.spilled != spilled { // distinct values
				t.Errorf("spilled = %v, want %v", c.spilled, spilled)
			}
		})
	}
}

// Keys whose 64-bit hashes collide are still told apart.
func TestWinnersHashCollision(t *testing.T) {
	w := newWinners([]ColumnSpec{{Name: "k", Type: Type{Kind: String}}})
	row := func(s string) []Value { return []Value{{S: s}} }
	w.offer(7, "a", row("a"), version{ua: 1}, 'c', "e1", 1)
	w.offer(7, "b", row("b"), version{ua: 1}, 'c', "e2", 1) // same hash, another key
	w.offer(7, "a", row("a"), version{ua: 2}, 'u', "e3", 1) // newer version of a
	if w.len() != 2 {
		t.Fatalf("%d keys, want 2", w.len())
	}
	for _, k := range []string{"a", "b"} {
		slot, ok := w.lookup(7, k)
		if !ok || w.key(slot) != k || w.get(0, slot).S != k {
			t.Fatalf("key %s: slot %d ok %v", k, slot, ok)
		}
	}
	if slot, _ := w.lookup(7, "a"); w.ver.at(slot).ua != 2 {
		t.Errorf("key a kept version %d, want 2", w.ver.at(slot).ua)
	}
	if _, ok := w.lookup(7, "c"); ok {
		t.Error("absent key found")
	}
}
