package delta

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Delta has no view types. Top-level binary_view and string_view columns
// (the Kafka source's key and raw value) are stored as binary and string:
// the values are copied once into contiguous buffers, and the table's
// schema is the stored one, so a pipeline can send either form.

// storable returns rec with its top-level view columns copied into binary
// and string columns from mem, or rec Retained when it has none. The
// caller releases the result.
func storable(mem memory.Allocator, rec arrow.RecordBatch) arrow.RecordBatch {
	sc := rec.Schema()
	var fs []arrow.Field
	for i, f := range sc.Fields() {
		var t arrow.DataType
		switch f.Type.ID() {
		case arrow.BINARY_VIEW:
			t = arrow.BinaryTypes.Binary
		case arrow.STRING_VIEW:
			t = arrow.BinaryTypes.String
		default:
			continue
		}
		if fs == nil {
			fs = sc.Fields()
		}
		fs[i].Type = t
	}
	if fs == nil {
		rec.Retain()
		return rec
	}
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		switch v := c.(type) {
		case *array.BinaryView:
			b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
			copyViews(b, v.Len(), v.IsNull, v.ValueLen, func(i int) { b.Append(v.Value(i)) })
			cols[i] = b.NewArray()
			b.Release()
		case *array.StringView:
			b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.String)
			copyViews(b, v.Len(), v.IsNull, v.ValueLen, func(i int) { b.AppendString(v.Value(i)) })
			cols[i] = b.NewArray()
			b.Release()
		default:
			c.Retain()
			cols[i] = c
		}
	}
	md := sc.Metadata()
	out := array.NewRecordBatch(arrow.NewSchema(fs, &md), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

func copyViews(b *array.BinaryBuilder, n int, isNull func(int) bool, valueLen func(int) int, appendValue func(int)) {
	total := 0
	for i := range n {
		total += valueLen(i)
	}
	b.Reserve(n)
	b.ReserveData(total)
	for i := range n {
		if isNull(i) {
			b.AppendNull()
		} else {
			appendValue(i)
		}
	}
}
