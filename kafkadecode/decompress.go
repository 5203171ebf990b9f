package kafkadecode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// arena is the growing buffer that one Append decompresses into. Its bytes
// come from the Decoder's recycler, so once the record batches whose views
// point into it are released it is parked for the next Append.
type arena struct {
	r    *recycler
	buf  []byte // len = bytes used, cap = bytes allocated
	hint int
	// keep: a buffer the arena outgrows is kept (in kept) instead of
	// freed, until freeKept: another goroutine may still read the bytes
	// decompressed into it (parallel.go).
	keep bool
	kept [][]byte
}

// reserve makes room for n more bytes.
func (a *arena) reserve(n int) {
	if cap(a.buf)-len(a.buf) >= n {
		return
	}
	newCap := max(2*cap(a.buf), len(a.buf)+n, a.hint, 64<<10)
	used := len(a.buf)
	if a.keep && cap(a.buf) > 0 {
		nb := a.r.Allocate(newCap)
		copy(nb, a.buf)
		a.kept = append(a.kept, a.buf[:cap(a.buf)])
		a.buf = nb[:used]
		return
	}
	a.buf = a.r.Reallocate(newCap, a.buf[:cap(a.buf)])[:used]
}

// freeKept frees the buffers the arena outgrew.
func (a *arena) freeKept() {
	for i, b := range a.kept {
		a.r.Free(b)
		a.kept[i] = nil
	}
	a.kept = a.kept[:0]
}

// take hands the arena's bytes over as an Arrow buffer (nil if empty) and
// starts a new arena. Releasing the returned buffer frees to the recycler.
func (a *arena) take() *memory.Buffer {
	if cap(a.buf) == 0 {
		return nil
	}
	a.hint = len(a.buf)
	b := memory.NewBufferWithAllocator(a.buf[:cap(a.buf)], a.r)
	b.ResizeNoShrink(len(a.buf))
	a.buf = nil
	return b
}

// free returns an untaken arena's bytes to the recycler.
func (a *arena) free() {
	if cap(a.buf) > 0 {
		a.r.Free(a.buf[:cap(a.buf)])
	}
	a.buf = nil
}

var (
	errMaxDecompress   = errors.New("decompressed size exceeds the configured maximum")
	errMalformedXerial = errors.New("malformed xerial snappy framing")
	errUnknownCodec    = errors.New("unknown compression codec")
)

// xerialPrefix starts Kafka's Java-style (xerial) framed snappy payloads.
var xerialPrefix = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompressor holds reusable codec state. It is owned by one Decoder.
type decompressor struct {
	max int
	// verify makes the zstd decoder check a frame's content checksum. It
	// is off when the batch CRC32C, checked before decompression, already
	// covers the compressed bytes (as for LZ4, whose checksums are never
	// checked: see lz4frame.go).
	verify bool
	src    bytes.Reader
	gz     *gzip.Reader
	zs     *zstd.Decoder
	zerr   error
}

// decompress appends the decompressed form of src to a.buf and returns the
// offset in a.buf where it starts.
func (d *decompressor) decompress(codec int, src []byte, a *arena) (int, error) {
	start := len(a.buf)
	var err error
	switch codec {
	case codecGzip:
		d.src.Reset(src)
		if d.gz == nil {
			d.gz, err = gzip.NewReader(&d.src)
		} else {
			err = d.gz.Reset(&d.src)
		}
		if err == nil {
			err = d.readAll(d.gz, a, start)
		}
	case codecLz4:
		err = d.lz4Frames(src, a, start)
	case codecSnappy:
		err = d.snappy(src, a)
	case codecZstd:
		err = d.zstd(src, a, start)
	default:
		err = errUnknownCodec
	}
	if err != nil {
		a.buf = a.buf[:start]
		return 0, err
	}
	return start, nil
}

func (d *decompressor) readAll(r io.Reader, a *arena, start int) error {
	for {
		if len(a.buf)-start > d.max {
			return errMaxDecompress
		}
		if len(a.buf) == cap(a.buf) {
			// Grow only when full: reserving 32 KiB before every read
			// grew an arena sized from the last Append (whole fetch) at
			// the final read, which returns nothing but io.EOF.
			a.reserve(32 << 10)
		}
		n, err := r.Read(a.buf[len(a.buf):cap(a.buf)])
		a.buf = a.buf[:len(a.buf)+n]
		if err == io.EOF {
			if len(a.buf)-start > d.max {
				return errMaxDecompress
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (d *decompressor) snappy(src []byte, a *arena) error {
	if len(src) >= 16 && bytes.HasPrefix(src, xerialPrefix) {
		// 8-byte magic, 4-byte version, 4-byte min version, then blocks
		// of [uint32 big-endian length][raw snappy block].
		total := 0
		for rem := src[16:]; len(rem) > 0; {
			if len(rem) < 4 {
				return errMalformedXerial
			}
			size := binary.BigEndian.Uint32(rem)
			rem = rem[4:]
			if uint64(size) > uint64(len(rem)) {
				return errMalformedXerial
			}
			l, err := s2.DecodedLen(rem[:size])
			if err != nil {
				return err
			}
			if total += l; total > d.max {
				return errMaxDecompress
			}
			rem = rem[size:]
		}
		a.reserve(total)
		for rem := src[16:]; len(rem) > 0; {
			size := binary.BigEndian.Uint32(rem)
			block := rem[4 : 4+size]
			rem = rem[4+size:]
			if err := d.snappyBlock(block, a); err != nil {
				return err
			}
		}
		return nil
	}
	return d.snappyBlock(src, a)
}

func (d *decompressor) snappyBlock(block []byte, a *arena) error {
	l, err := s2.DecodedLen(block)
	if err != nil {
		return err
	}
	if l > d.max {
		return errMaxDecompress
	}
	a.reserve(l)
	dst := a.buf[len(a.buf) : len(a.buf)+l]
	out, err := s2.Decode(dst, block)
	if err != nil {
		return err
	}
	if len(out) != l {
		return s2.ErrCorrupt
	}
	a.buf = a.buf[:len(a.buf)+l]
	return nil
}

func (d *decompressor) zstd(src []byte, a *arena, start int) error {
	if d.zs == nil && d.zerr == nil {
		d.zs, d.zerr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(d.max)),
			zstd.WithDecoderLowmem(false),
			zstd.IgnoreChecksum(!d.verify))
	}
	if d.zerr != nil {
		return d.zerr
	}
	var h zstd.Header
	if err := h.Decode(src); err == nil && h.HasFCS && h.FrameContentSize <= uint64(d.max) {
		a.reserve(int(h.FrameContentSize))
	} else {
		a.reserve(4 * len(src))
	}
	// Decode into the arena's free tail as an empty slice: given a
	// non-empty dst, DecodeAll decodes every block into its own buffer
	// and copies it onto dst; given an empty one, it decodes in place.
	tail := a.buf[start:start:cap(a.buf)]
	out, err := d.zs.DecodeAll(src, tail)
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return errMaxDecompress
		}
		return err
	}
	if len(out) > d.max {
		return errMaxDecompress
	}
	if len(out) > 0 && (cap(tail) == 0 || unsafe.SliceData(out) != unsafe.SliceData(tail)) {
		// The decoder outgrew the arena and allocated; move the bytes in.
		a.reserve(len(out))
		a.buf = append(a.buf, out...)
		return nil
	}
	a.buf = a.buf[:start+len(out)]
	return nil
}

func (d *decompressor) close() {
	if d.zs != nil {
		d.zs.Close()
		d.zs = nil
	}
}
