package arrowmem

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

func TestPoolRecyclesZeroed(t *testing.T) {
	p := NewPool(1 << 30)
	b := p.Allocate(100_000)
	if len(b) != 100_000 || cap(b) != 1<<17 {
		t.Fatalf("len %d cap %d", len(b), cap(b))
	}
	for i := range b {
		b[i] = 0xff
	}
	p.Free(b)
	c := p.Allocate(70_000)
	if &c[0] != &b[0] {
		t.Fatal("buffer not reused")
	}
	for i, x := range c[:cap(c)][:70_000] {
		if x != 0 {
			t.Fatalf("byte %d not zeroed", i)
		}
	}
	// Growing within the capacity zeroes the new tail too.
	c = p.Reallocate(120_000, c)
	for i, x := range c {
		if x != 0 {
			t.Fatalf("byte %d not zeroed after growth", i)
		}
	}
	if small := p.Allocate(10); len(small) != 10 {
		t.Fatal("small allocation")
	}
}

func TestPoolWithBuilders(t *testing.T) {
	p := NewPool(64 << 20)
	for round := range 3 {
		b := array.NewStringBuilder(p)
		for i := range 20_000 {
			b.Append("some payload of a few dozen bytes, row " + string(rune('a'+i%26)))
		}
		a := b.NewStringArray()
		if a.Len() != 20_000 || a.Value(19_999) != "some payload of a few dozen bytes, row "+string(rune('a'+19_999%26)) {
			t.Fatalf("round %d: wrong array", round)
		}
		a.Release()
		b.Release()
	}
}
