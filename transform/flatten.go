package transform

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
)

// Flatten returns a Func that replaces the struct column named col by
// its fields as top-level columns, in its place (a Kafka batch's decoded
// value: partition, offset, timestamp, key, <value fields...>, headers). A
// null struct makes every field of its row null; all fields are nullable
// when the struct column is, so every batch has the same schema. A field
// named like another column is an error (flightline.ErrInvalidInput), as
// is a batch whose column is missing or not a struct. Field arrays are
// shared, not copied, unless the struct column has nulls: then each field
// gets a validity bitmap from mem (nil: the default allocator). The
// returned batch is the caller's to Release.
func Flatten(col string, mem memory.Allocator) Func {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		sc := rec.Schema()
		vi, err := column(rec, col, "flatten")
		if err != nil {
			return nil, err
		}
		st, ok := sc.Field(vi).Type.(*arrow.StructType)
		if !ok {
			return nil, fmt.Errorf("%w: flatten: column %q is %s, not a struct", flightline.ErrInvalidInput, col, sc.Field(vi).Type)
		}
		val := rec.Column(vi).(*array.Struct)
		var fields []arrow.Field
		var cols []arrow.Array
		defer func() {
			for _, c := range cols {
				c.Release()
			}
		}()
		for i, f := range sc.Fields() {
			if i != vi {
				fields = append(fields, f)
				c := rec.Column(i)
				c.Retain()
				cols = append(cols, c)
				continue
			}
			for j, vf := range st.Fields() {
				if sc.HasField(vf.Name) {
					return nil, fmt.Errorf("%w: flatten: field %q of %q collides with a column", flightline.ErrInvalidInput, vf.Name, col)
				}
				col := structField(mem, val, j)
				// A nullable struct makes every field nullable, whatever
				// this batch holds: the schema stays the same for all.
				vf.Nullable = vf.Nullable || f.Nullable
				fields = append(fields, vf)
				cols = append(cols, col)
			}
		}
		md := sc.Metadata()
		return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
	}
}

// structField returns field j of s as an array of s's length, null
// wherever s is null. The caller releases it.
func structField(mem memory.Allocator, s *array.Struct, j int) arrow.Array {
	// Field already has s's offset and length applied.
	child := s.Field(j)
	if s.NullN() == 0 {
		child.Retain()
		return child
	}
	off, n := s.Data().Offset(), s.Len()
	d := child.Data()
	// The new bitmap keeps the child's offset, so its data buffers are
	// shared as they are.
	co := d.Offset()
	bm := memory.NewResizableBuffer(mem)
	bm.Resize(int(bitutil.BytesForBits(int64(co + n))))
	out := bm.Bytes()
	clear(out)
	sv := s.NullBitmapBytes()
	var cv []byte
	if b := d.Buffers()[0]; b != nil {
		cv = b.Bytes()
	}
	for i := range n {
		if bitutil.BitIsSet(sv, off+i) && (cv == nil || bitutil.BitIsSet(cv, co+i)) {
			bitutil.SetBit(out, co+i)
		}
	}
	bufs := append([]*memory.Buffer{bm}, d.Buffers()[1:]...)
	nd := array.NewData(d.DataType(), n, bufs, d.Children(), array.UnknownNullCount, co)
	bm.Release()
	defer nd.Release()
	return array.MakeFromData(nd)
}
