package kafkadecode

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Fetch is one partition of a FetchResponse.
type Fetch struct {
	// Partition is written to the partition column and to errors.
	Partition int32
	// FetchOffset is the offset the fetch asked for. Records below it are
	// skipped: brokers return whole batches, which may start earlier.
	FetchOffset int64
	// RecordBatches is the partition's raw records field: concatenated
	// record batches, possibly ending in a partial batch.
	RecordBatches []byte
	// AbortedTransactions is the partition's aborted-transactions list,
	// used under ReadCommitted and ignored otherwise. Order does not matter.
	AbortedTransactions []AbortedTransaction
}

// AbortedTransaction is one entry of a fetch response's aborted list.
type AbortedTransaction struct {
	ProducerID  int64
	FirstOffset int64
}

// Progress reports what one Append consumed.
type Progress struct {
	// NextOffset is the offset to fetch next: one past the last complete
	// batch (including skipped control and aborted batches), or, when
	// Append stopped at a record, that record's offset. It is
	// Fetch.FetchOffset when nothing was consumed.
	NextOffset int64
	// Records is the number of rows appended.
	Records int
	// DeadLetters is the number of records dead-lettered.
	DeadLetters int
	// Batches is the number of complete batches consumed.
	Batches int
	// Truncated reports a partial batch at the end of the input. If
	// Batches is 0 as well, the fetch size is smaller than one batch and
	// the caller must fetch with a larger maximum.
	Truncated bool
}

// Decoder turns raw Kafka record batches into Arrow record batches. Rows
// accumulate across Append calls (of any partitions of the topic) until
// Flush returns them as one record batch.
//
// Key and value columns are BinaryView arrays whose long values point into
// the fetch bytes (UnsafeAppend), a private copy of them (Append), or the
// decompressed payload; nothing is copied per record. Header keys and
// values are copied.
//
// A Decoder is not safe for concurrent use. The record batches it returns
// are independent of it and may be used and released on any goroutine,
// also after the Decoder is released.
type Decoder struct {
	mem    memory.Allocator
	cfg    config
	schema *arrow.Schema
	rec    *recycler
	dz     decompressor
	arena  arena

	partition fixedCol[int32]
	offset    fixedCol[int64]
	ts        fixedCol[int64]
	keyViews  fixedCol[arrow.ViewHeader]
	keyValid  bitCol
	valViews  fixedCol[arrow.ViewHeader]
	valValid  bitCol
	hdrOffs   fixedCol[int32] // rows+1 list offsets
	hkOffs    fixedCol[int32] // header key utf8 offsets
	hkData    bytesCol
	hvOffs    fixedCol[int32] // header value binary offsets
	hvData    bytesCol
	hvValid   bitCol
	rows      int
	dataBufs  []*memory.Buffer // data buffers of the key and value views
	vb        *array.StructBuilder
	badRows   []int // rows of vb to drop at Flush, ascending
	dead      []DeadLetter
	abortQ    []AbortedTransaction
	abortPIDs []int64
	released  bool
}

// NewDecoder returns a Decoder allocating from mem (nil means
// memory.DefaultAllocator). Release it when done.
func NewDecoder(mem memory.Allocator, opts ...Option) (*Decoder, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Decoder{mem: mem, cfg: cfg, rec: newRecycler(mem)}
	d.dz.max = cfg.maxDecompressed
	d.arena.r = d.rec
	var valueType arrow.DataType
	if cfg.value != nil {
		st := cfg.value.Type()
		if st == nil {
			return nil, fmt.Errorf("%w: value decoder has no type", ErrInvalidOption)
		}
		valueType = st
		d.vb = array.NewStructBuilder(mem, st)
	}
	d.schema = Schema(cfg.topic, valueType)
	h := cfg.capacityHint
	// Column buffers come from the recycler as well: they pass to the
	// record batch at Flush and return for reuse when it is released.
	mem = d.rec
	d.partition = fixedCol[int32]{mem: mem, hint: h}
	d.offset = fixedCol[int64]{mem: mem, hint: h}
	d.ts = fixedCol[int64]{mem: mem, hint: h}
	d.keyViews = fixedCol[arrow.ViewHeader]{mem: mem, hint: h}
	d.keyValid = bitCol{mem: mem, hint: h}
	d.valViews = fixedCol[arrow.ViewHeader]{mem: mem, hint: h}
	d.valValid = bitCol{mem: mem, hint: h}
	d.hdrOffs = fixedCol[int32]{mem: mem, hint: h + 1}
	d.hkOffs = fixedCol[int32]{mem: mem}
	d.hvOffs = fixedCol[int32]{mem: mem}
	d.hkData = bytesCol{mem: mem}
	d.hvData = bytesCol{mem: mem}
	d.hvValid = bitCol{mem: mem}
	d.resetOffsets()
	return d, nil
}

func (d *Decoder) resetOffsets() {
	d.hdrOffs.append(0)
	d.hkOffs.append(0)
	d.hvOffs.append(0)
}

// Schema returns the schema of the record batches Flush returns.
func (d *Decoder) Schema() *arrow.Schema { return d.schema }

// Len returns the number of rows appended since the last Flush.
func (d *Decoder) Len() int { return d.rows }

// Append decodes f and appends its records. It copies f.RecordBatches once
// (into a recycled buffer) if any uncompressed value or key is long enough
// to be referenced rather than inlined, so the caller may reuse
// f.RecordBatches as soon as Append returns.
//
// On error, the rows of every batch before the failing one (and, for a
// *RecordError, of the records before the failing record) stay appended,
// and Progress says how far decoding got.
func (d *Decoder) Append(f Fetch) (Progress, error) { return d.append(&f, true) }

// UnsafeAppend is Append without the copy: key and value views of
// uncompressed batches point straight into f.RecordBatches. The caller
// must not modify f.RecordBatches until every record batch returned by the
// following Flush (and every array sliced or retained from it) has been
// released; Release on those arrays does not free it, since the caller
// owns it.
func (d *Decoder) UnsafeAppend(f Fetch) (Progress, error) { return d.append(&f, false) }

// input tracks the data-buffer slots an Append has reserved.
type input struct {
	raw      []byte
	copyIt   bool
	rawIdx   int32 // index in d.dataBufs of the input bytes, or -1
	arenaIdx int32 // index in d.dataBufs of the decompression arena, or -1
}

func (d *Decoder) append(f *Fetch, copyIt bool) (p Progress, err error) {
	if d.released {
		return Progress{NextOffset: f.FetchOffset}, fmt.Errorf("%w: decoder released", ErrInvalidOption)
	}
	p.NextOffset = f.FetchOffset
	raw := f.RecordBatches
	if len(raw) > maxViewOffset {
		return p, fmt.Errorf("%w: fetch of %d bytes exceeds Arrow view offsets", ErrTooLarge, len(raw))
	}
	in := input{raw: raw, copyIt: copyIt, rawIdx: -1, arenaIdx: -1}
	defer d.finishInput(&in)

	d.abortQ, d.abortPIDs = d.abortQ[:0], d.abortPIDs[:0]
	if d.cfg.isolation == ReadCommitted && len(f.AbortedTransactions) > 0 {
		d.abortQ = append(d.abortQ, f.AbortedTransactions...)
		slices.SortFunc(d.abortQ, func(a, b AbortedTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	}

	pos := 0
	for pos < len(raw) {
		rest := raw[pos:]
		if len(rest) < logOverhead+5 {
			p.Truncated = true
			break
		}
		base := int64(binary.BigEndian.Uint64(rest[offBaseOffset:]))
		length := int32(binary.BigEndian.Uint32(rest[offBatchLength:]))
		if magic := int8(rest[offMagic]); magic != 2 {
			if magic == 0 || magic == 1 {
				return p, &LegacyMagicError{Partition: f.Partition, Offset: base, Magic: magic}
			}
			return p, &CorruptBatchError{Partition: f.Partition, BaseOffset: base, Reason: fmt.Sprintf("unknown magic %d", magic)}
		}
		if length < batchHeaderLen-logOverhead {
			return p, &CorruptBatchError{Partition: f.Partition, BaseOffset: base, Reason: fmt.Sprintf("batch length %d below header size", length)}
		}
		total := logOverhead + int(length)
		if total > len(rest) {
			p.Truncated = true
			break
		}
		batch := rest[:total]
		if !d.cfg.skipCRC {
			want := binary.BigEndian.Uint32(batch[offCRC:])
			if got := crc32.Checksum(batch[offAttributes:], castagnoli); got != want {
				return p, &CRCError{Partition: f.Partition, BaseOffset: base, Want: want, Got: got}
			}
		}
		h := readBatchHeader(batch)
		rowsBefore, vbBefore := d.rows, d.vbLen()
		stop, err := d.appendBatch(f, &in, &h, batch, pos, &p)
		if err != nil {
			if stop < 0 { // structural error: roll the whole batch back
				d.truncate(rowsBefore, vbBefore, &p)
			}
			return p, err
		}
		pos += total
		p.Batches++
		if next := h.lastOffset + 1; next > p.NextOffset {
			p.NextOffset = next
		}
	}
	return p, nil
}

func (d *Decoder) vbLen() int {
	if d.vb == nil {
		return 0
	}
	return d.vb.Len()
}

// truncate rolls rows back to n (and value-builder rows from vbFrom on are
// marked for removal), fixing up p.
func (d *Decoder) truncate(n, vbFrom int, p *Progress) {
	p.Records -= d.rows - n
	d.rows = n
	d.partition.truncate(n)
	d.offset.truncate(n)
	d.ts.truncate(n)
	d.keyViews.truncate(n)
	d.keyValid.truncate(n)
	d.valViews.truncate(n)
	d.valValid.truncate(n)
	d.hdrOffs.truncate(n + 1)
	nh := int(d.hdrOffs.vals[n])
	d.hkOffs.truncate(nh + 1)
	d.hvOffs.truncate(nh + 1)
	d.hkData.truncate(int(d.hkOffs.vals[nh]))
	d.hvData.truncate(int(d.hvOffs.vals[nh]))
	d.hvValid.truncate(nh)
	if d.vb != nil {
		for i := vbFrom; i < d.vb.Len(); i++ {
			d.markBad(i)
		}
	}
}

func (d *Decoder) markBad(row int) {
	if k := len(d.badRows); k == 0 || d.badRows[k-1] < row {
		d.badRows = append(d.badRows, row)
	}
}

// finishInput puts the input and arena buffers that rows reference into
// their reserved data-buffer slots.
func (d *Decoder) finishInput(in *input) {
	if in.rawIdx >= 0 {
		if in.copyIt {
			cp := d.rec.Allocate(len(in.raw))
			copy(cp, in.raw)
			d.dataBufs[in.rawIdx] = memory.NewBufferWithAllocator(cp, d.rec)
		} else {
			d.dataBufs[in.rawIdx] = memory.NewBufferBytes(in.raw)
		}
	}
	if in.arenaIdx >= 0 {
		b := d.arena.take()
		if b == nil {
			b = memory.NewBufferBytes(nil)
		}
		d.dataBufs[in.arenaIdx] = b
	} else {
		d.arena.free()
	}
}

func (d *Decoder) reserveDataBuf() int32 {
	d.dataBufs = append(d.dataBufs, nil)
	return int32(len(d.dataBufs) - 1)
}

// appendBatch appends the records of one CRC-checked batch. On a
// structural error it returns stop < 0 and the caller rolls the batch back;
// on a record error (fail-fast or retryable) it returns stop >= 0 and the
// rows before that record stay.
func (d *Decoder) appendBatch(f *Fetch, in *input, h *batchHeader, batch []byte, batchPos int, p *Progress) (int, error) {
	corrupt := func(reason string, err error) (int, error) {
		return -1, &CorruptBatchError{Partition: f.Partition, BaseOffset: h.baseOffset, Reason: reason, Err: err}
	}
	control := h.attributes&attrControl != 0
	transactional := h.attributes&attrTransactional != 0
	if d.cfg.isolation == ReadCommitted {
		for len(d.abortQ) > 0 && d.abortQ[0].FirstOffset <= h.lastOffset {
			if !slices.Contains(d.abortPIDs, d.abortQ[0].ProducerID) {
				d.abortPIDs = append(d.abortPIDs, d.abortQ[0].ProducerID)
			}
			d.abortQ = d.abortQ[1:]
		}
	}
	if h.lastOffset < f.FetchOffset && !control {
		return 0, nil
	}
	if transactional && !control && slices.Contains(d.abortPIDs, h.producerID) {
		return 0, nil // aborted transaction (abortPIDs is empty unless ReadCommitted)
	}
	if h.numRecords < 0 {
		return corrupt(fmt.Sprintf("negative record count %d", h.numRecords), nil)
	}

	recs := batch[batchHeaderLen:]
	bufIdx := in.rawIdx
	bufBase := batchPos + batchHeaderLen
	raw := true
	if codec := int(h.attributes & attrCodecMask); codec != codecNone {
		if in.arenaIdx < 0 {
			in.arenaIdx = d.reserveDataBuf()
		}
		start, err := d.dz.decompress(codec, recs, &d.arena)
		if err != nil {
			if errors.Is(err, errMaxDecompress) {
				return -1, &CorruptBatchError{Partition: f.Partition, BaseOffset: h.baseOffset, Reason: "decompressing", Err: fmt.Errorf("%w: %w", ErrTooLarge, err)}
			}
			return corrupt(fmt.Sprintf("decompressing codec %d", codec), err)
		}
		if len(d.arena.buf) > maxViewOffset {
			return -1, &CorruptBatchError{Partition: f.Partition, BaseOffset: h.baseOffset, Reason: "decompressing", Err: ErrTooLarge}
		}
		recs = d.arena.buf[start:]
		bufIdx, bufBase, raw = in.arenaIdx, start, false
	}

	if control {
		if transactional && len(recs) > 0 && h.numRecords > 0 {
			// A control record's key is int16 version, int16 type
			// (0 abort, 1 commit). An abort ends the producer's
			// aborted transaction.
			if key, ok := firstRecordKey(recs); ok && len(key) >= 4 && binary.BigEndian.Uint16(key[2:]) == 0 {
				if i := slices.Index(d.abortPIDs, h.producerID); i >= 0 {
					d.abortPIDs = slices.Delete(d.abortPIDs, i, i+1)
				}
			}
		}
		return 0, nil
	}

	logAppend := h.attributes&attrLogAppendTime != 0
	var n int32
	for ; len(recs) > 0; n++ {
		if n == h.numRecords {
			return corrupt(fmt.Sprintf("%d bytes after the %d records", len(recs), n), nil)
		}
		l, k := varint(recs)
		if k <= 0 || l < 0 || l > int64(len(recs)-k) {
			return corrupt(fmt.Sprintf("record %d: bad length", n), nil)
		}
		body := recs[k : k+int(l)]
		bodyPos := bufBase + k
		recs = recs[k+int(l):]
		bufBase += k + int(l)
		i := 1 // record attributes, unused
		if len(body) < 1 {
			return corrupt(fmt.Sprintf("record %d: empty", n), nil)
		}
		tsDelta, k1 := varint(body[i:])
		if k1 <= 0 {
			return corrupt(fmt.Sprintf("record %d: bad timestamp delta", n), nil)
		}
		i += k1
		offDelta, k2 := varint(body[i:])
		if k2 <= 0 {
			return corrupt(fmt.Sprintf("record %d: bad offset delta", n), nil)
		}
		i += k2
		keyLen, k3 := varint(body[i:])
		if k3 <= 0 || keyLen < -1 || keyLen > int64(len(body)-i-k3) {
			return corrupt(fmt.Sprintf("record %d: bad key length", n), nil)
		}
		i += k3
		keyAt := i
		if keyLen > 0 {
			i += int(keyLen)
		}
		valLen, k4 := varint(body[i:])
		if k4 <= 0 || valLen < -1 || valLen > int64(len(body)-i-k4) {
			return corrupt(fmt.Sprintf("record %d: bad value length", n), nil)
		}
		i += k4
		valAt := i
		if valLen > 0 {
			i += int(valLen)
		}
		nh, k5 := varint(body[i:])
		if k5 <= 0 || nh < 0 || nh > int64(len(body)-i-k5) {
			return corrupt(fmt.Sprintf("record %d: bad header count", n), nil)
		}
		i += k5
		hdrAt := i
		for j := int64(0); j < nh; j++ {
			hk, a := varint(body[i:])
			if a <= 0 || hk < 0 || hk > int64(len(body)-i-a) {
				return corrupt(fmt.Sprintf("record %d: bad header key length", n), nil)
			}
			i += a + int(hk)
			hv, b := varint(body[i:])
			if b <= 0 || hv < -1 || hv > int64(len(body)-i-b) {
				return corrupt(fmt.Sprintf("record %d: bad header value length", n), nil)
			}
			i += b
			if hv > 0 {
				i += int(hv)
			}
		}
		if i != len(body) {
			return corrupt(fmt.Sprintf("record %d: %d trailing bytes", n, len(body)-i), nil)
		}

		offset := h.baseOffset + offDelta
		if offset < f.FetchOffset {
			continue
		}
		ts := h.baseTimestamp + tsDelta
		if logAppend {
			ts = h.maxTimestamp
		}
		var key, val []byte
		if keyLen >= 0 {
			key = body[keyAt : keyAt+int(keyLen)]
		}
		if valLen >= 0 {
			val = body[valAt : valAt+int(valLen)]
		}

		if d.vb != nil {
			before := d.vb.Len()
			var verr error
			if val == nil {
				d.vb.AppendNull()
			} else {
				verr = d.cfg.value.AppendValue(d.vb, val)
			}
			if d.vb.Len() != before+1 {
				return -1, fmt.Errorf("%w (partition %d, offset %d)", ErrValueDecoderContract, f.Partition, offset)
			}
			if verr != nil {
				d.markBad(before)
				if d.cfg.failFast || IsRetryable(verr) {
					p.NextOffset = offset
					return int(n), &RecordError{Partition: f.Partition, Offset: offset, Err: verr}
				}
				d.dead = append(d.dead, DeadLetter{
					Partition: f.Partition, Offset: offset, Timestamp: ts,
					Key: cloneOrNil(key), Value: cloneOrNil(val),
					Err: &RecordError{Partition: f.Partition, Offset: offset, Err: verr},
				})
				p.DeadLetters++
				continue
			}
		}

		if raw && in.rawIdx < 0 && ((keyLen > arrow.ViewPrefixLen+8) || (d.vb == nil && valLen > arrow.ViewPrefixLen+8)) {
			in.rawIdx = d.reserveDataBuf()
			bufIdx = in.rawIdx
		}
		d.partition.append(f.Partition)
		d.offset.append(offset)
		d.ts.append(ts)
		setView(d.keyViews.next(), key, bufIdx, bodyPos+keyAt)
		d.keyValid.append(key != nil)
		if d.vb == nil {
			setView(d.valViews.next(), val, bufIdx, bodyPos+valAt)
			d.valValid.append(val != nil)
		}
		if nh > 0 {
			d.appendHeaders(body[hdrAt:], int(nh))
		}
		d.hdrOffs.append(int32(d.hkOffs.n - 1))
		d.rows++
		p.Records++
	}
	if n != h.numRecords {
		return corrupt(fmt.Sprintf("batch claims %d records, holds %d", h.numRecords, n), nil)
	}
	return 0, nil
}

// setView writes a BinaryView header for v, which starts at byte off of
// data buffer idx. Values of up to 12 bytes are inlined, as the format
// requires; longer ones reference the buffer.
func setView(h *arrow.ViewHeader, v []byte, idx int32, off int) {
	*h = arrow.ViewHeader{}
	h.SetBytes(v)
	if len(v) > arrow.ViewPrefixLen+8 {
		h.SetIndexOffset(idx, int32(off))
	}
}

// appendHeaders appends n already-validated headers starting at b.
func (d *Decoder) appendHeaders(b []byte, n int) {
	for j := 0; j < n; j++ {
		hk, a := varint(b)
		b = b[a:]
		d.hkData.append(b[:hk])
		b = b[hk:]
		d.hkOffs.append(int32(len(d.hkData.data)))
		hv, c := varint(b)
		b = b[c:]
		if hv >= 0 {
			d.hvData.append(b[:hv])
			b = b[hv:]
		}
		d.hvOffs.append(int32(len(d.hvData.data)))
		d.hvValid.append(hv >= 0)
	}
}

// firstRecordKey returns the key of the first record in recs.
func firstRecordKey(recs []byte) ([]byte, bool) {
	l, k := varint(recs)
	if k <= 0 || l < 1 || l > int64(len(recs)-k) {
		return nil, false
	}
	body := recs[k : k+int(l)]
	i := 1
	for range 2 { // timestamp delta, offset delta
		_, a := varint(body[i:])
		if a <= 0 {
			return nil, false
		}
		i += a
	}
	kl, a := varint(body[i:])
	if a <= 0 || kl < 0 || kl > int64(len(body)-i-a) {
		return nil, false
	}
	i += a
	return body[i : i+int(kl)], true
}

func cloneOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// TakeDeadLetters appends the dead letters collected since the last call to
// dst and forgets them. Dead letters are independent of Flush: take them
// when the pipeline routes them, typically right after Flush.
func (d *Decoder) TakeDeadLetters(dst []DeadLetter) []DeadLetter {
	dst = append(dst, d.dead...)
	clear(d.dead)
	d.dead = d.dead[:0]
	return dst
}
