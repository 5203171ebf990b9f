package flightwire

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// Pool is the gRPC buffer pool of Flightline's servers and connections
// (ServerOptions, DialOptions) and of the buffer a message received in
// several pieces is assembled into. Unlike gRPC's default pool it does not
// zero a buffer it hands out again: gRPC fills every byte it reads into
// (the transport's frames, Codec's assembly), so the zeroing only cost
// time, about a tenth of a Flight hop's CPU. Buffers are kept per power of
// two in sync.Pools, which the garbage collector empties.
var Pool mem.BufferPool = &dirtyPool{}

const (
	minClass = 8  // 256 B: below mem's pooling threshold anyway
	maxClass = 30 // 1 GiB: more than a message may be
)

type dirtyPool struct {
	classes [maxClass + 1]sync.Pool
}

// Get implements mem.BufferPool: a buffer of len size, whose bytes are
// whatever they were.
func (p *dirtyPool) Get(size int) *[]byte {
	c := minClass
	if size > 1<<minClass {
		c = bits.Len(uint(size - 1))
	}
	if c > maxClass {
		b := make([]byte, size)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:size]
		return b
	}
	b := make([]byte, size, 1<<c)
	return &b
}

// Put implements mem.BufferPool; a buffer of a capacity Get does not make
// is dropped.
func (p *dirtyPool) Put(b *[]byte) {
	n := cap(*b)
	c := bits.Len(uint(n)) - 1
	if n == 0 || n != 1<<c || c < minClass || c > maxClass {
		return
	}
	p.classes[c].Put(b)
}

// DialOptions returns the options of a client connection whose Flight
// calls use Call: the buffer pool.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{experimental.WithBufferPool(Pool)}
}
