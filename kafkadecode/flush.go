package kafkadecode

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Flush returns the rows appended since the last Flush as one record batch
// with Schema(), and starts a new one. The caller owns the batch and must
// Release it. The batch keeps the data it points into alive: its column
// buffers, decompression buffers and Append's input copies come from the
// Decoder's recycler and return there for reuse when the batch is released
// (or to the allocator, if the Decoder was released first). After
// UnsafeAppend it also points into the caller's fetch bytes, which must
// outlive it. Flush with no rows returns an empty batch.
func (d *Decoder) Flush() (arrow.RecordBatch, error) {
	if d.released {
		return nil, fmt.Errorf("%w: decoder released", ErrInvalidOption)
	}
	n := d.rows
	cols := make([]arrow.Array, 0, 6)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	cols = append(cols,
		fixedArray(arrow.PrimitiveTypes.Int32, n, d.partition.finish()),
		fixedArray(arrow.PrimitiveTypes.Int64, n, d.offset.finish()),
		fixedArray(arrow.FixedWidthTypes.Timestamp_ms, n, d.ts.finish()),
		d.viewArray(n, &d.keyViews, &d.keyValid, d.vb != nil),
	)
	if d.vb == nil {
		cols = append(cols, d.viewArray(n, &d.valViews, &d.valValid, false))
	} else {
		v, err := d.valueArray()
		if err != nil {
			d.headersArray(n).Release()
			d.resetAfterFlush()
			return nil, err
		}
		cols = append(cols, v)
	}
	cols = append(cols, d.headersArray(n))
	d.resetAfterFlush()
	return array.NewRecordBatch(d.schema, cols, int64(n)), nil
}

func (d *Decoder) resetAfterFlush() {
	for _, b := range d.dataBufs {
		b.Release()
	}
	clear(d.dataBufs)
	d.dataBufs = d.dataBufs[:0]
	d.badRows = d.badRows[:0]
	d.rows = 0
	d.keyValid.release()
	d.valValid.release()
	d.valViews.release()
	d.resetOffsets()
}

func fixedArray(dt arrow.DataType, n int, buf *memory.Buffer) arrow.Array {
	defer buf.Release()
	data := array.NewData(dt, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// viewArray finishes a binary_view column. It attaches only the data
// buffers that its non-inline views point into, renumbering the views, so
// a column whose values are all inline (short keys, null keys) keeps no
// fetch or decompression buffer alive: with a ValueDecoder the raw bytes
// are then freed as soon as the batch is flushed.
//
// With copyOut the non-inline values are copied into one new buffer
// instead: the key column does that when a ValueDecoder decoded the values,
// so that keys longer than 12 bytes do not pin whole fetch or
// decompression buffers of which nothing else is used.
func (d *Decoder) viewArray(n int, views *fixedCol[arrow.ViewHeader], valid *bitCol, copyOut bool) arrow.Array {
	bufs := make([]*memory.Buffer, 2, 2+len(d.dataBufs))
	if copyOut {
		size := 0
		for i := range views.vals[:n] {
			if v := &views.vals[i]; !v.IsInline() {
				size += v.Len()
			}
		}
		if size > 0 {
			out := d.rec.Allocate(size)
			at := 0
			for i := range views.vals[:n] {
				v := &views.vals[i]
				if v.IsInline() {
					continue
				}
				src := d.dataBufs[v.BufferIndex()].Bytes()
				copy(out[at:], src[v.BufferOffset():int(v.BufferOffset())+v.Len()])
				v.SetIndexOffset(0, int32(at))
				at += v.Len()
			}
			bufs = append(bufs, memory.NewBufferWithAllocator(out, d.rec))
			defer bufs[2].Release() // the array holds its own reference
		}
		return d.finishView(n, views, valid, bufs)
	}
	d.remap = slices.Grow(d.remap[:0], len(d.dataBufs))[:len(d.dataBufs)]
	for i := range d.remap {
		d.remap[i] = -1
	}
	for i := range views.vals[:n] {
		v := &views.vals[i]
		if v.IsInline() {
			continue
		}
		old := v.BufferIndex()
		if d.remap[old] < 0 {
			d.remap[old] = int32(len(bufs) - 2)
			bufs = append(bufs, d.dataBufs[old])
		}
		v.SetIndexOffset(d.remap[old], v.BufferOffset())
	}
	return d.finishView(n, views, valid, bufs)
}

// finishView builds the view column with data buffers bufs[2:].
func (d *Decoder) finishView(n int, views *fixedCol[arrow.ViewHeader], valid *bitCol, bufs []*memory.Buffer) arrow.Array {
	vb := views.finish()
	bitmap, nulls := valid.finish()
	bufs[0], bufs[1] = bitmap, vb
	data := array.NewData(arrow.BinaryTypes.BinaryView, n, bufs, nil, nulls, 0)
	vb.Release()
	if bitmap != nil {
		bitmap.Release()
	}
	defer data.Release()
	return array.NewBinaryViewData(data)
}

func (d *Decoder) headersArray(n int) arrow.Array {
	nh := d.hkOffs.n - 1
	hkOffs, hkData := d.hkOffs.finish(), d.hkData.finish()
	hvOffs, hvData := d.hvOffs.finish(), d.hvData.finish()
	hvBits, hvNulls := d.hvValid.finish()
	listOffs := d.hdrOffs.finish()
	keys := array.NewData(arrow.BinaryTypes.String, nh, []*memory.Buffer{nil, hkOffs, hkData}, nil, 0, 0)
	vals := array.NewData(arrow.BinaryTypes.Binary, nh, []*memory.Buffer{hvBits, hvOffs, hvData}, nil, hvNulls, 0)
	st := array.NewData(HeaderType, nh, []*memory.Buffer{nil}, []arrow.ArrayData{keys, vals}, 0, 0)
	list := array.NewData(arrow.ListOfNonNullable(HeaderType), n, []*memory.Buffer{nil, listOffs}, []arrow.ArrayData{st}, 0, 0)
	for _, b := range []*memory.Buffer{hkOffs, hkData, hvOffs, hvData, hvBits, listOffs} {
		if b != nil {
			b.Release()
		}
	}
	keys.Release()
	vals.Release()
	st.Release()
	defer list.Release()
	return array.NewListData(list)
}

// valueArray finishes the value struct column, dropping the rows of records
// that failed to decode.
func (d *Decoder) valueArray() (_ arrow.Array, err error) {
	defer func() {
		// arrow-go builders panic on some invalid states (a null item in a
		// non-nullable map); a ValueDecoder bug must not crash the pipeline.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: building the value column: %v", ErrValueDecoderContract, r)
		}
	}()
	arr := d.vb.NewArray()
	if len(d.badRows) == 0 {
		return arr, nil
	}
	defer arr.Release()
	parts := make([]arrow.Array, 0, len(d.badRows)+1)
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	start := 0
	for _, bad := range d.badRows {
		if bad > start {
			parts = append(parts, array.NewSlice(arr, int64(start), int64(bad)))
		}
		start = bad + 1
	}
	if start < arr.Len() {
		parts = append(parts, array.NewSlice(arr, int64(start), int64(arr.Len())))
	}
	if len(parts) == 0 {
		return array.NewSlice(arr, 0, 0), nil
	}
	out, err := array.Concatenate(parts, d.mem)
	if err != nil {
		return nil, fmt.Errorf("kafkadecode: dropping bad rows: %w", err)
	}
	return out, nil
}

// Release frees the Decoder's buffers and rows not yet flushed. Record
// batches already returned stay valid. The Decoder must not be used after.
func (d *Decoder) Release() {
	if d.released {
		return
	}
	d.released = true
	for _, b := range d.dataBufs {
		if b != nil {
			b.Release()
		}
	}
	d.dataBufs = nil
	for _, c := range []interface{ release() }{
		&d.partition, &d.offset, &d.ts, &d.keyViews, &d.keyValid, &d.valViews, &d.valValid,
		&d.hdrOffs, &d.hkOffs, &d.hkData, &d.hvOffs, &d.hvData, &d.hvValid,
	} {
		c.release()
	}
	if d.vb != nil {
		d.vb.Release()
	}
	d.arena.free()
	d.dz.close()
	d.releaseWorkers()
	d.rec.close()
}
