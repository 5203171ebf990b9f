package kafka

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/coordinator"
)

// BinaryColumns returns a coordinator.Transform that rewrites the
// binary_view columns of a batch (the raw key and value) as plain binary,
// for sinks whose type map has no view types (Delta Lake, Parquet before
// format 2.10). It copies those columns once, into buffers from mem (nil:
// the default allocator); other columns are shared. Batches without view
// columns pass through unchanged.
func BinaryColumns(mem memory.Allocator) coordinator.Transform {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		sc := rec.Schema()
		views := false
		for _, f := range sc.Fields() {
			if f.Type.ID() == arrow.BINARY_VIEW {
				views = true
			}
		}
		if !views {
			rec.Retain()
			return rec, nil
		}
		fields := make([]arrow.Field, sc.NumFields())
		cols := make([]arrow.Array, sc.NumFields())
		defer func() {
			for _, c := range cols {
				if c != nil {
					c.Release()
				}
			}
		}()
		for i, f := range sc.Fields() {
			fields[i] = f
			col := rec.Column(i)
			if f.Type.ID() != arrow.BINARY_VIEW {
				col.Retain()
				cols[i] = col
				continue
			}
			fields[i].Type = arrow.BinaryTypes.Binary
			v := col.(*array.BinaryView)
			b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
			n, size := v.Len(), 0
			for j := range n {
				size += v.ValueLen(j)
			}
			b.Reserve(n)
			b.ReserveData(size)
			for j := range n {
				if v.IsNull(j) {
					b.AppendNull()
				} else {
					b.Append(v.Value(j))
				}
			}
			cols[i] = b.NewArray()
			b.Release()
		}
		md := sc.Metadata()
		return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
	}
}
