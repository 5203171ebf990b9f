package kafkadecode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/s2"
)

// trec is a record for hand-built batches. A nil hdr value is a null.
type trec struct {
	key, val []byte
	hdrs     [][2][]byte
	tsDelta  int64
	offDelta int64
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	return append(binary.AppendVarint(b, int64(len(v))), v...)
}

func encRecord(dst []byte, r trec) []byte {
	body := []byte{0}
	body = binary.AppendVarint(body, r.tsDelta)
	body = binary.AppendVarint(body, r.offDelta)
	body = appendBytes(body, r.key)
	body = appendBytes(body, r.val)
	body = binary.AppendVarint(body, int64(len(r.hdrs)))
	for _, h := range r.hdrs {
		body = appendBytes(body, h[0])
		body = appendBytes(body, h[1])
	}
	return append(binary.AppendVarint(dst, int64(len(body))), body...)
}

type tbatch struct {
	base       int64
	attrs      int16
	baseTs     int64
	maxTs      int64
	pid        int64
	recs       []trec
	compress   func([]byte) []byte // applied to the records section
	numRecords int32               // overrides len(recs) when non-zero
}

// build encodes a magic v2 batch with a valid CRC.
func (tb tbatch) build() []byte {
	var recs []byte
	last := int64(0)
	for i, r := range tb.recs {
		if r.offDelta == 0 {
			r.offDelta = int64(i)
		}
		last = max(last, r.offDelta)
		recs = encRecord(recs, r)
	}
	if tb.compress != nil {
		recs = tb.compress(recs)
	}
	n := tb.numRecords
	if n == 0 {
		n = int32(len(tb.recs))
	}
	b := make([]byte, batchHeaderLen, batchHeaderLen+len(recs))
	binary.BigEndian.PutUint64(b[0:], uint64(tb.base))
	binary.BigEndian.PutUint32(b[8:], uint32(batchHeaderLen-logOverhead+len(recs)))
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(tb.attrs))
	binary.BigEndian.PutUint32(b[23:], uint32(last))
	binary.BigEndian.PutUint64(b[27:], uint64(tb.baseTs))
	binary.BigEndian.PutUint64(b[35:], uint64(tb.maxTs))
	binary.BigEndian.PutUint64(b[43:], uint64(tb.pid))
	binary.BigEndian.PutUint32(b[53:], 0)
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func sampleRecs(n int) []trec {
	rs := make([]trec, n)
	for i := range rs {
		rs[i] = trec{
			key:     []byte{byte('a' + i%26)},
			val:     bytes.Repeat([]byte{byte('0' + i%10)}, 10+i%40),
			tsDelta: int64(i),
		}
		if i%3 == 0 {
			rs[i].hdrs = [][2][]byte{{[]byte("trace"), []byte("abc")}, {[]byte("nil"), nil}}
		}
	}
	return rs
}

// decodeAll appends fs and flushes, returning the batch (caller releases).
func decodeAll(t *testing.T, mem memory.Allocator, opts []Option, fs ...Fetch) (arrow.RecordBatch, []Progress, error) {
	t.Helper()
	dec, err := NewDecoder(mem, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Release()
	var ps []Progress
	var firstErr error
	for _, f := range fs {
		p, err := dec.Append(f)
		ps = append(ps, p)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	rec, err := dec.Flush()
	if err != nil {
		t.Fatal(err)
	}
	return rec, ps, firstErr
}

func offsets(rec arrow.RecordBatch) []int64 {
	return append([]int64(nil), rec.Column(1).(*array.Int64).Int64Values()...)
}

func TestHandBuiltBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b1 := tbatch{base: 100, baseTs: 1000, recs: sampleRecs(5)}.build()
	b2 := tbatch{base: 105, baseTs: 2000, recs: sampleRecs(3)}.build()
	raw := append(append([]byte{}, b1...), b2...)
	rec, ps, err := decodeAll(t, mem, nil, Fetch{Partition: 7, FetchOffset: 102, RecordBatches: raw})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if got, want := offsets(rec), []int64{102, 103, 104, 105, 106, 107}; !slicesEqual(got, want) {
		t.Fatalf("offsets %v, want %v (records below FetchOffset are skipped)", got, want)
	}
	if ps[0].NextOffset != 108 || ps[0].Batches != 2 || ps[0].Truncated || ps[0].Records != 6 {
		t.Fatalf("progress %+v", ps[0])
	}
	if p := rec.Column(0).(*array.Int32).Value(0); p != 7 {
		t.Fatalf("partition %d", p)
	}
	if ts := rec.Column(2).(*array.Timestamp).Value(5); ts != 2002 {
		t.Fatalf("timestamp %d, want 2002", ts)
	}
	h := rec.Column(5).(*array.List)
	if s, e := h.ValueOffsets(1); e-s != 2 { // offset 103 is sampleRecs index 3
		t.Fatalf("headers of row 1: %d", e-s)
	}
	hv := h.ListValues().(*array.Struct).Field(1)
	if hv.NullN() == 0 {
		t.Fatal("null header value lost")
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPartialTrailingBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b1 := tbatch{base: 0, recs: sampleRecs(4)}.build()
	b2 := tbatch{base: 4, recs: sampleRecs(4)}.build()
	for cut := 0; cut < len(b2); cut += 7 {
		raw := append(append([]byte{}, b1...), b2[:cut]...)
		rec, ps, err := decodeAll(t, mem, nil, Fetch{RecordBatches: raw})
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if rec.NumRows() != 4 || ps[0].NextOffset != 4 || ps[0].Truncated != (cut > 0) || ps[0].Batches != 1 {
			t.Fatalf("cut %d: rows %d progress %+v", cut, rec.NumRows(), ps[0])
		}
		rec.Release()
	}
	// Only a partial batch: no progress, and the caller learns to fetch more.
	rec, ps, err := decodeAll(t, mem, nil, Fetch{FetchOffset: 4, RecordBatches: b2[:len(b2)-1]})
	if err != nil || rec.NumRows() != 0 || ps[0].NextOffset != 4 || !ps[0].Truncated || ps[0].Batches != 0 {
		t.Fatalf("rows %d progress %+v err %v", rec.NumRows(), ps[0], err)
	}
	rec.Release()
}

func TestCRCMismatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	good := tbatch{base: 10, recs: sampleRecs(3)}.build()
	bad := tbatch{base: 13, recs: sampleRecs(3)}.build()
	bad[len(bad)-2] ^= 0x01 // a value byte: still parses
	raw := append(append([]byte{}, good...), bad...)
	rec, ps, err := decodeAll(t, mem, nil, Fetch{Partition: 3, FetchOffset: 10, RecordBatches: raw})
	defer rec.Release()
	var ce *CRCError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCRCMismatch) || ce.Partition != 3 || ce.BaseOffset != 13 {
		t.Fatalf("err %v", err)
	}
	if rec.NumRows() != 3 || ps[0].NextOffset != 13 {
		t.Fatalf("rows before the bad batch must stay: rows %d progress %+v", rec.NumRows(), ps[0])
	}
	rec2, _, err := decodeAll(t, mem, []Option{WithSkipCRC()}, Fetch{Partition: 3, RecordBatches: raw})
	if err != nil || rec2.NumRows() != 6 {
		t.Fatalf("skip CRC: rows %d err %v", rec2.NumRows(), err)
	}
	rec2.Release()
}

func TestLegacyMagic(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// A magic v1 message: offset, size, crc, magic 1, attributes, timestamp, key, value.
	msg := []byte{0, 0, 0, 0, 1 /*magic*/, 0}
	msg = binary.BigEndian.AppendUint64(msg, 1234)
	msg = binary.BigEndian.AppendUint32(msg, 0xffffffff)
	msg = binary.BigEndian.AppendUint32(msg, 1)
	msg = append(msg, 'v')
	raw := binary.BigEndian.AppendUint64(nil, 42)
	raw = binary.BigEndian.AppendUint32(raw, uint32(len(msg)))
	raw = append(raw, msg...)
	rec, _, err := decodeAll(t, mem, nil, Fetch{Partition: 9, FetchOffset: 42, RecordBatches: raw})
	defer rec.Release()
	var le *LegacyMagicError
	if !errors.As(err, &le) || !errors.Is(err, ErrLegacyMagic) || le.Partition != 9 || le.Offset != 42 || le.Magic != 1 {
		t.Fatalf("err %v", err)
	}
}

func TestCorruptBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cases := map[string][]byte{
		"too few records":  tbatch{base: 5, recs: sampleRecs(3), numRecords: 4}.build(),
		"too many records": tbatch{base: 5, recs: sampleRecs(3), numRecords: 2}.build(),
		"unknown codec":    tbatch{base: 5, attrs: 6, recs: sampleRecs(3)}.build(),
		"bad gzip":         tbatch{base: 5, attrs: codecGzip, recs: sampleRecs(3)}.build(),
		"bad snappy":       tbatch{base: 5, attrs: codecSnappy, recs: sampleRecs(3)}.build(),
		"bad lz4":          tbatch{base: 5, attrs: codecLz4, recs: sampleRecs(3)}.build(),
		"bad zstd":         tbatch{base: 5, attrs: codecZstd, recs: sampleRecs(3)}.build(),
		"overrunning record": tbatch{base: 5, recs: sampleRecs(1), compress: func(b []byte) []byte {
			b[0] = 0x7e // claims 63 bytes
			return b
		}}.build(),
	}
	good := tbatch{base: 0, recs: sampleRecs(5)}.build()
	for name, b := range cases {
		raw := append(append([]byte{}, good...), b...)
		rec, ps, err := decodeAll(t, mem, nil, Fetch{Partition: 1, RecordBatches: raw})
		var ce *CorruptBatchError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptBatch) || ce.BaseOffset != 5 || ce.Partition != 1 {
			t.Fatalf("%s: err %v", name, err)
		}
		if rec.NumRows() != 5 || ps[0].NextOffset != 5 || ps[0].Records != 5 {
			t.Fatalf("%s: the corrupt batch must be rolled back: rows %d progress %+v", name, rec.NumRows(), ps[0])
		}
		rec.Release()
	}
}

func TestControlAndAbortedBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const txn, ctl = attrTransactional, attrTransactional | attrControl
	abortKey := []byte{0, 0, 0, 0}
	commitKey := []byte{0, 0, 0, 1}
	raw := bytes.Join([][]byte{
		tbatch{base: 0, recs: sampleRecs(2)}.build(),                                // 0-1 plain
		tbatch{base: 2, attrs: txn, pid: 7, recs: sampleRecs(2)}.build(),            // 2-3 aborted
		tbatch{base: 4, attrs: txn, pid: 8, recs: sampleRecs(2)}.build(),            // 4-5 committed
		tbatch{base: 6, attrs: ctl, pid: 7, recs: []trec{{key: abortKey}}}.build(),  // abort marker
		tbatch{base: 7, attrs: ctl, pid: 8, recs: []trec{{key: commitKey}}}.build(), // commit marker
		tbatch{base: 8, attrs: txn, pid: 7, recs: sampleRecs(1)}.build(),            // 8 committed later
		tbatch{base: 9, attrs: ctl, pid: 7, recs: []trec{{key: commitKey}}}.build(),
	}, nil)
	aborted := []AbortedTransaction{{ProducerID: 7, FirstOffset: 2}}
	for _, tc := range []struct {
		iso  Isolation
		want []int64
	}{
		{ReadCommitted, []int64{0, 1, 4, 5, 8}},
		{ReadUncommitted, []int64{0, 1, 2, 3, 4, 5, 8}},
	} {
		rec, ps, err := decodeAll(t, mem, []Option{WithIsolation(tc.iso)}, Fetch{RecordBatches: raw, AbortedTransactions: aborted})
		if err != nil {
			t.Fatal(err)
		}
		if got := offsets(rec); !slicesEqual(got, tc.want) || ps[0].NextOffset != 10 {
			t.Fatalf("isolation %d: offsets %v want %v, next %d", tc.iso, got, tc.want, ps[0].NextOffset)
		}
		rec.Release()
	}
}

// A fetch response appended in pieces: an aborted transaction whose abort
// marker is in the first piece must not drop the producer's committed
// batches in the next one. Giving each piece the response's whole aborted
// list did exactly that (committed records lost up to the producer's next
// abort marker, seen in the split-process kill test).
func TestAbortedTransactionsAcrossPieces(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const txn, ctl = attrTransactional, attrTransactional | attrControl
	abortKey := []byte{0, 0, 0, 0}
	commitKey := []byte{0, 0, 0, 1}
	first := bytes.Join([][]byte{
		tbatch{base: 0, attrs: txn, pid: 7, recs: sampleRecs(2)}.build(),           // 0-1 aborted (A)
		tbatch{base: 2, attrs: ctl, pid: 7, recs: []trec{{key: abortKey}}}.build(), // A's abort marker
	}, nil)
	second := bytes.Join([][]byte{
		tbatch{base: 3, attrs: txn, pid: 7, recs: sampleRecs(3)}.build(),            // 3-5 committed
		tbatch{base: 6, attrs: ctl, pid: 7, recs: []trec{{key: commitKey}}}.build(), // commit marker
		tbatch{base: 7, attrs: txn, pid: 7, recs: sampleRecs(2)}.build(),            // 7-8 aborted (B)
		tbatch{base: 9, attrs: ctl, pid: 7, recs: []trec{{key: abortKey}}}.build(),  // B's abort marker
		tbatch{base: 10, attrs: txn, pid: 7, recs: sampleRecs(1)}.build(),           // 10 committed
		tbatch{base: 11, attrs: ctl, pid: 7, recs: []trec{{key: commitKey}}}.build(),
	}, nil)
	aborted := []AbortedTransaction{{ProducerID: 7, FirstOffset: 0}, {ProducerID: 7, FirstOffset: 7}}
	want := []int64{3, 4, 5, 10}

	rec, _, err := decodeAll(t, mem, []Option{WithIsolation(ReadCommitted)},
		Fetch{RecordBatches: first, AbortedTransactions: aborted},
		Fetch{FetchOffset: 3, RecordBatches: second, Continues: true, AbortedTransactions: aborted})
	if err != nil {
		t.Fatal(err)
	}
	if got := offsets(rec); !slicesEqual(got, want) {
		t.Fatalf("in pieces: offsets %v want %v", got, want)
	}
	rec.Release()

	// The same response in one piece reads the same.
	rec, _, err = decodeAll(t, mem, []Option{WithIsolation(ReadCommitted)},
		Fetch{RecordBatches: append(append([]byte{}, first...), second...), AbortedTransactions: aborted})
	if err != nil {
		t.Fatal(err)
	}
	if got := offsets(rec); !slicesEqual(got, want) {
		t.Fatalf("whole: offsets %v want %v", got, want)
	}
	rec.Release()
}

func TestLogAppendTime(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	raw := tbatch{base: 0, attrs: attrLogAppendTime, baseTs: 5, maxTs: 99, recs: sampleRecs(3)}.build()
	rec, _, err := decodeAll(t, mem, nil, Fetch{RecordBatches: raw})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	for i, v := range rec.Column(2).(*array.Timestamp).Values() {
		if v != 99 {
			t.Fatalf("row %d timestamp %d, want the batch max 99", i, v)
		}
	}
}

// xerial frames snappy blocks the way the Java producer does.
func xerial(b []byte) []byte {
	out := append([]byte{}, xerialPrefix...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(b) > 0 {
		n := min(len(b), 100)
		blk := s2.EncodeSnappy(nil, b[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
		out = append(out, blk...)
		b = b[n:]
	}
	return out
}

func TestSnappyFramings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	recs := sampleRecs(20)
	plain, _, err := decodeAll(t, mem, nil, Fetch{RecordBatches: tbatch{recs: recs}.build()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release()
	for name, c := range map[string]func([]byte) []byte{
		"xerial": xerial,
		"raw":    func(b []byte) []byte { return s2.EncodeSnappy(nil, b) },
	} {
		rec, _, err := decodeAll(t, mem, nil, Fetch{RecordBatches: tbatch{attrs: codecSnappy, recs: recs, compress: c}.build()})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !array.RecordEqual(plain, rec) {
			t.Fatalf("%s: decoded batch differs from the uncompressed one", name)
		}
		rec.Release()
	}
}

func TestMaxDecompressed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	raw := tbatch{attrs: codecSnappy, recs: sampleRecs(50), compress: xerial}.build()
	rec, _, err := decodeAll(t, mem, []Option{WithMaxDecompressedBytes(100)}, Fetch{RecordBatches: raw})
	defer rec.Release()
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("err %v", err)
	}
	if _, err := NewDecoder(mem, WithMaxDecompressedBytes(0)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("option not validated: %v", err)
	}
}

// The batch (and arrays sliced from it) must outlive the Decoder, and
// recycled decompression buffers must be returned when it is released.
func TestLifetimes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dec, err := NewDecoder(mem)
	if err != nil {
		t.Fatal(err)
	}
	raw := tbatch{attrs: codecSnappy, recs: sampleRecs(30), compress: xerial}.build()
	var recs []arrow.RecordBatch
	for range 6 { // more than the recycler parks
		if _, err := dec.Append(Fetch{RecordBatches: raw}); err != nil {
			t.Fatal(err)
		}
		r, err := dec.Flush()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	recs[0].Release()
	keep := array.NewSlice(recs[1].Column(4), 3, 10)
	// Batches are released on other goroutines while the decoder goes on.
	var wg sync.WaitGroup
	for _, r := range recs[1:] {
		wg.Add(1)
		go func() { defer wg.Done(); r.Release() }()
	}
	for range 3 {
		if _, err := dec.Append(Fetch{RecordBatches: raw}); err != nil {
			t.Fatal(err)
		}
		r, err := dec.Flush()
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	wg.Wait()
	dec.Release()
	want := bytes.Repeat([]byte{'3'}, 13)
	if got := keep.(*array.BinaryView).Value(0); !bytes.Equal(got, want) {
		t.Fatalf("slice outliving its batch and decoder: %q", got)
	}
	keep.Release()
}

// A view column keeps only the data buffers its own views point into: all
// keys inline means no fetch or decompression buffer held by the key
// column, so a batch's raw bytes are freed with its value column (or at
// Flush, with a ValueDecoder).
func TestFlushAttachesOnlyReferencedBuffers(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	long := bytes.Repeat([]byte("v"), 40)
	recs := []trec{{key: []byte("k1"), val: long}, {key: nil, val: []byte("short")}, {key: []byte("k3"), val: long}}
	plain := tbatch{recs: recs}.build()
	packed := tbatch{base: 3, attrs: codecSnappy, recs: recs, compress: xerial}.build()
	rec, _, err := decodeAll(t, mem, nil, Fetch{RecordBatches: plain}, Fetch{FetchOffset: 3, RecordBatches: packed})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	keys, vals := rec.Column(3).(*array.BinaryView), rec.Column(4).(*array.BinaryView)
	if n := len(keys.Data().Buffers()) - 2; n != 0 {
		t.Fatalf("inline-only key column holds %d data buffers, want 0", n)
	}
	if n := len(vals.Data().Buffers()) - 2; n != 2 {
		t.Fatalf("value column holds %d data buffers, want 2 (the input copy and the decompressed payload)", n)
	}
	for i, want := range [][]byte{long, []byte("short"), long, long, []byte("short"), long} {
		if got := vals.Value(i); !bytes.Equal(got, want) {
			t.Fatalf("row %d: value %q, want %q", i, got, want)
		}
	}
	if keys.IsValid(1) || !bytes.Equal(keys.Value(5), []byte("k3")) {
		t.Fatalf("keys: %v", keys)
	}
	// A long key makes the key column share the buffer, renumbered.
	recs[0].key = bytes.Repeat([]byte("k"), 20)
	rec2, _, err := decodeAll(t, mem, nil, Fetch{RecordBatches: packed}, Fetch{FetchOffset: 3, RecordBatches: tbatch{base: 3, recs: recs}.build()})
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()
	keys = rec2.Column(3).(*array.BinaryView)
	if n := len(keys.Data().Buffers()) - 2; n != 1 {
		t.Fatalf("key column with one long key holds %d data buffers, want 1", n)
	}
	if got := keys.Value(3); !bytes.Equal(got, recs[0].key) {
		t.Fatalf("long key: %q", got)
	}
}

// With a ValueDecoder, keys longer than 12 bytes are copied at Flush into
// one buffer of their own: the batch keeps no input or decompression
// buffer alive.
func TestFlushCopiesKeysWithValueDecoder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vd, err := NewJSONDecoder(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	recs := []trec{
		{key: []byte("a-key-longer-than-twelve"), val: []byte(`{"id":1}`)},
		{key: []byte("short"), val: []byte(`{"id":2}`)},
		{key: nil, val: []byte(`{"id":3}`)},
		{key: []byte("another-long-key"), val: []byte(`{"id":4}`)},
	}
	packed := tbatch{attrs: codecSnappy, recs: recs, compress: xerial}.build()
	rec, _, err := decodeAll(t, mem, []Option{WithValueDecoder(vd)}, Fetch{RecordBatches: packed})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	keys := rec.Column(3).(*array.BinaryView)
	bufs := keys.Data().Buffers()[2:]
	if len(bufs) != 1 || bufs[0].Len() != len(recs[0].key)+len(recs[3].key) {
		t.Fatalf("key data buffers: %d, want one holding just the two long keys", len(bufs))
	}
	for i, r := range recs {
		if got := keys.Value(i); !bytes.Equal(got, r.key) || keys.IsNull(i) != (r.key == nil) {
			t.Fatalf("row %d: key %q, want %q", i, got, r.key)
		}
	}
}
