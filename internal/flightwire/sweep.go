package flightwire

import (
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// sweeper is the allocator a Reader gives arrow-go's IPC reader. It
// remembers the allocations made during the current Next and not freed
// since, so that those of a failed Next can be freed at Release.
//
// arrow-go's reader builds a batch's arrays as it loads them and recovers
// a panic of the array constructors (a string column whose offsets buffer
// is shorter than its length needs, a primitive column shorter than its
// values) as "unknown error while reading": the buffers it had allocated
// for that batch are then referenced by nothing, and stay counted against
// the allocator forever (a leak of a few KB per malformed message, which a
// client can repeat at will; found by FuzzDoPutDir). ipcguard refuses what
// makes the loader run out of nodes and buffers, not every buffer too
// short for its column: this catches the rest, whatever the type.
//
// After a failed Next the stream is over: the caller releases the Reader,
// which releases what the reader legitimately holds (its dictionaries, the
// last message), and what is still outstanding from the failed Next is
// garbage. Batches of earlier, successful Next calls are never swept: their
// allocations are forgotten when the call returns them.
type sweeper struct {
	memory.Allocator
	mu       sync.Mutex
	tracking bool
	live     map[*byte]int // allocations of the current or last failed Next
}

func newSweeper(mem memory.Allocator) *sweeper {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &sweeper{Allocator: mem, live: map[*byte]int{}}
}

func key(b []byte) *byte { return unsafe.SliceData(b) }

func (s *sweeper) Allocate(n int) []byte {
	b := s.Allocator.Allocate(n)
	s.mu.Lock()
	if s.tracking && cap(b) > 0 {
		s.live[key(b)] = n
	}
	s.mu.Unlock()
	return b
}

func (s *sweeper) Reallocate(n int, b []byte) []byte {
	nb := s.Allocator.Reallocate(n, b)
	s.mu.Lock()
	if _, ok := s.live[key(b)]; ok {
		delete(s.live, key(b))
		s.live[key(nb)] = n
	} else if s.tracking && cap(nb) > 0 {
		s.live[key(nb)] = n
	}
	s.mu.Unlock()
	return nb
}

func (s *sweeper) Free(b []byte) {
	s.mu.Lock()
	if len(s.live) > 0 {
		delete(s.live, key(b))
	}
	s.mu.Unlock()
	s.Allocator.Free(b)
}

// begin starts remembering allocations, for one Next.
func (s *sweeper) begin() {
	s.mu.Lock()
	s.tracking = true
	s.mu.Unlock()
}

// end stops remembering them: forgotten when the Next returned a batch
// (they are the batch's), kept for sweep when it failed. So between Next
// calls, what live holds is what a failed Next left.
func (s *sweeper) end(ok bool) {
	s.mu.Lock()
	s.tracking = false
	if ok {
		clear(s.live)
	}
	s.mu.Unlock()
}

// sweep frees what a failed Next left outstanding. Call it after the IPC
// reader and its message reader are released.
func (s *sweeper) sweep() {
	s.mu.Lock()
	var leaked [][]byte
	for p, n := range s.live {
		leaked = append(leaked, unsafe.Slice(p, n))
	}
	clear(s.live)
	s.mu.Unlock()
	for _, b := range leaked {
		s.Allocator.Free(b)
	}
}
