package kafka

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// trimmedSlice returns rows [i, j) of rec. Its binary_view columns hold
// only the data buffers those rows point into (their views are copied into
// a new buffer from mem and renumbered); other columns are plain slices.
// The caller owns the result.
//
// Why: a plain slice keeps every data buffer of rec alive, and the carried
// rows of a partition are re-joined with its next flush by
// array.Concatenate, which keeps every data buffer of both sides. Carrying
// plain slices therefore chained every fetch (and decompression) buffer a
// partition ever read into the carry: the source's memory grew with the
// stream. A trimmed carry holds the buffers of its own rows only, which is
// at most the fetches those rows came from.
func trimmedSlice(rec arrow.RecordBatch, i, j int64, mem memory.Allocator) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for k, c := range rec.Columns() {
		if c.DataType().ID() == arrow.BINARY_VIEW {
			cols[k] = trimmedViews(c.Data(), i, j, mem)
		} else {
			cols[k] = array.NewSlice(c, i, j)
		}
	}
	return array.NewRecordBatch(rec.Schema(), cols, j-i)
}

func trimmedViews(src arrow.ArrayData, i, j int64, mem memory.Allocator) arrow.Array {
	n := int(j - i)
	off := src.Offset() + int(i)
	sbufs := src.Buffers()
	views := arrow.ViewHeaderTraits.CastFromBytes(sbufs[1].Bytes())[off : off+n]

	vb := memory.NewResizableBuffer(mem)
	vb.Resize(arrow.ViewHeaderTraits.BytesRequired(n))
	out := arrow.ViewHeaderTraits.CastFromBytes(vb.Bytes())
	bufs := []*memory.Buffer{nil, vb}
	remap := map[int32]int32{}
	for k := range views {
		out[k] = views[k]
		v := &out[k]
		if v.IsInline() {
			continue
		}
		old := v.BufferIndex()
		idx, ok := remap[old]
		if !ok {
			idx = int32(len(bufs) - 2)
			remap[old] = idx
			bufs = append(bufs, sbufs[2+old])
		}
		v.SetIndexOffset(idx, v.BufferOffset())
	}
	nulls := 0
	if sbufs[0] != nil && src.NullN() > 0 {
		bm := memory.NewResizableBuffer(mem)
		bm.Resize(int(bitutil.BytesForBits(int64(n))))
		bitutil.CopyBitmap(sbufs[0].Bytes(), off, n, bm.Bytes(), 0)
		nulls = n - bitutil.CountSetBits(bm.Bytes(), 0, n)
		if nulls > 0 {
			bufs[0] = bm
		} else {
			bm.Release()
		}
	}
	data := array.NewData(arrow.BinaryTypes.BinaryView, n, bufs, nil, nulls, 0)
	vb.Release()
	if bufs[0] != nil {
		bufs[0].Release()
	}
	defer data.Release()
	return array.MakeFromData(data)
}
