// Package viewcopy copies the top-level view columns of a record batch
// (binary_view, string_view) into plain binary and string columns.
//
// Two places need it. Parquet has no view types, so the lake sinks store a
// view column as its plain counterpart (internal/parquetw). And Flight's IPC
// writer sends a view column's data buffers whole, so a batch whose views
// point into much larger buffers (the Kafka source's key and value point
// into whole fetch responses) is compacted before it is sent
// (flightsrc.Server). It depends on Arrow only, so both sides may import it.
package viewcopy

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Type maps a view type to its plain counterpart (binary_view to binary,
// string_view to string); other types are returned as they are.
func Type(dt arrow.DataType) arrow.DataType {
	switch dt.ID() {
	case arrow.BINARY_VIEW:
		return arrow.BinaryTypes.Binary
	case arrow.STRING_VIEW:
		return arrow.BinaryTypes.String
	}
	return dt
}

// Schema is sc with Type applied to its top-level fields; sc itself (the
// same pointer) when nothing changes, which is how Copy knows there is
// nothing to copy. Nested view columns are left as they are.
func Schema(sc *arrow.Schema) *arrow.Schema {
	var fs []arrow.Field
	for i, f := range sc.Fields() {
		if t := Type(f.Type); t != f.Type {
			if fs == nil {
				fs = sc.Fields()
			}
			fs[i].Type = t
		}
	}
	if fs == nil {
		return sc
	}
	md := sc.Metadata()
	return arrow.NewSchema(fs, &md)
}

// Copy returns rec with its top-level view columns copied from mem (nil:
// the default allocator) into their plain types, as a new batch of schema
// sc (Schema of rec's schema); or rec itself, Retained, when sc is rec's
// own schema. Other columns are shared, not copied. The caller releases the
// result; rec is not released.
func Copy(mem memory.Allocator, rec arrow.RecordBatch, sc *arrow.Schema) arrow.RecordBatch {
	if sc == rec.Schema() {
		rec.Retain()
		return rec
	}
	if mem == nil {
		mem = memory.DefaultAllocator
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
	out := array.NewRecordBatch(sc, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

// copyViews sizes b once for all n values, then appends them.
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
