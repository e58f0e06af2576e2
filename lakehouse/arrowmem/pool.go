// Package arrowmem holds a recycling Arrow allocator for the hot batch loops.
//
// Silver's Bronze scan decodes the same few large buffers (a 16k-row payload column is
// a few MB, grown by doubling) over and over. With Go's allocator every batch gets
// fresh memory: page faults, zeroing, copying and GC work that showed as ~10% of the
// CPU profile. Pool keeps the freed buffers and hands them out again.
package arrowmem

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

const (
	minShift = 16 // buffers below 64 KiB go to Go's allocator
	maxShift = 30
)

// Pool is a memory.Allocator that recycles buffers of at least 64 KiB, in power-of-two
// size classes, up to a bound of idle bytes. Memory it returns is zeroed, like Go's.
// It is safe for concurrent use.
//
// It relies on Arrow's reference counting: a buffer is handed out again once its last
// reference is released, so a caller must not keep a slice or an unsafe string into a
// released array (copy what outlives the batch).
type Pool struct {
	mu      sync.Mutex
	free    [maxShift + 1][][]byte
	idle    int // bytes held in free
	maxIdle int
}

var _ memory.Allocator = (*Pool)(nil)

// NewPool returns a Pool that keeps at most maxIdle bytes of freed buffers.
func NewPool(maxIdle int) *Pool { return &Pool{maxIdle: maxIdle} }

func classOf(size int) int { return bits.Len(uint(size - 1)) }

// Allocate returns a zeroed buffer of len size.
func (p *Pool) Allocate(size int) []byte {
	if size < 1<<minShift || size > 1<<maxShift {
		return memory.DefaultAllocator.Allocate(size)
	}
	c := classOf(size)
	if b := p.reuse(c); b != nil {
		b = b[:size]
		clear(b)
		return b
	}
	// Large Go allocations are page-aligned, so Arrow's 64-byte alignment holds.
	return make([]byte, size, 1<<c)
}

// reuse takes a freed buffer of class c, or returns nil.
func (p *Pool) reuse(c int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free[c])
	if n == 0 {
		return nil
	}
	b := p.free[c][n-1]
	p.free[c][n-1] = nil
	p.free[c] = p.free[c][:n-1]
	p.idle -= cap(b)
	return b
}

// Scratch returns a buffer of len size whose content is undefined (not zeroed), for a
// caller that overwrites all of it and hands it to Arrow with
// memory.NewBufferWithAllocator(b, p), so that releasing the array returns it here.
func (p *Pool) Scratch(size int) []byte {
	if size < 1<<minShift || size > 1<<maxShift {
		return make([]byte, size)
	}
	c := classOf(size)
	if b := p.reuse(c); b != nil {
		return b[:size]
	}
	return make([]byte, size, 1<<c)
}

// Reallocate grows or shrinks b to size, keeping its content.
func (p *Pool) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free takes back a buffer no one uses any more.
func (p *Pool) Free(b []byte) {
	c := cap(b)
	if c < 1<<minShift || c > 1<<maxShift || c&(c-1) != 0 {
		return // not one of ours (or an odd size): left to the GC
	}
	p.mu.Lock()
	if p.idle+c <= p.maxIdle {
		p.free[classOf(c)] = append(p.free[classOf(c)], b[:0])
		p.idle += c
	}
	p.mu.Unlock()
}
