package kafkadecode

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The Decoder builds its Kafka columns in these small append-only columns
// rather than arrow builders: appends are a bounds check and a store, and a
// column can be truncated, which lets a batch that turns out to be corrupt
// half way be rolled back. Memory comes from the Decoder's allocator and is
// handed to the output arrays without a copy.

// fixedCol is a growable column of fixed-width values.
type fixedCol[T int32 | int64 | arrow.ViewHeader] struct {
	mem  memory.Allocator
	buf  *memory.Buffer
	vals []T
	n    int
	hint int
}

func (c *fixedCol[T]) grow(extra int) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if c.buf == nil {
		c.buf = memory.NewResizableBuffer(c.mem)
	}
	newCap := max(2*len(c.vals), c.n+extra, c.hint, 64)
	c.buf.Resize(newCap * size)
	c.vals = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(c.buf.Buf()))), newCap)
}

func (c *fixedCol[T]) append(v T) {
	if c.n == len(c.vals) {
		c.grow(1)
	}
	c.vals[c.n] = v
	c.n++
}

// next returns the slot for the next value and counts it as appended.
func (c *fixedCol[T]) next() *T {
	if c.n == len(c.vals) {
		c.grow(1)
	}
	c.n++
	return &c.vals[c.n-1]
}

func (c *fixedCol[T]) truncate(n int) { c.n = n }

// finish hands the column's buffer to the caller (who must Release it) and
// resets the column, remembering its size as the next capacity hint.
func (c *fixedCol[T]) finish() *memory.Buffer {
	var zero T
	if c.buf == nil {
		c.grow(0)
	}
	b := c.buf
	b.ResizeNoShrink(c.n * int(unsafe.Sizeof(zero)))
	c.hint = c.n
	c.buf, c.vals, c.n = nil, nil, 0
	return b
}

func (c *fixedCol[T]) release() {
	if c.buf != nil {
		c.buf.Release()
	}
	c.buf, c.vals, c.n = nil, nil, 0
}

// bitCol is a growable validity bitmap.
type bitCol struct {
	mem   memory.Allocator
	buf   *memory.Buffer
	bits  []byte
	n     int
	nulls int // number of zero bits among the first n
	hint  int
}

func (c *bitCol) append(v bool) {
	if c.n == len(c.bits)*8 {
		if c.buf == nil {
			c.buf = memory.NewResizableBuffer(c.mem)
		}
		c.buf.Resize(int(bitutil.BytesForBits(int64(max(2*c.n, c.hint, 512)))))
		c.bits = c.buf.Buf()
	}
	if v {
		c.bits[c.n>>3] |= 1 << (c.n & 7)
	} else {
		c.bits[c.n>>3] &^= 1 << (c.n & 7)
		c.nulls++
	}
	c.n++
}

func (c *bitCol) truncate(n int) {
	if n < c.n {
		c.nulls -= (c.n - n) - bitutil.CountSetBits(c.bits, n, c.n-n)
		c.n = n
	}
}

// finish returns the bitmap (nil when there are no nulls) and the null count.
func (c *bitCol) finish() (*memory.Buffer, int) {
	b, nulls := c.buf, c.nulls
	c.hint = c.n
	if b != nil {
		if nulls == 0 {
			b.Release()
			b = nil
		} else {
			b.ResizeNoShrink(int(bitutil.BytesForBits(int64(c.n))))
		}
	}
	c.buf, c.bits, c.n, c.nulls = nil, nil, 0, 0
	return b, nulls
}

func (c *bitCol) release() {
	if c.buf != nil {
		c.buf.Release()
	}
	c.buf, c.bits, c.n, c.nulls = nil, nil, 0, 0
}

// bytesCol is a growable byte buffer (the data of a utf8/binary column).
type bytesCol struct {
	mem  memory.Allocator
	buf  *memory.Buffer
	data []byte // len = used, cap = allocated
	hint int
}

func (c *bytesCol) append(v []byte) {
	if cap(c.data)-len(c.data) < len(v) {
		if c.buf == nil {
			c.buf = memory.NewResizableBuffer(c.mem)
		}
		used := len(c.data)
		c.buf.Resize(max(2*cap(c.data), used+len(v), c.hint, 1024))
		c.data = c.buf.Buf()[:used]
	}
	c.data = append(c.data, v...)
}

func (c *bytesCol) truncate(n int) { c.data = c.data[:n] }

func (c *bytesCol) finish() *memory.Buffer {
	b := c.buf
	c.hint = len(c.data)
	if b == nil {
		b = memory.NewResizableBuffer(c.mem)
	}
	b.ResizeNoShrink(len(c.data))
	c.buf, c.data = nil, nil
	return b
}

func (c *bytesCol) release() {
	if c.buf != nil {
		c.buf.Release()
	}
	c.buf, c.data = nil, nil
}
