package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/parquetw"
)

// widens reports whether a column of type from is stored, without loss,
// as the Arrow type to that its Iceberg type reads back as.
func widens(from, to arrow.DataType) bool {
	switch from.ID() {
	case arrow.INT8, arrow.INT16, arrow.UINT8, arrow.UINT16:
		return to.ID() == arrow.INT32
	case arrow.UINT32:
		return to.ID() == arrow.INT64
	case arrow.LARGE_STRING:
		return to.ID() == arrow.STRING
	case arrow.LARGE_BINARY:
		return to.ID() == arrow.BINARY
	case arrow.TIMESTAMP:
		f, t := from.(*arrow.TimestampType), to.(*arrow.TimestampType)
		return (f.Unit == arrow.Second || f.Unit == arrow.Millisecond) && t.Unit == arrow.Microsecond && f.TimeZone == t.TimeZone
	}
	return false
}

// StoredType returns the Iceberg type of an Arrow column of type dt, and
// the Arrow type the sink writes it as: dt itself, or the lossless
// widening Iceberg needs (string and binary views, large strings and
// binaries, int8/int16/uint8/uint16 to int32, uint32 to int64, second and
// millisecond timestamps to microseconds). A type without a lossless
// Iceberg type (uint64, nanosecond timestamps in a format-2 table,
// durations, unions, ...) is an error wrapping flightline.ErrInvalidInput.
func StoredType(name string, dt arrow.DataType) (arrow.DataType, iceberg.Type, error) {
	switch dt.ID() {
	case arrow.BINARY_VIEW:
		dt = arrow.BinaryTypes.Binary
	case arrow.STRING_VIEW:
		dt = arrow.BinaryTypes.String
	case arrow.UINT64:
		return nil, nil, fmt.Errorf("%w: column %q: uint64 has no lossless Iceberg type (long is signed)", flightline.ErrInvalidInput, name)
	}
	// A one-column schema gets nested fields fresh ids (ArrowTypeToIceberg
	// wants them in the field metadata); the table assigns its own.
	isc, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema([]arrow.Field{{Name: name, Type: dt, Nullable: true}}, nil), false)
	var it iceberg.Type
	if err == nil {
		it = isc.Field(0).Type
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: column %q: type %s has no Iceberg type: %v", flightline.ErrInvalidInput, name, dt, err)
	}
	switch it.(type) {
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return nil, nil, fmt.Errorf("%w: column %q: type %s needs a format-3 table; send microseconds", flightline.ErrInvalidInput, name, dt)
	}
	back, err := table.TypeToArrowType(it, false, false)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: column %q: type %s: %v", flightline.ErrInvalidInput, name, dt, err)
	}
	switch {
	case arrow.TypeEqual(back, dt):
		return dt, it, nil
	case widens(dt, back):
		return back, it, nil
	case arrow.IsNested(dt.ID()):
		// Written as sent: iceberg-go maps nested columns by name.
		return dt, it, nil
	}
	return nil, nil, fmt.Errorf("%w: column %q: type %s would read back from Iceberg (%s) as %s", flightline.ErrInvalidInput, name, dt, it, back)
}

// sameIceberg reports whether Iceberg types a and b are the same, nested
// field ids aside.
func sameIceberg(a, b iceberg.Type) bool {
	x, errA := table.TypeToArrowType(a, false, false)
	y, errB := table.TypeToArrowType(b, false, false)
	return errA == nil && errB == nil && arrow.TypeEqual(x, y)
}

// plan checks recs against the table schema sc and returns the columns
// the commit adds (in the order of their first appearance): every column
// on a table without columns (required when not nullable), and new
// nullable columns with evolve. Unmappable types are ErrInvalidInput;
// any other difference is ErrSchemaMismatch.
func plan(sc *iceberg.Schema, recs []arrow.RecordBatch, evolve bool) ([]iceberg.NestedField, error) {
	fresh := sc.NumFields() == 0
	have := map[string]iceberg.NestedField{}
	for _, f := range sc.Fields() {
		have[f.Name] = f
	}
	var adds []iceberg.NestedField
	for _, rec := range recs {
		seen := map[string]bool{}
		for _, f := range rec.Schema().Fields() {
			if seen[f.Name] {
				return nil, fmt.Errorf("%w: column %q appears twice", flightline.ErrInvalidInput, f.Name)
			}
			seen[f.Name] = true
			_, it, err := StoredType(f.Name, f.Type)
			if err != nil {
				return nil, err
			}
			tf, ok := have[f.Name]
			if !ok {
				switch {
				case fresh:
					// The first batch of a new table sets its columns.
				case !evolve:
					return nil, fmt.Errorf("%w: column %q is not in the table (schema evolution is off)", flightline.ErrSchemaMismatch, f.Name)
				case !f.Nullable:
					return nil, fmt.Errorf("%w: new column %q must be nullable to be added", flightline.ErrSchemaMismatch, f.Name)
				}
				nf := iceberg.NestedField{Name: f.Name, Type: it, Required: !f.Nullable}
				adds = append(adds, nf)
				have[f.Name] = nf
				continue
			}
			if !sameIceberg(tf.Type, it) {
				return nil, fmt.Errorf("%w: column %q is %s in the table, %s (%s) in the batch", flightline.ErrSchemaMismatch, f.Name, tf.Type, it, f.Type)
			}
			if tf.Required && f.Nullable {
				return nil, fmt.Errorf("%w: column %q is required in the table, nullable in the batch", flightline.ErrSchemaMismatch, f.Name)
			}
		}
		for name, tf := range have {
			if seen[name] {
				continue
			}
			if tf.Required || !evolve {
				return nil, fmt.Errorf("%w: table column %q is missing from the batch", flightline.ErrSchemaMismatch, name)
			}
		}
		fresh = false
	}
	return adds, nil
}

// storable returns rec with its columns in their stored types
// (StoredType): views copied, widened columns cast. The caller releases
// the result.
func storable(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	rec = parquetw.Storable(mem, rec, parquetw.StoredSchema(rec.Schema()))
	defer rec.Release()
	fields := rec.Schema().Fields()
	cols := make([]arrow.Array, len(fields))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range fields {
		to, _, err := StoredType(f.Name, f.Type)
		if err != nil {
			return nil, err
		}
		if arrow.TypeEqual(to, f.Type) {
			cols[i] = rec.Column(i)
			cols[i].Retain()
			continue
		}
		c, err := compute.CastArray(compute.WithAllocator(ctx, mem), rec.Column(i), compute.SafeCastOptions(to))
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %s to %s: %v", flightline.ErrInvalidInput, f.Name, f.Type, to, err)
		}
		cols[i] = c
		fields[i].Type = to
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
}
