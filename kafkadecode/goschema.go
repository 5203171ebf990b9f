package kafkadecode

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// SchemaOf derives an Arrow schema from a Go struct type (T or *T), like a
// Pydantic model in Python pipelines. Exported fields become Arrow fields
// named by their `arrow:"name"` tag (the Go name when there is no tag;
// `arrow:"-"` skips the field). Fields are nullable unless the tag has
// the option required, e.g. `arrow:"id,required"`, because Kafka values
// routinely omit fields.
//
// Types: bool; int8..int64, int (as int64); uint8..uint64, uint (as
// uint64); float32, float64; string (utf8); []byte (binary); time.Time
// (timestamp[us, UTC], or the unit given by the tag option unit=s|ms|us|ns);
// decimal128.Num with the tag option decimal=P.S; nested structs (struct);
// slices and arrays (list); pointers to any of these.
func SchemaOf[T any]() (*arrow.Schema, error) {
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: SchemaOf needs a struct, got %s", ErrUnsupportedType, t)
	}
	fields, err := goFields(t, 0)
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

var (
	timeType = reflect.TypeFor[time.Time]()
	dec128   = reflect.TypeFor[decimal128.Num]()
)

func goFields(t reflect.Type, depth int) ([]arrow.Field, error) {
	if depth > 32 {
		return nil, fmt.Errorf("%w: struct nesting deeper than 32 (recursive type %s?)", ErrUnsupportedType, t)
	}
	var out []arrow.Field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("arrow")
		if tag == "-" {
			continue
		}
		parts := strings.Split(tag, ",")
		name := parts[0]
		if name == "" {
			name = sf.Name
		}
		opts := map[string]string{}
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(p, "=")
			opts[k] = v
		}
		dt, err := goType(sf.Type, opts, depth)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", sf.Name, err)
		}
		_, required := opts["required"]
		out = append(out, arrow.Field{Name: name, Type: dt, Nullable: !required})
	}
	return out, nil
}

func goType(t reflect.Type, opts map[string]string, depth int) (arrow.DataType, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType:
		unit := arrow.Microsecond
		switch opts["unit"] {
		case "", "us":
		case "s":
			unit = arrow.Second
		case "ms":
			unit = arrow.Millisecond
		case "ns":
			unit = arrow.Nanosecond
		default:
			return nil, fmt.Errorf("%w: unit=%q", ErrInvalidOption, opts["unit"])
		}
		return &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}, nil
	case dec128:
		var p, s int32
		if _, err := fmt.Sscanf(opts["decimal"], "%d.%d", &p, &s); err != nil || p < 1 || p > 38 || s < 0 || s > p {
			return nil, fmt.Errorf("%w: decimal128.Num needs the tag option decimal=P.S, got %q", ErrInvalidOption, opts["decimal"])
		}
		return &arrow.Decimal128Type{Precision: p, Scale: s}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return arrow.FixedWidthTypes.Boolean, nil
	case reflect.Int8:
		return arrow.PrimitiveTypes.Int8, nil
	case reflect.Int16:
		return arrow.PrimitiveTypes.Int16, nil
	case reflect.Int32:
		return arrow.PrimitiveTypes.Int32, nil
	case reflect.Int64, reflect.Int:
		return arrow.PrimitiveTypes.Int64, nil
	case reflect.Uint8:
		return arrow.PrimitiveTypes.Uint8, nil
	case reflect.Uint16:
		return arrow.PrimitiveTypes.Uint16, nil
	case reflect.Uint32:
		return arrow.PrimitiveTypes.Uint32, nil
	case reflect.Uint64, reflect.Uint:
		return arrow.PrimitiveTypes.Uint64, nil
	case reflect.Float32:
		return arrow.PrimitiveTypes.Float32, nil
	case reflect.Float64:
		return arrow.PrimitiveTypes.Float64, nil
	case reflect.String:
		return arrow.BinaryTypes.String, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return arrow.BinaryTypes.Binary, nil
		}
		et, err := goType(t.Elem(), nil, depth+1)
		if err != nil {
			return nil, err
		}
		return arrow.ListOf(et), nil
	case reflect.Struct:
		fs, err := goFields(t, depth+1)
		if err != nil {
			return nil, err
		}
		return arrow.StructOf(fs...), nil
	}
	return nil, fmt.Errorf("%w: Go type %s", ErrUnsupportedType, t)
}
