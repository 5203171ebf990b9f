package clickhouse

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
)

// chType is the ClickHouse column type a table created from an Arrow field
// gets, and the type an existing column must have to take the field (or
// Nullable of it). ClickHouse's ArrowStream input reads these pairs
// without conversion. Other Arrow types are refused with
// flightline.ErrInvalidInput before anything is written.
func chType(t arrow.DataType) (string, error) {
	switch t := t.(type) {
	case *arrow.Int8Type:
		return "Int8", nil
	case *arrow.Int16Type:
		return "Int16", nil
	case *arrow.Int32Type:
		return "Int32", nil
	case *arrow.Int64Type:
		return "Int64", nil
	case *arrow.Uint8Type:
		return "UInt8", nil
	case *arrow.Uint16Type:
		return "UInt16", nil
	case *arrow.Uint32Type:
		return "UInt32", nil
	case *arrow.Uint64Type:
		return "UInt64", nil
	case *arrow.Float32Type:
		return "Float32", nil
	case *arrow.Float64Type:
		return "Float64", nil
	case *arrow.BooleanType:
		return "Bool", nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType:
		return "String", nil
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("FixedString(%d)", t.ByteWidth), nil
	case *arrow.Date32Type:
		return "Date32", nil
	case *arrow.TimestampType:
		p := map[arrow.TimeUnit]int{arrow.Second: 0, arrow.Millisecond: 3, arrow.Microsecond: 6, arrow.Nanosecond: 9}[t.Unit]
		if t.TimeZone == "" {
			return fmt.Sprintf("DateTime64(%d)", p), nil
		}
		return fmt.Sprintf("DateTime64(%d, %s)", p, literal(t.TimeZone)), nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("Decimal(%d, %d)", t.Precision, t.Scale), nil
	case *arrow.Decimal256Type:
		return fmt.Sprintf("Decimal(%d, %d)", t.Precision, t.Scale), nil
	}
	return "", fmt.Errorf("%w: Arrow type %s has no ClickHouse column type in this sink", flightline.ErrInvalidInput, t)
}

// checkFields refuses, before any I/O, a schema the type map cannot store:
// an unnamed or duplicate column, or a type without a ClickHouse type.
func checkFields(sc *arrow.Schema) error {
	seen := make(map[string]bool, sc.NumFields())
	for _, f := range sc.Fields() {
		if f.Name == "" {
			return fmt.Errorf("%w: a column has an empty name", flightline.ErrInvalidInput)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: duplicate column %q", flightline.ErrInvalidInput, f.Name)
		}
		seen[f.Name] = true
		if _, err := chType(f.Type); err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return nil
}

// nullable wraps t as Nullable(t).
func nullable(t string) string { return "Nullable(" + t + ")" }

// unwrapNullable returns the inner type of Nullable(T) and true, or t and
// false.
func unwrapNullable(t string) (string, bool) {
	if strings.HasPrefix(t, "Nullable(") && strings.HasSuffix(t, ")") {
		return t[len("Nullable(") : len(t)-1], true
	}
	return t, false
}

// sameType compares a mapped type with a column's type as DESCRIBE prints
// it: LowCardinality(String) takes a String, and a time zone or decimal
// spelled with other spacing is the same type.
func sameType(col, want string) bool {
	norm := func(s string) string { return strings.ReplaceAll(s, " ", "") }
	if strings.HasPrefix(col, "LowCardinality(") && strings.HasSuffix(col, ")") {
		col = col[len("LowCardinality(") : len(col)-1]
	}
	return norm(col) == norm(want)
}
