package adbc

import (
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Plain returns the type a column of type t is ingested as: binary_view and
// string_view become binary and utf8 (drivers of ADBC 1.x take only the
// plain forms), and nested types (struct, list, map) become utf8 holding
// each value as JSON (binary inside as base64), since few databases take
// Arrow's nested types through ADBC. Every other type is itself.
func Plain(t arrow.DataType) arrow.DataType {
	switch t.ID() {
	case arrow.BINARY_VIEW:
		return arrow.BinaryTypes.Binary
	case arrow.STRING_VIEW:
		return arrow.BinaryTypes.String
	case arrow.STRUCT, arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.MAP:
		return arrow.BinaryTypes.String
	}
	return t
}

// Normalize returns rec with every column converted to Plain's type, built
// in mem; when nothing needs converting it returns rec itself, retained.
// The caller releases the result.
func Normalize(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	sc := rec.Schema()
	need := false
	for _, f := range sc.Fields() {
		if !arrow.TypeEqual(Plain(f.Type), f.Type) {
			need = true
			break
		}
	}
	if !need {
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
		fields[i].Type = Plain(f.Type)
		in := rec.Column(i)
		if arrow.TypeEqual(fields[i].Type, f.Type) {
			in.Retain()
			cols[i] = in
			continue
		}
		c, err := plainColumn(in, mem)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols[i] = c
	}
	md := sc.Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
}

func plainColumn(in arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	switch c := in.(type) {
	case *array.BinaryView:
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		defer b.Release()
		b.Reserve(c.Len())
		for i := 0; i < c.Len(); i++ {
			if c.IsNull(i) {
				b.AppendNull()
			} else {
				b.Append(c.Value(i))
			}
		}
		return b.NewArray(), nil
	case *array.StringView:
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Reserve(c.Len())
		for i := 0; i < c.Len(); i++ {
			if c.IsNull(i) {
				b.AppendNull()
			} else {
				b.Append(c.Value(i))
			}
		}
		return b.NewArray(), nil
	}
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(in.Len())
	for i := 0; i < in.Len(); i++ {
		if in.IsNull(i) {
			b.AppendNull()
			continue
		}
		js, err := json.Marshal(in.GetOneForMarshal(i))
		if err != nil {
			return nil, err
		}
		b.Append(string(js))
	}
	return b.NewArray(), nil
}
