package pgarrow

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
)

// PostgreSQL type OIDs used by the map (pg_type.dat; stable across versions).
const (
	OIDBool        uint32 = 16
	OIDBytea       uint32 = 17
	OIDName        uint32 = 19
	OIDInt8        uint32 = 20
	OIDInt2        uint32 = 21
	OIDInt4        uint32 = 23
	OIDText        uint32 = 25
	OIDJSON        uint32 = 114
	OIDFloat4      uint32 = 700
	OIDFloat8      uint32 = 701
	OIDBPChar      uint32 = 1042
	OIDVarchar     uint32 = 1043
	OIDDate        uint32 = 1082
	OIDTimestamp   uint32 = 1114
	OIDTimestamptz uint32 = 1184
	OIDNumeric     uint32 = 1700
	OIDJSONB       uint32 = 3802
)

// arrayOID maps an element type OID to its one-dimensional array type OID.
var arrayOID = map[uint32]uint32{
	OIDBool: 1000, OIDBytea: 1001, OIDName: 1003, OIDInt2: 1005, OIDInt4: 1007,
	OIDText: 1009, OIDBPChar: 1014, OIDVarchar: 1015, OIDInt8: 1016,
	OIDFloat4: 1021, OIDFloat8: 1022, OIDTimestamp: 1115, OIDDate: 1182,
	OIDTimestamptz: 1185, OIDNumeric: 1231, OIDJSON: 199, OIDJSONB: 3807,
}

// elemOID is the inverse of arrayOID.
var elemOID = func() map[uint32]uint32 {
	m := make(map[uint32]uint32, len(arrayOID))
	for e, a := range arrayOID {
		m[a] = e
	}
	return m
}()

// ArrayOID returns the array type of element type elem, or 0.
func ArrayOID(elem uint32) uint32 { return arrayOID[elem] }

// ElemOID returns the element type of array type arr, or 0 when arr is not
// an array type the map knows.
func ElemOID(arr uint32) uint32 { return elemOID[arr] }

// Type is the PostgreSQL column type an Arrow type maps to.
type Type struct {
	OID uint32
	// SQL is the type as written in CREATE TABLE, e.g. "numeric(12,2)[]".
	SQL string
}

// ForArrow returns the canonical PostgreSQL type of dt, the one the sink uses
// when it creates a table. Unsupported types return an error wrapping
// flightline.ErrInvalidInput.
func ForArrow(dt arrow.DataType) (Type, error) {
	switch dt := dt.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Uint8Type:
		return Type{OIDInt2, "smallint"}, nil
	case *arrow.Int32Type, *arrow.Uint16Type:
		return Type{OIDInt4, "integer"}, nil
	case *arrow.Int64Type, *arrow.Uint32Type:
		return Type{OIDInt8, "bigint"}, nil
	case *arrow.Float32Type:
		return Type{OIDFloat4, "real"}, nil
	case *arrow.Float64Type:
		return Type{OIDFloat8, "double precision"}, nil
	case *arrow.BooleanType:
		return Type{OIDBool, "boolean"}, nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return Type{OIDText, "text"}, nil
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
		return Type{OIDBytea, "bytea"}, nil
	case *arrow.TimestampType:
		if dt.TimeZone != "" {
			return Type{OIDTimestamptz, "timestamp with time zone"}, nil
		}
		return Type{OIDTimestamp, "timestamp without time zone"}, nil
	case *arrow.Date32Type:
		return Type{OIDDate, "date"}, nil
	case *arrow.Decimal128Type:
		if dt.Precision < 1 || dt.Precision > 38 || dt.Scale < 0 || dt.Scale > dt.Precision {
			return Type{}, unsupported(dt, "precision/scale outside numeric(1..38, 0..p)")
		}
		return Type{OIDNumeric, fmt.Sprintf("numeric(%d,%d)", dt.Precision, dt.Scale)}, nil
	case *arrow.StructType, *arrow.MapType:
		return Type{OIDJSONB, "jsonb"}, nil
	case *arrow.ListType:
		return listType(dt, dt.Elem())
	case *arrow.LargeListType:
		return listType(dt, dt.Elem())
	}
	return Type{}, unsupported(dt, "no PostgreSQL mapping")
}

func listType(dt, elem arrow.DataType) (Type, error) {
	switch elem.(type) {
	case *arrow.ListType, *arrow.LargeListType:
		return Type{}, unsupported(dt, "lists of lists are not mapped (PostgreSQL arrays must be rectangular)")
	}
	et, err := ForArrow(elem)
	if err != nil {
		return Type{}, unsupported(dt, fmt.Sprintf("element: %v", err))
	}
	return Type{arrayOID[et.OID], et.SQL + "[]"}, nil
}

func unsupported(dt arrow.DataType, why string) error {
	return fmt.Errorf("%w: arrow type %s is not supported by the PostgreSQL type map (%s)", flightline.ErrInvalidInput, dt, why)
}

// Accepts reports whether values of Arrow type dt can be written into an
// existing column of type OID col: the canonical type, or one of the few
// accepted alternatives (varchar for text, json for jsonb, and arrays of
// those).
func Accepts(dt arrow.DataType, col uint32) bool {
	t, err := ForArrow(dt)
	if err != nil {
		return false
	}
	if t.OID == col {
		return true
	}
	switch t.OID {
	case OIDText:
		return col == OIDVarchar
	case OIDJSONB:
		return col == OIDJSON
	}
	if e := elemOID[t.OID]; e != 0 {
		var elem arrow.DataType
		switch dt := dt.(type) {
		case *arrow.ListType:
			elem = dt.Elem()
		case *arrow.LargeListType:
			elem = dt.Elem()
		}
		ce := elemOID[col]
		return elem != nil && ce != 0 && Accepts(elem, ce)
	}
	return false
}

// ForPostgres returns the Arrow type a column of type OID oid and type
// modifier typmod is read as, and whether its values are read in the binary
// form of that OID (true) or must be selected as ::text (false; the Arrow
// type is then utf8).
func ForPostgres(oid uint32, typmod int32) (arrow.DataType, bool) {
	switch oid {
	case OIDInt2:
		return arrow.PrimitiveTypes.Int16, true
	case OIDInt4:
		return arrow.PrimitiveTypes.Int32, true
	case OIDInt8:
		return arrow.PrimitiveTypes.Int64, true
	case OIDFloat4:
		return arrow.PrimitiveTypes.Float32, true
	case OIDFloat8:
		return arrow.PrimitiveTypes.Float64, true
	case OIDBool:
		return arrow.FixedWidthTypes.Boolean, true
	case OIDText, OIDVarchar, OIDBPChar, OIDName, OIDJSON:
		return arrow.BinaryTypes.String, true
	case OIDJSONB:
		return arrow.BinaryTypes.String, true
	case OIDBytea:
		return arrow.BinaryTypes.Binary, true
	case OIDTimestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond}, true
	case OIDTimestamptz:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, true
	case OIDDate:
		return arrow.FixedWidthTypes.Date32, true
	case OIDNumeric:
		if typmod >= 4 {
			p, s := ((typmod-4)>>16)&0xffff, (typmod-4)&0xffff
			if p >= 1 && p <= 38 && s <= p {
				return &arrow.Decimal128Type{Precision: p, Scale: s}, true
			}
		}
		return arrow.BinaryTypes.String, false
	}
	if e := elemOID[oid]; e != 0 {
		if et, ok := ForPostgres(e, typmod); ok {
			return arrow.ListOf(et), true
		}
	}
	return arrow.BinaryTypes.String, false
}
