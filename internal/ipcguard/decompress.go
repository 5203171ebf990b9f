package ipcguard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// checkCompressed decompresses src into a counter, never into memory, and
// fails unless it yields exactly size bytes. arrow-go's reader allocates
// size bytes per buffer and, when a later buffer of the same batch fails to
// decompress, leaks the buffers it already decoded (they stay counted
// against the allocator); refusing corrupt bodies here means it only ever
// sees buffers that decode. Streaming keeps the check's memory constant.
// A size of 0 is not checked: arrow-go does not read such a buffer either.
func checkCompressed(codec uint8, src []byte, size int64) error {
	if size == 0 {
		return nil
	}
	c := counter{limit: size}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	var err error
	switch codec {
	case codecLZ4Frame:
		r := lz4Readers.Get().(*lz4.Reader)
		r.Reset(bytes.NewReader(src))
		_, err = io.CopyBuffer(&c, r, *buf)
		r.Reset(nil)
		lz4Readers.Put(r)
	case codecZSTD:
		d := zstdDecoders.Get().(*zstd.Decoder)
		if err = d.Reset(bytes.NewReader(src)); err == nil {
			_, err = io.CopyBuffer(&c, d, *buf)
		}
		_ = d.Reset(nil)
		zstdDecoders.Put(d)
	}
	if errors.Is(err, errTooLong) {
		return fmt.Errorf("decompresses to more than the %d bytes it declares", size)
	}
	if err != nil {
		return fmt.Errorf("does not decompress: %v", err)
	}
	if c.n != size {
		return fmt.Errorf("decompresses to %d bytes, it declares %d", c.n, size)
	}
	return nil
}

var errTooLong = errors.New("longer than declared")

// counter counts what is written to it and fails past limit.
type counter struct{ n, limit int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if c.n > c.limit {
		return 0, errTooLong
	}
	return len(p), nil
}

var (
	copyBufs   = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
	lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	// One block decoder, no goroutines, and a window bounded like the
	// message: a frame cannot make the decoder itself allocate more.
	zstdDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			panic(err)
		}
		return d
	}}
)
