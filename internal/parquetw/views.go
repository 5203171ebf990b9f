package parquetw

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Parquet has no view types. Top-level binary_view and string_view columns
// (the Kafka source's key and raw value) are stored as binary and string:
// the values are copied once into contiguous buffers. Sinks that write
// Parquet treat StoredSchema as the schema of what they store.

// StoredType maps a column type to the type its Parquet column has.
func StoredType(dt arrow.DataType) arrow.DataType {
	switch dt.ID() {
	case arrow.BINARY_VIEW:
		return arrow.BinaryTypes.Binary
	case arrow.STRING_VIEW:
		return arrow.BinaryTypes.String
	}
	return dt
}

// StoredSchema is sc with StoredType applied to its top-level fields; sc
// itself (the same pointer) when nothing changes.
func StoredSchema(sc *arrow.Schema) *arrow.Schema {
	var fs []arrow.Field
	for i, f := range sc.Fields() {
		if t := StoredType(f.Type); t != f.Type {
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

// Storable returns rec with its top-level view columns copied from mem into
// their stored types, as a new batch of schema sc (StoredSchema of rec's),
// or rec Retained when sc is rec's own schema. The caller releases the
// result.
func Storable(mem memory.Allocator, rec arrow.RecordBatch, sc *arrow.Schema) arrow.RecordBatch {
	if sc == rec.Schema() {
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
	out := array.NewRecordBatch(sc, cols, rec.NumRows())
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
