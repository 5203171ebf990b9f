package kafkadecode

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is a memory.Allocator that keeps a few freed buffers for reuse.
// Decompression arenas are allocated from it: a record batch's views point
// into an arena, so the arena must live until the batch is released, and
// when the batch is released the arena returns here instead of to the
// parent allocator. Release of a record batch may happen on any goroutine,
// hence the mutex. Everything is accounted to the parent allocator; free
// returns all parked buffers to it.
type recycler struct {
	parent   memory.Allocator
	maxBytes int // bound on the bytes parked

	mu     sync.Mutex
	parked [][]byte // full-length slices as the parent returned them
	bytes  int      // total length of parked
	// spares are the last freed buffers too large for the parked bound,
	// at most maxSpares of them: decompression arenas (a whole fetch
	// decompressed, often larger than maxBytes; one per decompression
	// goroutine). Keeping the last ones lets the next Append decompress
	// into memory already faulted in instead of a fresh, zeroed
	// allocation of that size per Append. They are bounded by the arenas
	// one Append produced, which its record batch held anyway.
	spares    [][]byte
	maxSpares int
	out       map[*byte][]byte // outstanding: first byte -> parent's slice
	closed    bool
}

// maxParked bounds the number of buffers kept: about 16 column buffers and
// two data buffers per flush, with room for growth leftovers. Their bytes
// are bounded by recycler.maxBytes (WithMaxParkedBytes): without that bound
// the parked set converged on the 32 largest buffers ever freed, which with
// large compressed fetches is 32 decompression arenas per Decoder.
const maxParked = 32

func newRecycler(parent memory.Allocator, maxBytes int) *recycler {
	return &recycler{parent: parent, maxBytes: maxBytes, out: make(map[*byte][]byte)}
}

func (r *recycler) Allocate(size int) []byte {
	if size == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	best := -1
	for i, p := range r.parked {
		// Best fit, and at most twice the size asked for: a small
		// column buffer must not take the large one another column
		// (or the next arena) asks for next, which would then come
		// from the allocator every Append.
		if len(p) >= size && len(p)/2 <= size && (best < 0 || len(p) < len(r.parked[best])) {
			best = i
		}
	}
	var full []byte
	if best >= 0 {
		full = r.parked[best]
		r.unpark(best)
	} else if i := r.spareFor(size); i >= 0 {
		full = r.spares[i]
		r.spares = slices.Delete(r.spares, i, i+1)
	} else {
		full = r.parent.Allocate(size)
	}
	r.out[unsafe.SliceData(full)] = full
	return full[:size:size]
}

func (r *recycler) Reallocate(size int, b []byte) []byte {
	if len(b) == 0 {
		return r.Allocate(size)
	}
	r.mu.Lock()
	full, ok := r.out[unsafe.SliceData(b)]
	r.mu.Unlock()
	if ok && len(full) >= size {
		return full[:size:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

func (r *recycler) Free(b []byte) {
	if len(b) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := unsafe.SliceData(b)
	full, ok := r.out[key]
	if !ok {
		return
	}
	delete(r.out, key)
	if r.closed || r.maxBytes == 0 {
		r.parent.Free(full)
		return
	}
	if len(full) > r.maxBytes {
		if len(r.spares) >= max(1, r.maxSpares) {
			r.parent.Free(r.spares[0])
			r.spares = slices.Delete(r.spares, 0, 1)
		}
		r.spares = append(r.spares, full)
		return
	}
	// Make room by dropping the buffers parked longest ago: what one
	// Append+Flush cycle frees is what the next one asks for (the same
	// columns, an arena sized from the last), while older buffers are
	// growth leftovers of sizes no longer asked for.
	for len(r.parked) >= maxParked || r.bytes+len(full) > r.maxBytes {
		r.parent.Free(r.parked[0])
		r.unpark(0)
	}
	r.parked = append(r.parked, full)
	r.bytes += len(full)
}

// setSpares sets how many spares are kept: one per decompression arena.
func (r *recycler) setSpares(n int) {
	r.mu.Lock()
	r.maxSpares = max(r.maxSpares, n)
	r.mu.Unlock()
}

// spareFor returns the smallest spare for a request of size bytes, or -1.
// A spare serves only requests of about its size: a small buffer is cheap
// to allocate, and must not pin an arena. r.mu must be held.
func (r *recycler) spareFor(size int) int {
	best := -1
	for i, p := range r.spares {
		if len(p) >= size && len(p)/2 <= size && (best < 0 || len(p) < len(r.spares[best])) {
			best = i
		}
	}
	return best
}

// unpark removes parked buffer i, keeping the others in the order they
// were parked. r.mu must be held.
func (r *recycler) unpark(i int) {
	r.bytes -= len(r.parked[i])
	r.parked = slices.Delete(r.parked, i, i+1)
}

// close returns parked buffers to the parent; buffers still held by record
// batches go to the parent when those are released.
func (r *recycler) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, p := range r.parked {
		r.parent.Free(p)
	}
	r.parked, r.bytes = nil, 0
	for _, p := range r.spares {
		r.parent.Free(p)
	}
	r.spares = nil
}
