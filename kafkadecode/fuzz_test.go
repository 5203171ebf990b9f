package kafkadecode

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func lz4Bytes(b []byte) []byte {
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zstdBytes(b []byte) []byte {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// FuzzDecodeBatches feeds arbitrary bytes to the batch parser, with and
// without CRC checks (without, mutations reach the record parser). It must
// never panic, must return valid arrays and must not leak; with parallel
// decompression (WithDecompressConcurrency) it must return exactly what
// the serial decoder returns: the same rows, progress and error.
func FuzzDecodeBatches(f *testing.F) {
	recs := sampleRecs(6)
	f.Add(tbatch{base: 3, recs: recs}.build())
	f.Add(append(tbatch{base: 0, recs: recs[:2]}.build(), tbatch{base: 2, recs: recs[:3]}.build()[:40]...))
	for codec, c := range map[int16]func([]byte) []byte{codecGzip: gzipBytes, codecSnappy: xerial, codecLz4: lz4Bytes, codecZstd: zstdBytes} {
		f.Add(tbatch{base: 9, attrs: codec, recs: recs, compress: c}.build())
	}
	// Several compressed batches in one fetch (the parallel pass runs),
	// the last one cut short.
	multi := append(tbatch{base: 0, attrs: codecZstd, recs: recs, compress: zstdBytes}.build(),
		tbatch{base: 6, attrs: codecLz4, recs: recs, compress: lz4Bytes}.build()...)
	multi = append(multi, tbatch{base: 12, attrs: codecGzip, recs: recs, compress: gzipBytes}.build()...)
	f.Add(append(multi, tbatch{base: 18, attrs: codecSnappy, recs: recs, compress: xerial}.build()[:50]...))
	f.Add(tbatch{base: 5, attrs: attrTransactional | attrControl, pid: 1, recs: []trec{{key: []byte{0, 0, 0, 0}}}}.build())
	f.Add(tbatch{base: 7, recs: []trec{{val: []byte(`{"id": 1}`)}, {val: []byte(`{"id": "x"}`)}, {val: nil}, {val: []byte(`{"id": 4, "items": [{"sku": "a"}]}`)}}}.build())
	f.Fuzz(func(t *testing.T, raw []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		for _, opts := range [][]Option{
			nil,
			{WithSkipCRC(), WithIsolation(ReadCommitted), WithMaxDecompressedBytes(1 << 20)},
			{WithSkipCRC(), WithValueDecoder(orderDecoder(t))}, // dead letters and row removal at Flush
		} {
			decode := func(opts []Option) (arrow.RecordBatch, Progress, error) {
				dec, err := NewDecoder(mem, opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer dec.Release()
				p, aerr := dec.UnsafeAppend(Fetch{RecordBatches: raw, AbortedTransactions: []AbortedTransaction{{ProducerID: 1, FirstOffset: 0}}})
				rec, err := dec.Flush()
				if err != nil {
					t.Fatal(err)
				}
				return rec, p, aerr
			}
			rec, p, aerr := decode(opts)
			if int(rec.NumRows()) != p.Records {
				t.Fatalf("%d rows, progress says %d", rec.NumRows(), p.Records)
			}
			for _, c := range rec.Columns() {
				if v, ok := c.(interface{ ValidateFull() error }); ok {
					if err := v.ValidateFull(); err != nil {
						t.Fatal(err)
					}
				}
			}
			prec, pp, perr := decode(append(opts[:len(opts):len(opts)], WithDecompressConcurrency(3)))
			if pp != p || fmt.Sprint(perr) != fmt.Sprint(aerr) || !array.RecordEqual(prec, rec) {
				t.Fatalf("parallel decompression differs: %+v %v, serial %+v %v", pp, perr, p, aerr)
			}
			prec.Release()
			rec.Release()
		}
	})
}

// FuzzJSONValue feeds arbitrary bytes to the JSON decoder: no panic, one
// row per value, aligned valid arrays.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{
		`{"id": 1, "customer": "ann\u00e9", "total": 12.5, "price": 12.34, "created": "2026-12-02T13:25:06.5+01:00", "small": -3,
		  "items": [{"sku": "a", "qty": 2}, {"sku": "b"}], "addr": {"city": "Oslo"}, "blob": "AAEC", "x": {"y": [1, null]}}`,
		`{"id": "2", "created": 1764681906000, "price": "-0.5", "total": 1e2, "items": [], "addr": null}`,
		`{"id": 1, "items": [{"qty": 1}]}`, `[]`, `{"id": 1, "x": [[[[`, `{"customer": "\ud83d\ude00"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		d := orderDecoder(t)
		b := array.NewStructBuilder(mem, d.Type())
		defer b.Release()
		for i := range 2 { // twice: state from a failed value must not leak into the next
			_ = d.AppendValue(b, v)
			if b.Len() != i+1 {
				t.Fatalf("%d rows after %d values", b.Len(), i+1)
			}
		}
		arr := b.NewStructArray()
		defer arr.Release()
		if err := arr.ValidateFull(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzAvroValue feeds arbitrary bytes to the Avro decoder.
func FuzzAvroValue(f *testing.F) {
	schema := avro.MustParse(avroOrderSchema)
	for i := range 4 {
		b, err := avro.Marshal(schema, sampleAvroOrder(i))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		d, err := NewAvroDecoder(avroOrderSchema)
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewStructBuilder(mem, d.Type())
		defer b.Release()
		for i := range 2 {
			_ = d.AppendValue(b, v)
			if b.Len() != i+1 {
				t.Fatalf("%d rows after %d values", b.Len(), i+1)
			}
		}
		arr := b.NewStructArray()
		defer arr.Release()
		if err := arr.ValidateFull(); err != nil {
			t.Fatal(err)
		}
	})
}
