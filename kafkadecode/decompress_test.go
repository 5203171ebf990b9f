package kafkadecode

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// zstdStream encodes b with the streaming encoder, whose frames carry no
// content size: the decoder cannot size the arena for them up front.
func zstdStream(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// Several compressed batches of one fetch decompress into one arena, one
// after the other, and the arena is reused by the next Append: every
// value must come out as encoded, for every codec and framing, in every
// cycle (values of the later batches land behind the earlier ones' bytes,
// and the first cycle grows the arena while later ones reuse it).
func TestCompressedBatchesShareArena(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	codecs := []struct {
		name  string
		codec int16
		fn    func([]byte) []byte
		scale int // value size factor
	}{
		{"gzip", codecGzip, gzipBytes, 1},
		{"snappy-xerial", codecSnappy, xerial, 1},
		{"snappy-raw", codecSnappy, func(b []byte) []byte { return s2.EncodeSnappy(nil, b) }, 1},
		{"lz4", codecLz4, lz4Bytes, 1},
		{"zstd", codecZstd, zstdBytes, 1},
		// Batches of over 1 MiB (scale 8): the streaming encoder writes no content
		// size then, and the output outgrows the arena's guess.
		{"zstd-no-content-size", codecZstd, zstdStream, 8},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			var raw []byte
			var want [][]byte
			for bi := range 4 {
				recs := make([]trec, 50)
				for i := range recs {
					v := bytes.Repeat(fmt.Appendf(nil, "batch %d record %d;", bi, i), c.scale*(1+(i*7)%300))
					recs[i] = trec{key: fmt.Appendf(nil, "key-%d-%d-long-enough", bi, i), val: v}
					want = append(want, v)
				}
				raw = append(raw, tbatch{base: int64(bi * 50), attrs: c.codec, recs: recs, compress: c.fn}.build()...)
			}
			for _, conc := range []int{1, 3} {
				dec, err := NewDecoder(mem, WithMaxParkedBytes(64<<10), WithDecompressConcurrency(conc))
				if err != nil {
					t.Fatal(err)
				}
				defer dec.Release()
				for cycle := range 3 {
					if _, err := dec.UnsafeAppend(Fetch{RecordBatches: raw}); err != nil {
						t.Fatalf("cycle %d: %v", cycle, err)
					}
					rec, err := dec.Flush()
					if err != nil {
						t.Fatal(err)
					}
					vals := rec.Column(4).(*array.BinaryView)
					if vals.Len() != len(want) {
						t.Fatalf("cycle %d: %d rows, want %d", cycle, vals.Len(), len(want))
					}
					for i, w := range want {
						if !bytes.Equal(vals.Value(i), w) {
							rec.Release()
							t.Fatalf("concurrency %d cycle %d row %d: value differs", conc, cycle, i)
						}
					}
					rec.Release()
				}
				if conc > 1 && len(dec.workers) != conc {
					t.Fatalf("%d decompression workers ran, want %d", len(dec.workers), conc)
				}
			}
		})
	}
}

// A zstd frame's content checksum is checked only when the batch CRC32C
// is not: with the CRC, which covers the compressed bytes, a frame whose
// checksum was damaged before the CRC was computed decodes; under
// WithSkipCRC it is rejected.
func TestZstdChecksumOnlyWithoutCRC(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	damaged := func(b []byte) []byte {
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
		defer enc.Close()
		out := enc.EncodeAll(b, nil)
		out[len(out)-1] ^= 0xff // the last byte is the content checksum's
		return out
	}
	raw := tbatch{attrs: codecZstd, recs: sampleRecs(20), compress: damaged}.build()
	rec, _, err := decodeAll(t, mem, nil, Fetch{RecordBatches: raw})
	if err != nil {
		t.Fatalf("with the CRC checked: %v", err)
	}
	rec.Release()
	rec, _, err = decodeAll(t, mem, []Option{WithSkipCRC()}, Fetch{RecordBatches: raw})
	rec.Release()
	if err == nil {
		t.Fatal("a damaged zstd checksum passed with the CRC skipped")
	}
}

// With parallel decompression a damaged batch in the middle of a fetch
// stops the Append where the serial decoder stops, with the same error and
// the rows before it: the batches after it were decompressed already, and
// must not show.
func TestParallelDecompressStopsInOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var raw []byte
	for bi := range 6 {
		b := tbatch{base: int64(bi * 10), attrs: codecZstd, recs: sampleRecs(10), compress: zstdBytes}.build()
		if bi == 3 {
			b[len(b)-5] ^= 0xff // CRC mismatch
		}
		raw = append(raw, b...)
	}
	for _, opts := range [][]Option{nil, {WithSkipCRC()}} {
		serial, sp, serr := decodeAll(t, mem, opts, Fetch{FetchOffset: 15, RecordBatches: raw})
		par, pp, perr := decodeAll(t, mem, append(opts, WithDecompressConcurrency(4)), Fetch{FetchOffset: 15, RecordBatches: raw})
		if serr == nil || fmt.Sprint(serr) != fmt.Sprint(perr) || sp[0] != pp[0] || !array.RecordEqual(serial, par) {
			t.Fatalf("parallel %+v %v, serial %+v %v", pp[0], perr, sp[0], serr)
		}
		if sp[0].Records != 15 || sp[0].NextOffset != 30 {
			t.Fatalf("progress %+v, want the 15 records of offsets 15..29", sp[0])
		}
		serial.Release()
		par.Release()
	}
}
