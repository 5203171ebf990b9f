package kafkadecode

import (
	"cmp"
	"encoding/binary"
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
	// Continues says RecordBatches go on where the previous Append of this
	// Decoder stopped, in the same fetch response (a response appended in
	// pieces, or resumed after a dead-lettered batch). The aborted
	// transactions then carry over from that Append, which knows which of
	// them already ended, and AbortedTransactions is ignored. Giving the
	// response's whole list to a later piece instead would restart every
	// aborted transaction whose abort marker an earlier piece consumed, and
	// drop the producer's committed batches up to its next abort marker.
	Continues bool
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
// decompressed payload; nothing is copied per record while appending.
// Header keys and values are copied; with a ValueDecoder, keys longer than
// 12 bytes are copied once at Flush (see the package documentation).
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
	remap     []int32          // Flush: dataBufs index -> index in one column
	vb        *array.StructBuilder
	badRows   []int // rows of vb to drop at Flush, ascending
	dead      []DeadLetter
	abortQ    []AbortedTransaction
	abortPIDs []int64
	workers   []*worker // parallel decompression (parallel.go)
	par       par
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
	d := &Decoder{mem: mem, cfg: cfg, rec: newRecycler(mem, cfg.maxParked)}
	d.dz.max = cfg.maxDecompressed
	d.dz.verify = cfg.skipCRC
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

	if f.Continues {
		// abortQ and abortPIDs stand as the previous Append left them.
	} else if d.abortQ, d.abortPIDs = d.abortQ[:0], d.abortPIDs[:0]; d.cfg.isolation == ReadCommitted && len(f.AbortedTransactions) > 0 {
		d.abortQ = append(d.abortQ, f.AbortedTransactions...)
		slices.SortFunc(d.abortQ, func(a, b AbortedTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	}

	prep, pi := d.prepare(f), 0
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
		var pp *prepared // this batch's result of the parallel pass
		if pi < len(prep) && prep[pi].pos == pos {
			d.await(pi)
			pp = &prep[pi]
			pi++
		}
		if !d.cfg.skipCRC && (pp == nil || !pp.crcOK) {
			want := binary.BigEndian.Uint32(batch[offCRC:])
			if got := crc32.Checksum(batch[offAttributes:], castagnoli); got != want {
				return p, &CRCError{Partition: f.Partition, BaseOffset: base, Want: want, Got: got}
			}
		}
		h := readBatchHeader(batch)
		rowsBefore, vbBefore := d.rows, d.vbLen()
		stop, err := d.appendBatch(f, &in, &h, batch, pos, &p, pp)
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
	d.finishWorkers()
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

// TakeDeadLetters appends the dead letters collected since the last call to
// dst and forgets them. Dead letters are independent of Flush: take them
// when the pipeline routes them, typically right after Flush.
func (d *Decoder) TakeDeadLetters(dst []DeadLetter) []DeadLetter {
	dst = append(dst, d.dead...)
	clear(d.dead)
	d.dead = d.dead[:0]
	return dst
}
