package iceberg

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/flightline/flightline"
)

// IcebergType returns the Iceberg type an Arrow column of type dt is
// stored as, or an error wrapping flightline.ErrInvalidInput when Iceberg
// cannot keep it exactly: no Iceberg type, or one that reads back as
// another Arrow type (int8, uint32, large_string, nanosecond timestamps
// in a format-2 table, ...).
func IcebergType(name string, dt arrow.DataType) (iceberg.Type, error) {
	it, err := table.ArrowTypeToIceberg(dt, false)
	if err != nil {
		return nil, fmt.Errorf("%w: column %q: type %s has no Iceberg type: %v", flightline.ErrInvalidInput, name, dt, err)
	}
	switch it.(type) {
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return nil, fmt.Errorf("%w: column %q: type %s needs a format-3 table; send microseconds", flightline.ErrInvalidInput, name, dt)
	}
	back, err := table.TypeToArrowType(it, false, false)
	if err != nil || !arrow.TypeEqual(back, dt) {
		return nil, fmt.Errorf("%w: column %q: type %s would read back from Iceberg (%s) as %v", flightline.ErrInvalidInput, name, dt, it, back)
	}
	return it, nil
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
			it, err := IcebergType(f.Name, f.Type)
			if err != nil {
				return nil, err
			}
			tf, ok := have[f.Name]
			if !ok {
				switch {
				case fresh && len(adds) == len(have):
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
			if want, err := table.TypeToArrowType(tf.Type, false, false); err != nil || !arrow.TypeEqual(want, f.Type) {
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
