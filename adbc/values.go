package adbc

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
)

// TimestampArg binds a timestamp as a parameter of type Type (the type of
// the column it is compared with: with or without a time zone, and its
// unit). A plain time.Time binds as timestamp[us, UTC].
type TimestampArg struct {
	Time time.Time
	Type *arrow.TimestampType
}

// argsRecord builds the one-row batch that binds args to placeholders.
func argsRecord(mem memory.Allocator, args []any) (arrow.RecordBatch, error) {
	fields := make([]arrow.Field, len(args))
	for i, a := range args {
		var t arrow.DataType
		switch a.(type) {
		case string:
			t = arrow.BinaryTypes.String
		case []byte:
			t = arrow.BinaryTypes.Binary
		case int64, int:
			t = arrow.PrimitiveTypes.Int64
		case float64:
			t = arrow.PrimitiveTypes.Float64
		case bool:
			t = arrow.FixedWidthTypes.Boolean
		case TimestampArg:
			t = a.(TimestampArg).Type
		case time.Time:
			t = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
		case nil:
			t = arrow.Null
		default:
			return nil, fmt.Errorf("%w: adbc: cannot bind a %T", flightline.ErrInvalidInput, a)
		}
		fields[i] = arrow.Field{Name: "p" + strconv.Itoa(i+1), Type: t, Nullable: true}
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i, a := range args {
		switch v := a.(type) {
		case string:
			b.Field(i).(*array.StringBuilder).Append(v)
		case []byte:
			if v == nil {
				b.Field(i).AppendNull()
			} else {
				b.Field(i).(*array.BinaryBuilder).Append(v)
			}
		case int64:
			b.Field(i).(*array.Int64Builder).Append(v)
		case int:
			b.Field(i).(*array.Int64Builder).Append(int64(v))
		case float64:
			b.Field(i).(*array.Float64Builder).Append(v)
		case bool:
			b.Field(i).(*array.BooleanBuilder).Append(v)
		case TimestampArg:
			ts, err := arrow.TimestampFromTime(v.Time, v.Type.Unit)
			if err != nil {
				return nil, fmt.Errorf("%w: adbc: bind %v: %v", flightline.ErrInvalidInput, v.Time, err)
			}
			b.Field(i).(*array.TimestampBuilder).Append(ts)
		case time.Time:
			ts, err := arrow.TimestampFromTime(v, arrow.Microsecond)
			if err != nil {
				return nil, fmt.Errorf("%w: adbc: bind %v: %v", flightline.ErrInvalidInput, v, err)
			}
			b.Field(i).(*array.TimestampBuilder).Append(ts)
		case nil:
			b.Field(i).AppendNull()
		}
	}
	return b.NewRecordBatch(), nil
}

// Value returns row i of a as a Go value: int64 (every integer type, and
// decimals of scale 0 such as Snowflake's NUMBER(38,0)), float64, string,
// []byte (a copy), bool, time.Time in UTC (timestamps; one without a time
// zone is its wall clock read as UTC), or nil for NULL. Other types fail
// with ErrSchemaMismatch.
func Value(a arrow.Array, i int) (any, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	switch c := a.(type) {
	case *array.Int8:
		return int64(c.Value(i)), nil
	case *array.Int16:
		return int64(c.Value(i)), nil
	case *array.Int32:
		return int64(c.Value(i)), nil
	case *array.Int64:
		return c.Value(i), nil
	case *array.Uint8:
		return int64(c.Value(i)), nil
	case *array.Uint16:
		return int64(c.Value(i)), nil
	case *array.Uint32:
		return int64(c.Value(i)), nil
	case *array.Uint64:
		return int64(c.Value(i)), nil
	case *array.Float32:
		return float64(c.Value(i)), nil
	case *array.Float64:
		return c.Value(i), nil
	case *array.String: // cloned: Value aliases the buffer, which may be C memory freed with the reader
		return strings.Clone(c.Value(i)), nil
	case *array.LargeString:
		return strings.Clone(c.Value(i)), nil
	case *array.Binary:
		return append([]byte{}, c.Value(i)...), nil
	case *array.LargeBinary:
		return append([]byte{}, c.Value(i)...), nil
	case *array.Boolean:
		return c.Value(i), nil
	case *array.Timestamp:
		return c.Value(i).ToTime(c.DataType().(*arrow.TimestampType).Unit), nil
	case *array.Decimal128:
		if s := c.DataType().(*arrow.Decimal128Type).Scale; s == 0 {
			v := c.Value(i)
			if !v.FitsInPrecision(18) {
				return nil, fmt.Errorf("%w: decimal %s does not fit an int64", flightline.ErrSchemaMismatch, v.ToString(0))
			}
			return int64(v.LowBits()), nil
		}
		return c.Value(i).ToFloat64(c.DataType().(*arrow.Decimal128Type).Scale), nil
	}
	return nil, fmt.Errorf("%w: adbc: cannot read a %s value", flightline.ErrSchemaMismatch, a.DataType())
}

// scan stores row i of a into dest.
func scan(a arrow.Array, i int, dest any) error {
	v, err := Value(a, i)
	if err != nil {
		return err
	}
	switch d := dest.(type) {
	case *any:
		*d = v
		return nil
	case *int64:
		switch x := v.(type) {
		case nil:
			*d = 0
		case int64:
			*d = x
		case string: // SQLite may answer text for an integer expression
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return fmt.Errorf("%w: %q is not an integer", flightline.ErrSchemaMismatch, x)
			}
			*d = n
		default:
			return fmt.Errorf("%w: %T into *int64", flightline.ErrSchemaMismatch, v)
		}
	case *[]byte:
		switch x := v.(type) {
		case nil:
			*d = nil
		case []byte:
			*d = x
		case string:
			*d = []byte(x)
		default:
			return fmt.Errorf("%w: %T into *[]byte", flightline.ErrSchemaMismatch, v)
		}
	case *string:
		switch x := v.(type) {
		case nil:
			*d = ""
		case string:
			*d = x
		case []byte:
			*d = string(x)
		default:
			*d = fmt.Sprint(x)
		}
	case *bool:
		switch x := v.(type) {
		case nil:
			*d = false
		case bool:
			*d = x
		case int64:
			*d = x != 0
		default:
			return fmt.Errorf("%w: %T into *bool", flightline.ErrSchemaMismatch, v)
		}
	case *float64:
		switch x := v.(type) {
		case nil:
			*d = 0
		case float64:
			*d = x
		case int64:
			*d = float64(x)
		default:
			return fmt.Errorf("%w: %T into *float64", flightline.ErrSchemaMismatch, v)
		}
	default:
		return fmt.Errorf("%w: adbc: cannot scan into %T", flightline.ErrInvalidInput, dest)
	}
	return nil
}
