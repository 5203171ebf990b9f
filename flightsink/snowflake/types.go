package snowflake

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/snowconn"
)

// colType is the Snowflake column type of one Arrow type.
type colType struct {
	sql string // for CREATE TABLE, e.g. NUMBER(19,0)
	// What INFORMATION_SCHEMA.COLUMNS reports for a column of that type,
	// for checking an existing table: data_type, and the scale of a NUMBER
	// (-1: any scale is refused unless it equals this one; only NUMBER).
	dataType string
	scale    int
}

// sqlType maps an Arrow type to the Snowflake type that holds every value
// of it exactly, or refuses it with ErrInvalidInput. The map:
//
//	bool                          BOOLEAN
//	int8/16/32/64, uint8/16/32    NUMBER(3|5|10|19,0), NUMBER(3|5|10,0)
//	uint64                        NUMBER(20,0)
//	float16/32/64                 FLOAT (a double; float32 values are exact in it)
//	decimal32/64/128/256(p,s)     NUMBER(p,s), p ≤ 38
//	utf8, large_utf8, utf8_view   VARCHAR
//	binary, large, view, fixed    BINARY
//	date32, date64                DATE
//	time32/64(unit)               TIME(0|3|6|9)
//	timestamp(unit)               TIMESTAMP_NTZ(0|3|6|9)
//	timestamp(unit, zone)         TIMESTAMP_LTZ(0|3|6|9) (an instant; the zone name is not stored)
//	list, large_list, struct, map VARIANT (COPY loads Parquet's nested
//	                              groups as ARRAY and OBJECT values in it)
//
// Nested values are stored as semi-structured data, so they read back as
// VARIANT (JSON), not as the Arrow type: that direction is documented, not
// a round trip. Refused: dictionaries, durations, intervals, unions, null,
// extension types, decimals over 38 digits.
func sqlType(t arrow.DataType) (colType, error) {
	num := func(p, s int) colType { return colType{fmt.Sprintf("NUMBER(%d,%d)", p, s), "NUMBER", s} }
	prec := func(u arrow.TimeUnit) int { return [...]int{0, 3, 6, 9}[u] }
	switch t := t.(type) {
	case *arrow.BooleanType:
		return colType{"BOOLEAN", "BOOLEAN", 0}, nil
	case *arrow.Int8Type, *arrow.Uint8Type:
		return num(3, 0), nil
	case *arrow.Int16Type, *arrow.Uint16Type:
		return num(5, 0), nil
	case *arrow.Int32Type, *arrow.Uint32Type:
		return num(10, 0), nil
	case *arrow.Int64Type:
		return num(19, 0), nil
	case *arrow.Uint64Type:
		return num(20, 0), nil
	case *arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type:
		return colType{"FLOAT", "FLOAT", 0}, nil
	case arrow.DecimalType:
		if t.GetPrecision() > 38 {
			return colType{}, fmt.Errorf("%w: %s has more than 38 digits, Snowflake's NUMBER maximum", flightline.ErrInvalidInput, t)
		}
		return num(int(t.GetPrecision()), int(t.GetScale())), nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return colType{"VARCHAR", "TEXT", 0}, nil
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType, *arrow.FixedSizeBinaryType:
		return colType{"BINARY", "BINARY", 0}, nil
	case *arrow.Date32Type, *arrow.Date64Type:
		return colType{"DATE", "DATE", 0}, nil
	case *arrow.Time32Type:
		return colType{fmt.Sprintf("TIME(%d)", prec(t.Unit)), "TIME", 0}, nil
	case *arrow.Time64Type:
		return colType{fmt.Sprintf("TIME(%d)", prec(t.Unit)), "TIME", 0}, nil
	case *arrow.TimestampType:
		if t.TimeZone == "" {
			return colType{fmt.Sprintf("TIMESTAMP_NTZ(%d)", prec(t.Unit)), "TIMESTAMP_NTZ", 0}, nil
		}
		return colType{fmt.Sprintf("TIMESTAMP_LTZ(%d)", prec(t.Unit)), "TIMESTAMP_LTZ", 0}, nil
	case *arrow.ListType, *arrow.LargeListType, *arrow.StructType, *arrow.MapType:
		return colType{"VARIANT", "VARIANT", 0}, nil
	}
	return colType{}, fmt.Errorf("%w: Arrow type %s has no Snowflake type the sink writes", flightline.ErrInvalidInput, t)
}

// accepts reports whether an existing column of INFORMATION_SCHEMA
// data_type dt and scale can take values of Arrow type t without loss:
// the same type family, and for NUMBER the same scale.
func accepts(t arrow.DataType, dt string, scale int64) bool {
	want, err := sqlType(t)
	if err != nil {
		return false
	}
	dt = strings.ToUpper(dt)
	switch want.dataType {
	case "NUMBER":
		// FIXED is what some Snowflake views call NUMBER.
		return (dt == "NUMBER" || dt == "FIXED") && scale == int64(want.scale)
	case "TEXT":
		return dt == "TEXT" || dt == "VARCHAR"
	case "TIMESTAMP_LTZ":
		// An instant fits either zoned type.
		return dt == "TIMESTAMP_LTZ" || dt == "TIMESTAMP_TZ"
	case "VARIANT":
		return dt == "VARIANT" || dt == "OBJECT" || dt == "ARRAY"
	}
	return dt == want.dataType
}

func quote(ident string) string        { return snowconn.Quote(ident) }
func quoteParts(parts []string) string { return snowconn.QuoteParts(parts) }

// ParseIdent is snowconn.ParseIdent.
func ParseIdent(name string) ([]string, error) { return snowconn.ParseIdent(name) }
