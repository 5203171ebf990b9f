package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The limit of compressed decode: bare decompression of the same record
// batches' payloads into one reused buffer with the codec libraries
// (klauspost zstd DecodeAll, pierrec lz4 blocks, s2's snappy Decode,
// klauspost gzip), nothing else: no CRC, no record parsing, no Arrow, and
// no content checksums (zstd's and lz4's are skipped, as kafkadecode skips
// them where the batch CRC32C covers the compressed bytes).
// Decoding cannot be faster than this, per core.

// bareSplit returns the records payload (compressed) of every batch in raw.
// Splitting is done before the timer: the limit is decompression alone.
func bareSplit(tb testing.TB, raw []byte) [][]byte {
	var out [][]byte
	for len(raw) > 0 {
		if len(raw) < 61 {
			tb.Fatalf("short batch: %d bytes", len(raw))
		}
		total := 12 + int(binary.BigEndian.Uint32(raw[8:]))
		out = append(out, raw[61:total])
		raw = raw[total:]
	}
	return out
}

// bareDecompressor decompresses one codec's payloads, each into the start
// of one reused buffer.
type bareDecompressor struct {
	codec int16
	buf   []byte
	zs    *zstd.Decoder
	gz    gzip.Reader
	src   bytes.Reader
}

func newBareDecompressor(codec int16) *bareDecompressor {
	d := &bareDecompressor{codec: codec}
	if codec == benchCodecZstd {
		d.zs, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(false), zstd.IgnoreChecksum(true))
	}
	return d
}

func (d *bareDecompressor) close() {
	if d.zs != nil {
		d.zs.Close()
	}
}

// decompress decompresses p into d.buf and returns the decompressed size.
func (d *bareDecompressor) decompress(p []byte) (int, error) {
	switch d.codec {
	case benchCodecZstd:
		out, err := d.zs.DecodeAll(p, d.buf[:0])
		d.buf = out[:cap(out)]
		return len(out), err
	case benchCodecSnappy:
		n, err := s2.DecodedLen(p)
		if err != nil {
			return 0, err
		}
		if cap(d.buf) < n {
			d.buf = make([]byte, n)
		}
		out, err := s2.Decode(d.buf[:cap(d.buf)], p)
		return len(out), err
	case benchCodecGzip:
		d.src.Reset(p)
		if err := d.gz.Reset(&d.src); err != nil {
			return 0, err
		}
		n := 0
		for {
			if n == len(d.buf) {
				d.buf = append(d.buf, make([]byte, max(64<<10, len(d.buf)))...)
			}
			k, err := d.gz.Read(d.buf[n:])
			n += k
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
		}
	case benchCodecLz4:
		return d.lz4(p)
	}
	return 0, fmt.Errorf("codec %d", d.codec)
}

// lz4 walks an LZ4 frame and decompresses its blocks with pierrec's block
// decoder straight into d.buf: the fastest use of the library (its
// lz4.Reader decompresses each block into a pooled buffer and copies out).
func (d *bareDecompressor) lz4(p []byte) (int, error) {
	if len(p) < 7 || binary.LittleEndian.Uint32(p) != 0x184D2204 {
		return 0, errors.New("lz4: bad magic")
	}
	flg := p[4]
	blockMax := 1 << (8 + 2*(int(p[5]>>4)&7))
	hdr := 7
	if flg&(1<<3) != 0 {
		hdr += 8
	}
	if flg&1 != 0 {
		hdr += 4
	}
	p = p[hdr:]
	n := 0
	for {
		size := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if size == 0 {
			return n, nil
		}
		k := int(size &^ (1 << 31))
		block := p[:k]
		p = p[k:]
		if flg&(1<<4) != 0 {
			p = p[4:]
		}
		if need := n + blockMax; len(d.buf) < need {
			d.buf = append(d.buf[:len(d.buf)], make([]byte, need-len(d.buf))...)
		}
		if size&(1<<31) != 0 {
			n += copy(d.buf[n:], block)
			continue
		}
		var m int
		var err error
		if flg&(1<<5) == 0 && n > 0 { // dependent blocks
			m, err = lz4.UncompressBlockWithDict(block, d.buf[n:], d.buf[max(0, n-64<<10):n])
		} else {
			m, err = lz4.UncompressBlock(block, d.buf[n:])
		}
		if err != nil {
			return n, err
		}
		n += m
	}
}

// bareSide is the benchmark side of bare decompression of raw's batches.
func bareSide(codec int16, raw []byte) side {
	return side{"bare-decompress", func(b *testing.B) {
		payloads := bareSplit(b, raw)
		d := newBareDecompressor(codec)
		defer d.close()
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			for _, p := range payloads {
				if _, err := d.decompress(p); err != nil {
					b.Fatal(err)
				}
			}
		}
		reportRecords(b, benchRecords)
	}}
}

// TestBareDecompressRoundTrip checks the bare side decompresses every
// codec's batches to the records the benchmark encoded: a limit that
// skipped work would pass for a fast one.
func TestBareDecompressRoundTrip(t *testing.T) {
	values := benchValues()[:2*benchRecordsPerBatch]
	want := bareSplit(t, kafkaBatches(values, benchCodecNone))
	for _, codec := range []int16{benchCodecGzip, benchCodecSnappy, benchCodecLz4, benchCodecZstd} {
		d := newBareDecompressor(codec)
		for i, p := range bareSplit(t, kafkaBatches(values, codec)) {
			n, err := d.decompress(p)
			if err != nil {
				t.Fatalf("codec %d batch %d: %v", codec, i, err)
			}
			if !bytes.Equal(d.buf[:n], want[i]) {
				t.Fatalf("codec %d batch %d: %d bytes differ from the %d encoded", codec, i, n, len(want[i]))
			}
		}
		d.close()
	}
}
