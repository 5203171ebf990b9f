package kafkadecode

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The recycler parks at most maxBytes of freed buffers, however many and
// however large the buffers freed; what does not fit goes back to the
// allocator, and close returns the rest.
func TestRecyclerParkedBytesBounded(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const bound = 1 << 20
	r := newRecycler(mem, bound)
	var out [][]byte
	for round := range 20 {
		for i := range 8 {
			out = append(out, r.Allocate((round+1)*(i+1)*4096)) // up to 640 KiB, growing like arenas
		}
		for _, b := range out {
			r.Free(b)
		}
		out = out[:0]
		if got := mem.CurrentAlloc(); got > bound {
			t.Fatalf("round %d: %d bytes held with nothing outstanding, bound %d", round, got, bound)
		}
		if r.bytes > bound || len(r.parked) > maxParked {
			t.Fatalf("round %d: %d bytes in %d parked buffers", round, r.bytes, len(r.parked))
		}
	}
	// A parked buffer is reused: no new allocation for a size that fits.
	before := mem.CurrentAlloc()
	b := r.Allocate(len(r.parked[len(r.parked)-1]) - 100)
	if mem.CurrentAlloc() != before {
		t.Fatalf("allocation of a parked size reached the allocator")
	}
	r.Free(b)
	none := newRecycler(mem, 0)
	none.Free(none.Allocate(100))
	r.close()
}

// One buffer larger than the parked bound (a decompression arena) is kept
// as the spare, reused by the next request of about its size and not by a
// small one; a newer one replaces it, and close frees it.
func TestRecyclerSpareArena(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const bound = 64 << 10
	r := newRecycler(mem, bound)
	r.Free(r.Allocate(1 << 20))
	if got := mem.CurrentAlloc(); got != 1<<20 {
		t.Fatalf("%d bytes held after freeing a 1 MiB arena, want it kept", got)
	}
	small := r.Allocate(1000)
	if len(r.spares) != 1 || len(r.spares[0]) != 1<<20 {
		t.Fatalf("a 1000-byte request took the spare")
	}
	r.Free(small)
	before := mem.CurrentAlloc()
	a := r.Allocate(900 << 10)
	if mem.CurrentAlloc() != before || len(r.spares) != 0 {
		t.Fatalf("a request of about the spare's size reached the allocator")
	}
	r.Free(a)
	r.Free(r.Allocate(2 << 20)) // a newer, larger arena replaces the spare
	if len(r.spares) != 1 || len(r.spares[0]) != 2<<20 || mem.CurrentAlloc() > 2<<20+bound {
		t.Fatalf("%d spares, %d bytes held", len(r.spares), mem.CurrentAlloc())
	}
	none := newRecycler(mem, 0)
	none.Free(none.Allocate(1 << 20))
	if len(none.spares) != 0 {
		t.Fatalf("a recycler bounded to 0 bytes kept a spare")
	}
	r.close()
}
