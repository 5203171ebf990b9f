package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
)

// DataType is a Delta schema type: a primitive name ("long",
// "decimal(10,2)", "timestamp_ntz", ...) or one of the complex types
// struct, array and map.
type DataType struct {
	Name string // primitive name, or "struct", "array", "map"

	Fields []StructField // struct

	Element      *DataType // array
	ContainsNull bool

	Key, Value        *DataType // map
	ValueContainsNull bool
}

// StructField is a named field of a struct type.
type StructField struct {
	Name     string         `json:"name"`
	Type     DataType       `json:"type"`
	Nullable bool           `json:"nullable"`
	Metadata map[string]any `json:"metadata"`
}

// Schema is the table schema: a struct type.
type Schema = DataType

func (t DataType) MarshalJSON() ([]byte, error) {
	switch t.Name {
	case "struct":
		fs := t.Fields
		if fs == nil {
			fs = []StructField{}
		}
		for i := range fs {
			if fs[i].Metadata == nil {
				fs[i].Metadata = map[string]any{}
			}
		}
		return json.Marshal(struct {
			Type   string        `json:"type"`
			Fields []StructField `json:"fields"`
		}{"struct", fs})
	case "array":
		return json.Marshal(struct {
			Type         string    `json:"type"`
			ElementType  *DataType `json:"elementType"`
			ContainsNull bool      `json:"containsNull"`
		}{"array", t.Element, t.ContainsNull})
	case "map":
		return json.Marshal(struct {
			Type              string    `json:"type"`
			KeyType           *DataType `json:"keyType"`
			ValueType         *DataType `json:"valueType"`
			ValueContainsNull bool      `json:"valueContainsNull"`
		}{"map", t.Key, t.Value, t.ValueContainsNull})
	}
	return json.Marshal(t.Name)
}

func (t *DataType) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &t.Name)
	}
	var raw struct {
		Type              string        `json:"type"`
		Fields            []StructField `json:"fields"`
		ElementType       *DataType     `json:"elementType"`
		ContainsNull      bool          `json:"containsNull"`
		KeyType           *DataType     `json:"keyType"`
		ValueType         *DataType     `json:"valueType"`
		ValueContainsNull bool          `json:"valueContainsNull"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*t = DataType{Name: raw.Type, Fields: raw.Fields, Element: raw.ElementType, ContainsNull: raw.ContainsNull,
		Key: raw.KeyType, Value: raw.ValueType, ValueContainsNull: raw.ValueContainsNull}
	switch t.Name {
	case "struct", "array", "map":
		return nil
	}
	return fmt.Errorf("delta: unknown complex type %q", t.Name)
}

// String renders the type for error messages.
func (t DataType) String() string {
	switch t.Name {
	case "struct":
		parts := make([]string, len(t.Fields))
		for i, f := range t.Fields {
			parts[i] = f.Name + ": " + f.Type.String()
		}
		return "struct<" + strings.Join(parts, ", ") + ">"
	case "array":
		return "array<" + t.Element.String() + ">"
	case "map":
		return "map<" + t.Key.String() + ", " + t.Value.String() + ">"
	}
	return t.Name
}

// ParseSchema parses a metaData.schemaString.
func ParseSchema(s string) (*Schema, error) {
	var t DataType
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return nil, fmt.Errorf("delta: bad schemaString: %w", err)
	}
	if t.Name != "struct" {
		return nil, fmt.Errorf("delta: schemaString is a %s, not a struct", t.Name)
	}
	return &t, nil
}

// FromArrowSchema maps an Arrow schema to a Delta schema (see ToDelta).
func FromArrowSchema(sc *arrow.Schema) (*Schema, error) {
	st := &DataType{Name: "struct"}
	seen := map[string]bool{}
	for _, f := range sc.Fields() {
		if f.Name == "" {
			return nil, fmt.Errorf("%w: a column has an empty name", flightline.ErrInvalidInput)
		}
		if seen[strings.ToLower(f.Name)] { // Delta column names are case-insensitive
			return nil, fmt.Errorf("%w: duplicate column %q (Delta names are case-insensitive)", flightline.ErrInvalidInput, f.Name)
		}
		seen[strings.ToLower(f.Name)] = true
		t, err := ToDelta(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		st.Fields = append(st.Fields, StructField{Name: f.Name, Type: t, Nullable: f.Nullable})
	}
	return st, nil
}

// ToDelta maps an Arrow type to a Delta type:
//
//	bool→boolean  int8→byte  int16→short  int32→integer  int64→long
//	float32→float  float64→double  string, large_string→string
//	binary, large_binary→binary  date32→date
//	timestamp with time zone→timestamp (µs, UTC)
//	timestamp without time zone→timestamp_ntz (µs; timestampNtz feature)
//	decimal128(p,s)→decimal(p,s), p ≤ 38
//	list, large_list→array  struct→struct  map→map
//
// Unsigned integers, float16, date64, time, duration, interval, dictionary,
// union and view types are refused with ErrInvalidInput: Delta has no type
// for them.
func ToDelta(t arrow.DataType) (DataType, error) {
	switch t := t.(type) {
	case *arrow.BooleanType:
		return DataType{Name: "boolean"}, nil
	case *arrow.Int8Type:
		return DataType{Name: "byte"}, nil
	case *arrow.Int16Type:
		return DataType{Name: "short"}, nil
	case *arrow.Int32Type:
		return DataType{Name: "integer"}, nil
	case *arrow.Int64Type:
		return DataType{Name: "long"}, nil
	case *arrow.Float32Type:
		return DataType{Name: "float"}, nil
	case *arrow.Float64Type:
		return DataType{Name: "double"}, nil
	case *arrow.StringType, *arrow.LargeStringType:
		return DataType{Name: "string"}, nil
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return DataType{Name: "binary"}, nil
	case *arrow.Date32Type:
		return DataType{Name: "date"}, nil
	case *arrow.TimestampType:
		if t.TimeZone == "" {
			return DataType{Name: "timestamp_ntz"}, nil
		}
		return DataType{Name: "timestamp"}, nil
	case *arrow.Decimal128Type:
		if t.Precision > 38 {
			return DataType{}, fmt.Errorf("%w: decimal precision %d > 38", flightline.ErrInvalidInput, t.Precision)
		}
		return DataType{Name: fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)}, nil
	case *arrow.ListType:
		e, err := ToDelta(t.Elem())
		if err != nil {
			return DataType{}, err
		}
		return DataType{Name: "array", Element: &e, ContainsNull: t.ElemField().Nullable}, nil
	case *arrow.LargeListType:
		e, err := ToDelta(t.Elem())
		if err != nil {
			return DataType{}, err
		}
		return DataType{Name: "array", Element: &e, ContainsNull: t.ElemField().Nullable}, nil
	case *arrow.MapType:
		k, err := ToDelta(t.KeyType())
		if err != nil {
			return DataType{}, err
		}
		v, err := ToDelta(t.ItemType())
		if err != nil {
			return DataType{}, err
		}
		return DataType{Name: "map", Key: &k, Value: &v, ValueContainsNull: t.ItemField().Nullable}, nil
	case *arrow.StructType:
		st := DataType{Name: "struct"}
		for _, f := range t.Fields() {
			ft, err := ToDelta(f.Type)
			if err != nil {
				return DataType{}, fmt.Errorf("field %q: %w", f.Name, err)
			}
			st.Fields = append(st.Fields, StructField{Name: f.Name, Type: ft, Nullable: f.Nullable})
		}
		return st, nil
	}
	return DataType{}, fmt.Errorf("%w: Arrow type %s has no Delta Lake type", flightline.ErrInvalidInput, t)
}

// ToArrow maps a Delta type to the Arrow type the source yields: the
// inverse of ToDelta, with timestamp → timestamp[us, UTC] and
// timestamp_ntz → timestamp[us].
func ToArrow(t DataType) (arrow.DataType, error) {
	switch t.Name {
	case "boolean":
		return arrow.FixedWidthTypes.Boolean, nil
	case "byte":
		return arrow.PrimitiveTypes.Int8, nil
	case "short":
		return arrow.PrimitiveTypes.Int16, nil
	case "integer":
		return arrow.PrimitiveTypes.Int32, nil
	case "long":
		return arrow.PrimitiveTypes.Int64, nil
	case "float":
		return arrow.PrimitiveTypes.Float32, nil
	case "double":
		return arrow.PrimitiveTypes.Float64, nil
	case "string":
		return arrow.BinaryTypes.String, nil
	case "binary":
		return arrow.BinaryTypes.Binary, nil
	case "date":
		return arrow.FixedWidthTypes.Date32, nil
	case "timestamp":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	case "timestamp_ntz":
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
	case "array":
		e, err := ToArrow(*t.Element)
		if err != nil {
			return nil, err
		}
		return arrow.ListOfField(arrow.Field{Name: "element", Type: e, Nullable: t.ContainsNull}), nil
	case "map":
		k, err := ToArrow(*t.Key)
		if err != nil {
			return nil, err
		}
		v, err := ToArrow(*t.Value)
		if err != nil {
			return nil, err
		}
		m := arrow.MapOf(k, v)
		m.SetItemNullable(t.ValueContainsNull)
		return m, nil
	case "struct":
		fs, err := arrowFields(t.Fields)
		if err != nil {
			return nil, err
		}
		return arrow.StructOf(fs...), nil
	}
	var p, s int32
	if _, err := fmt.Sscanf(t.Name, "decimal(%d,%d)", &p, &s); err == nil {
		return &arrow.Decimal128Type{Precision: p, Scale: s}, nil
	}
	return nil, fmt.Errorf("%w: Delta type %q is not supported", flightline.ErrInvalidInput, t.Name)
}

func arrowFields(fs []StructField) ([]arrow.Field, error) {
	out := make([]arrow.Field, len(fs))
	for i, f := range fs {
		at, err := ToArrow(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		out[i] = arrow.Field{Name: f.Name, Type: at, Nullable: f.Nullable}
	}
	return out, nil
}

// ArrowSchema returns the Arrow schema of a Delta schema.
func (t *DataType) ArrowSchema() (*arrow.Schema, error) {
	fs, err := arrowFields(t.Fields)
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fs, nil), nil
}

// Assignable reports whether values of type src (a batch) can be stored in
// a column of type dst (the table) without conversion: same types, and no
// nullable element where the table's is not.
func Assignable(dst, src DataType) bool {
	if dst.Name != src.Name {
		return false
	}
	switch dst.Name {
	case "struct":
		if len(dst.Fields) != len(src.Fields) {
			return false
		}
		for i := range dst.Fields {
			d, s := dst.Fields[i], src.Fields[i]
			if !strings.EqualFold(d.Name, s.Name) || !Assignable(d.Type, s.Type) || (s.Nullable && !d.Nullable) {
				return false
			}
		}
	case "array":
		return Assignable(*dst.Element, *src.Element) && (dst.ContainsNull || !src.ContainsNull)
	case "map":
		return Assignable(*dst.Key, *src.Key) && Assignable(*dst.Value, *src.Value) && (dst.ValueContainsNull || !src.ValueContainsNull)
	}
	return true
}
