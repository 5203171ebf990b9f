// Package arrowmem counts the bytes outstanding in the process's Arrow
// allocator, for the metrics endpoint (flightline_arrow_allocated_bytes).
//
// The CLI calls Install first thing: it replaces memory.DefaultAllocator
// with a Counting allocator wrapping it, so every source, sink, Flight
// reader and writer that takes the default allocator (all of them, unless
// given another) is counted. Outstanding bytes are those allocated and not
// yet freed: an Arrow buffer frees its bytes when its last reference is
// released, so a value that keeps rising means batches that are never
// released (left to the garbage collector), or buffers kept on purpose
// (the Kafka decoder's parked buffers, bounded by MaxParkedBytes).
package arrowmem

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Counting is a memory.Allocator that counts the bytes outstanding in the
// allocator it wraps: allocated (len of each slice, as
// memory.CheckedAllocator counts) and neither freed nor collected.
//
// Collected, because not every user frees what it allocates: arrow-go's
// Parquet encoder keeps scratch buffers of memory.DefaultAllocator in a
// sync.Pool, which the garbage collector empties without freeing them, and
// the Go allocator's Free is a no-op, so dropping a buffer is not a leak.
// Counting only frees would make such a process's gauge rise for ever with
// a flat heap. Each allocation carries a runtime cleanup that uncounts it
// when it is collected unfreed. The cost is about half a microsecond per
// allocation and free (BenchmarkAllocateFree; a 10k-row batch takes some
// tens of allocations). Safe for concurrent use.
type Counting struct {
	mem  memory.Allocator
	n    atomic.Int64
	live sync.Map // address of a slice's first byte → *alloc
}

// alloc is one counted allocation; done is set once it is uncounted (freed,
// reallocated elsewhere or collected), whichever comes first.
type alloc struct {
	c    *Counting
	key  uintptr
	n    atomic.Int64
	done atomic.Bool
}

func (a *alloc) uncount() {
	if a.done.CompareAndSwap(false, true) {
		a.c.n.Add(-a.n.Load())
		a.c.live.CompareAndDelete(a.key, a)
	}
}

// NewCounting returns a Counting allocator over mem.
func NewCounting(mem memory.Allocator) *Counting { return &Counting{mem: mem} }

func (c *Counting) track(b []byte) {
	if len(b) == 0 {
		return
	}
	a := &alloc{c: c, key: uintptr(unsafe.Pointer(&b[0]))}
	a.n.Store(int64(len(b)))
	c.n.Add(int64(len(b)))
	// A collected slice's address may be reused before its cleanup runs:
	// the newer entry replaces the older, whose cleanup still uncounts
	// its own bytes (and leaves the newer entry alone).
	c.live.Store(a.key, a)
	runtime.AddCleanup(&b[0], (*alloc).uncount, a)
}

func (c *Counting) lookup(b []byte) *alloc {
	if len(b) == 0 {
		return nil
	}
	v, ok := c.live.Load(uintptr(unsafe.Pointer(&b[0])))
	if !ok {
		return nil
	}
	return v.(*alloc)
}

// Allocate implements memory.Allocator.
func (c *Counting) Allocate(size int) []byte {
	b := c.mem.Allocate(size)
	c.track(b)
	return b
}

// Reallocate implements memory.Allocator.
func (c *Counting) Reallocate(size int, b []byte) []byte {
	old := c.lookup(b)
	nb := c.mem.Reallocate(size, b)
	if old != nil && len(nb) > 0 && unsafe.Pointer(&nb[0]) == unsafe.Pointer(&b[0]) {
		c.n.Add(int64(len(nb)) - old.n.Swap(int64(len(nb)))) // grown or shrunk in place
		return nb
	}
	if old != nil {
		old.uncount()
	}
	c.track(nb)
	return nb
}

// Free implements memory.Allocator.
func (c *Counting) Free(b []byte) {
	if a := c.lookup(b); a != nil {
		a.uncount()
	}
	c.mem.Free(b)
}

// Outstanding is the number of bytes allocated and neither freed nor
// collected (cleanups run some time after a collection, so a dropped
// buffer stays counted until then).
func (c *Counting) Outstanding() int64 { return c.n.Load() }

var (
	once      sync.Once
	installed atomic.Pointer[Counting]
)

// Install wraps memory.DefaultAllocator in a Counting allocator (once per
// process; later calls return the same one). Call it before anything
// takes the default allocator: components that took it earlier keep the
// uncounted one.
func Install() *Counting {
	once.Do(func() {
		c := NewCounting(memory.DefaultAllocator)
		memory.DefaultAllocator = c
		installed.Store(c)
	})
	return installed.Load()
}

// Installed is the allocator Install made, or nil if it was not called.
func Installed() *Counting { return installed.Load() }
