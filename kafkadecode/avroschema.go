package kafkadecode

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hamba/avro/v2"
)

// parseAvro parses an Avro schema with a private name cache, so schemas
// from different sources never see each other's named types.
func parseAvro(schema string) (avro.Schema, error) {
	s, err := avro.ParseBytesWithCache([]byte(schema), "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("%w: parsing Avro schema: %w", ErrInvalidOption, err)
	}
	return s, nil
}

// SchemaFromAvro converts an Avro record schema to an Arrow schema, with
// the mapping the AvroDecoder uses: record → struct, ["null", T] unions →
// nullable T, array → list, map → map<utf8, T> (items nullable), enum → utf8 (the symbol),
// fixed → fixed_size_binary, bytes → binary, string and uuid → utf8, int →
// int32, long → int64, float → float32, double → float64, date → date32,
// time-millis → time32[ms], time-micros → time64[us], timestamp-millis/
// -micros → timestamp[ms/us, UTC], local-timestamp-* → timestamp without a
// zone, decimal (bytes or fixed) → decimal128 (precision ≤ 38). Other
// unions and the duration logical type are unsupported. Fields are
// non-nullable unless their type is a union with null.
func SchemaFromAvro(schema string) (*arrow.Schema, error) {
	s, err := parseAvro(schema)
	if err != nil {
		return nil, err
	}
	st, err := avroRecordType(s)
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(st.Fields(), nil), nil
}

func avroRecordType(s avro.Schema) (*arrow.StructType, error) {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	rs, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: top-level Avro schema must be a record, got %s", ErrUnsupportedType, s.Type())
	}
	dt, _, err := avroArrowType(rs, 0)
	if err != nil {
		return nil, err
	}
	return dt.(*arrow.StructType), nil
}

// avroArrowType maps an Avro schema to an Arrow type and nullability.
func avroArrowType(s avro.Schema, depth int) (arrow.DataType, bool, error) {
	if depth > 64 {
		return nil, false, fmt.Errorf("%w: Avro schema nested deeper than 64 (recursive?)", ErrUnsupportedType)
	}
	switch t := s.(type) {
	case *avro.RefSchema:
		return avroArrowType(t.Schema(), depth+1)
	case *avro.UnionSchema:
		inner, ok := nullableBranch(t)
		if !ok {
			return nil, false, fmt.Errorf("%w: Avro union %s (only [null, T] unions map to Arrow)", ErrUnsupportedType, t)
		}
		dt, _, err := avroArrowType(inner, depth+1)
		return dt, true, err
	case *avro.RecordSchema:
		fs := make([]arrow.Field, 0, len(t.Fields()))
		for _, f := range t.Fields() {
			dt, nullable, err := avroArrowType(f.Type(), depth+1)
			if err != nil {
				return nil, false, fmt.Errorf("field %s: %w", f.Name(), err)
			}
			fs = append(fs, arrow.Field{Name: f.Name(), Type: dt, Nullable: nullable})
		}
		return arrow.StructOf(fs...), false, nil
	case *avro.ArraySchema:
		dt, nullable, err := avroArrowType(t.Items(), depth+1)
		if err != nil {
			return nil, false, err
		}
		return arrow.ListOfField(arrow.Field{Name: "item", Type: dt, Nullable: nullable}), false, nil
	case *avro.MapSchema:
		dt, _, err := avroArrowType(t.Values(), depth+1)
		if err != nil {
			return nil, false, err
		}
		// Items are always nullable: arrow-go's MapBuilder panics on a
		// null item otherwise, and failed records leave nulls behind
		// until Flush drops their rows.
		m := arrow.MapOf(arrow.BinaryTypes.String, dt)
		m.SetItemNullable(true)
		return m, false, nil
	case *avro.EnumSchema:
		return arrow.BinaryTypes.String, false, nil
	case *avro.FixedSchema:
		if l, ok := t.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimalType(l)
		}
		if t.Logical() != nil && t.Logical().Type() == avro.Duration {
			return nil, false, fmt.Errorf("%w: Avro duration", ErrUnsupportedType)
		}
		return &arrow.FixedSizeBinaryType{ByteWidth: t.Size()}, false, nil
	case *avro.NullSchema:
		return arrow.Null, true, nil
	case *avro.PrimitiveSchema:
		var logical avro.LogicalType
		if t.Logical() != nil {
			logical = t.Logical().Type()
		}
		switch t.Type() {
		case avro.Boolean:
			return arrow.FixedWidthTypes.Boolean, false, nil
		case avro.Int:
			switch logical {
			case avro.Date:
				return arrow.FixedWidthTypes.Date32, false, nil
			case avro.TimeMillis:
				return arrow.FixedWidthTypes.Time32ms, false, nil
			}
			return arrow.PrimitiveTypes.Int32, false, nil
		case avro.Long:
			switch logical {
			case avro.TimestampMillis:
				return arrow.FixedWidthTypes.Timestamp_ms, false, nil
			case avro.TimestampMicros:
				return arrow.FixedWidthTypes.Timestamp_us, false, nil
			case avro.LocalTimestampMillis:
				return &arrow.TimestampType{Unit: arrow.Millisecond}, false, nil
			case avro.LocalTimestampMicros:
				return &arrow.TimestampType{Unit: arrow.Microsecond}, false, nil
			case avro.TimeMicros:
				return arrow.FixedWidthTypes.Time64us, false, nil
			}
			return arrow.PrimitiveTypes.Int64, false, nil
		case avro.Float:
			return arrow.PrimitiveTypes.Float32, false, nil
		case avro.Double:
			return arrow.PrimitiveTypes.Float64, false, nil
		case avro.Bytes:
			if l, ok := t.Logical().(*avro.DecimalLogicalSchema); ok {
				return decimalType(l)
			}
			return arrow.BinaryTypes.Binary, false, nil
		case avro.String:
			return arrow.BinaryTypes.String, false, nil
		}
	}
	return nil, false, fmt.Errorf("%w: Avro type %s", ErrUnsupportedType, s.Type())
}

func decimalType(l *avro.DecimalLogicalSchema) (arrow.DataType, bool, error) {
	if l.Precision() < 1 || l.Precision() > 38 {
		return nil, false, fmt.Errorf("%w: Avro decimal precision %d (max 38)", ErrUnsupportedType, l.Precision())
	}
	return &arrow.Decimal128Type{Precision: int32(l.Precision()), Scale: int32(l.Scale())}, false, nil
}

// nullableBranch returns T of a [null, T] or [T, null] union.
func nullableBranch(u *avro.UnionSchema) (avro.Schema, bool) {
	ts := u.Types()
	if len(ts) != 2 {
		return nil, false
	}
	if ts[0].Type() == avro.Null && ts[1].Type() != avro.Null {
		return ts[1], true
	}
	if ts[1].Type() == avro.Null && ts[0].Type() != avro.Null {
		return ts[0], true
	}
	return nil, false
}
