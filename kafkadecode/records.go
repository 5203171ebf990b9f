package kafkadecode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// appendBatch appends the records of one CRC-checked batch. On a
// structural error it returns stop < 0 and the caller rolls the batch back;
// on a record error (fail-fast or retryable) it returns stop >= 0 and the
// rows before that record stay.
func (d *Decoder) appendBatch(f *Fetch, in *input, h *batchHeader, batch []byte, batchPos int, p *Progress, pp *prepared) (int, error) {
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
		var start, end int
		var err error
		if pp != nil && pp.unpack {
			start, end, err = pp.start, pp.end, pp.err // decompressed by prepare
		} else {
			if in.arenaIdx < 0 {
				in.arenaIdx = d.reserveDataBuf()
			}
			start, err = d.dz.decompress(codec, recs, &d.arena)
			end = len(d.arena.buf)
		}
		if err != nil {
			if errors.Is(err, errMaxDecompress) {
				return -1, &CorruptBatchError{Partition: f.Partition, BaseOffset: h.baseOffset, Reason: "decompressing", Err: fmt.Errorf("%w: %w", ErrTooLarge, err)}
			}
			return corrupt(fmt.Sprintf("decompressing codec %d", codec), err)
		}
		if end > maxViewOffset {
			return -1, &CorruptBatchError{Partition: f.Partition, BaseOffset: h.baseOffset, Reason: "decompressing", Err: ErrTooLarge}
		}
		if pp != nil && pp.unpack {
			recs, bufIdx = d.preparedBytes(pp)
		} else {
			recs, bufIdx = d.arena.buf[start:], in.arenaIdx
		}
		bufBase, raw = start, false
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
