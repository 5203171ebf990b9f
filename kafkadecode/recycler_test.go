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
	b := r.Allocate(4096)
	if mem.CurrentAlloc() != before {
		t.Fatalf("allocation of a parked size reached the allocator")
	}
	r.Free(b)
	none := newRecycler(mem, 0)
	none.Free(none.Allocate(100))
	r.close()
}
