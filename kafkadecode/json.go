package kafkadecode

import (
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Errors of JSON value decoding, wrapped by *JSONError.
var (
	// ErrJSONSyntax means the value is not valid JSON.
	ErrJSONSyntax = errors.New("kafkadecode: JSON syntax error")
	// ErrJSONType means a JSON value does not fit its field's type.
	ErrJSONType = errors.New("kafkadecode: JSON value does not fit the field type")
	// ErrMissingField means a non-nullable field is absent or null.
	ErrMissingField = errors.New("kafkadecode: required field missing or null")
)

// JSONError reports where a JSON value failed to decode.
type JSONError struct {
	Field  string // name of the innermost field involved ("" for the value itself)
	Offset int    // byte offset in the value
	Kind   error  // ErrJSONSyntax, ErrJSONType or ErrMissingField
	Err    error  // detail
}

func (e *JSONError) Error() string {
	return fmt.Sprintf("%v: field %q at byte %d: %v", e.Kind, e.Field, e.Offset, e.Err)
}

// Unwrap returns the kind and the detail.
func (e *JSONError) Unwrap() []error { return []error{e.Kind, e.Err} }

// JSONOption configures a JSONDecoder.
type JSONOption func(*jsonConfig)

type jsonConfig struct {
	epochUnit    arrow.TimeUnit
	hasEpochUnit bool
}

// JSONEpochUnit sets the unit of timestamps given as JSON numbers. By
// default a number is in the unit of its column (milliseconds for a
// timestamp[ms] column); with this option it is converted from unit.
func JSONEpochUnit(unit arrow.TimeUnit) JSONOption {
	return func(c *jsonConfig) { c.epochUnit, c.hasEpochUnit = unit, true }
}

// JSONDecoder decodes one JSON object per record into a struct column whose
// fields are the schema's fields. It tokenizes the value in place and
// appends straight into the column builders: no map or interface value is
// built per record. A value that is JSON null becomes a null row.
//
// Mapping: object keys select fields by exact name; unknown keys are
// skipped; absent keys and null become null (an error for a non-nullable
// field); for a key given twice the first wins. Integers accept integral
// numbers (1, 1.0, 1e3) and numeric strings; floats accept numbers and
// numeric strings; timestamps accept RFC 3339 strings and epoch numbers
// (see JSONEpochUnit); date32 accepts "YYYY-MM-DD" and day numbers;
// decimals accept numbers and numeric strings; binary and fixed-size
// binary accept base64 strings; nested objects map to structs and arrays
// to lists. utf8 strings must be valid UTF-8.
//
// A JSONDecoder is not safe for concurrent use.
type JSONDecoder struct {
	typ   *arrow.StructType
	root  *jnode
	bound *array.StructBuilder
	lex   lexer
	cfg   jsonConfig
	b64   []byte
}

type jkind uint8

const (
	jBool jkind = iota
	jInt8
	jInt16
	jInt32
	jInt64
	jUint8
	jUint16
	jUint32
	jUint64
	jFloat32
	jFloat64
	jString
	jLargeString
	jStringView
	jBinary
	jLargeBinary
	jBinaryView
	jFixedBinary
	jTimestamp
	jDate32
	jDecimal128
	jDecimal256
	jStruct
	jList
	jLargeList
)

type jnode struct {
	kind     jkind
	name     string
	nullable bool
	dt       arrow.DataType
	b        array.Builder // bound builder
	unit     arrow.TimeUnit
	prec     int32
	scale    int32
	width    int
	fields   []*jnode
	index    map[string]int
	seen     []bool
	elem     *jnode

	// Entries and data bytes appended since the builder was last emptied,
	// and the totals of the previous round: used to reserve capacity once
	// instead of growing (and copying) builders step by step.
	count, lastCount int
	bytes, lastBytes int
}

// reserve sizes n's builders (and its children's) for as much as the
// previous round held, right after the builders were emptied.
func (n *jnode) reserve() {
	if n.count > 0 {
		n.lastCount, n.lastBytes = n.count, n.bytes
	}
	n.count, n.bytes = 0, 0
	if n.lastCount > 0 {
		n.b.Reserve(n.lastCount)
		if rd, ok := n.b.(interface{ ReserveData(int) }); ok && n.lastBytes > 0 {
			rd.ReserveData(n.lastBytes)
		}
	}
	for _, c := range n.fields {
		c.reserve()
	}
	if n.elem != nil {
		n.elem.reserve()
	}
}

// NewJSONDecoder returns a decoder for objects with schema's fields.
func NewJSONDecoder(schema *arrow.Schema, opts ...JSONOption) (*JSONDecoder, error) {
	if schema == nil || schema.NumFields() == 0 {
		return nil, fmt.Errorf("%w: empty schema", ErrInvalidOption)
	}
	var cfg jsonConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.hasEpochUnit && cfg.epochUnit > arrow.Nanosecond {
		return nil, fmt.Errorf("%w: epoch unit %v", ErrInvalidOption, cfg.epochUnit)
	}
	st := arrow.StructOf(schema.Fields()...)
	root, err := compileJSON(arrow.Field{Type: st, Nullable: true})
	if err != nil {
		return nil, err
	}
	return &JSONDecoder{typ: st, root: root, cfg: cfg}, nil
}

func compileJSON(f arrow.Field) (*jnode, error) {
	n := &jnode{name: f.Name, nullable: f.Nullable, dt: f.Type}
	switch t := f.Type.(type) {
	case *arrow.BooleanType:
		n.kind = jBool
	case *arrow.Int8Type:
		n.kind = jInt8
	case *arrow.Int16Type:
		n.kind = jInt16
	case *arrow.Int32Type:
		n.kind = jInt32
	case *arrow.Int64Type:
		n.kind = jInt64
	case *arrow.Uint8Type:
		n.kind = jUint8
	case *arrow.Uint16Type:
		n.kind = jUint16
	case *arrow.Uint32Type:
		n.kind = jUint32
	case *arrow.Uint64Type:
		n.kind = jUint64
	case *arrow.Float32Type:
		n.kind = jFloat32
	case *arrow.Float64Type:
		n.kind = jFloat64
	case *arrow.StringType:
		n.kind = jString
	case *arrow.LargeStringType:
		n.kind = jLargeString
	case *arrow.StringViewType:
		n.kind = jStringView
	case *arrow.BinaryType:
		n.kind = jBinary
	case *arrow.LargeBinaryType:
		n.kind = jLargeBinary
	case *arrow.BinaryViewType:
		n.kind = jBinaryView
	case *arrow.FixedSizeBinaryType:
		n.kind, n.width = jFixedBinary, t.ByteWidth
	case *arrow.TimestampType:
		n.kind, n.unit = jTimestamp, t.Unit
	case *arrow.Date32Type:
		n.kind = jDate32
	case *arrow.Decimal128Type:
		n.kind, n.prec, n.scale = jDecimal128, t.Precision, t.Scale
	case *arrow.Decimal256Type:
		n.kind, n.prec, n.scale = jDecimal256, t.Precision, t.Scale
	case *arrow.StructType:
		n.kind = jStruct
		n.index = make(map[string]int, t.NumFields())
		for i, cf := range t.Fields() {
			c, err := compileJSON(cf)
			if err != nil {
				return nil, err
			}
			if _, dup := n.index[cf.Name]; dup {
				return nil, fmt.Errorf("%w: duplicate field name %q", ErrInvalidOption, cf.Name)
			}
			n.index[cf.Name] = i
			n.fields = append(n.fields, c)
		}
		n.seen = make([]bool, len(n.fields))
	case *arrow.ListType:
		e, err := compileJSON(t.ElemField())
		if err != nil {
			return nil, err
		}
		n.kind, n.elem = jList, e
	case *arrow.LargeListType:
		e, err := compileJSON(t.ElemField())
		if err != nil {
			return nil, err
		}
		n.kind, n.elem = jLargeList, e
	default:
		return nil, fmt.Errorf("%w: JSON decoding into %s (field %q)", ErrUnsupportedType, f.Type, f.Name)
	}
	return n, nil
}

// bind points the compiled nodes at b's builders.
func (n *jnode) bind(b array.Builder) {
	n.b = b
	switch n.kind {
	case jStruct:
		sb := b.(*array.StructBuilder)
		for i, c := range n.fields {
			c.bind(sb.FieldBuilder(i))
		}
	case jList:
		n.elem.bind(b.(*array.ListBuilder).ValueBuilder())
	case jLargeList:
		n.elem.bind(b.(*array.LargeListBuilder).ValueBuilder())
	}
}

// Type returns the struct type of the value column.
func (d *JSONDecoder) Type() *arrow.StructType { return d.typ }

// AppendValue decodes one JSON object into a new row of b (see ValueDecoder).
func (d *JSONDecoder) AppendValue(b *array.StructBuilder, value []byte) error {
	if b != d.bound {
		if !arrow.TypeEqual(b.Type(), d.typ) {
			b.AppendNull()
			return fmt.Errorf("%w: builder type %s, decoder type %s", ErrInvalidOption, b.Type(), d.typ)
		}
		d.root.bind(b)
		d.bound = b
	}
	if b.Len() == 0 {
		d.root.reserve()
	}
	d.root.count++
	d.lex.reset(value)
	// Do not keep the value alive: it points into a whole fetch or
	// decompression buffer, which would stay reachable until the next value.
	defer d.lex.reset(nil)
	if d.lex.peek() == 'n' && d.lex.literal("null") == nil && d.lex.peek() == 0 {
		b.AppendNull() // a JSON null value is a null row, like a tombstone
		return nil
	}
	d.lex.i = 0
	if d.lex.peek() != '{' {
		b.AppendNull()
		return &JSONError{Offset: d.lex.i, Kind: ErrJSONSyntax, Err: errors.New("value is not a JSON object")}
	}
	if err := d.object(d.root); err != nil {
		return err
	}
	if d.lex.peek() != 0 {
		return &JSONError{Offset: d.lex.i, Kind: ErrJSONSyntax, Err: errors.New("data after the object")}
	}
	return nil
}

func (d *JSONDecoder) fail(n *jnode, kind, err error) error {
	return &JSONError{Field: n.name, Offset: d.lex.i, Kind: kind, Err: err}
}

// object decodes an object into struct node n; l.b[l.i] is '{'. It always
// appends exactly one row to n.b and to every field builder.
func (d *JSONDecoder) object(n *jnode) error {
	l := &d.lex
	sb := n.b.(*array.StructBuilder)
	sb.Append(true)
	clear(n.seen)
	l.i++
	var err error
	if l.peek() == '}' {
		l.i++
	} else {
		guess := 0
		for {
			if l.peek() != '"' {
				err = d.fail(n, ErrJSONSyntax, errSyntax)
				break
			}
			key, kerr := l.str()
			if kerr != nil {
				err = d.fail(n, ErrJSONSyntax, kerr)
				break
			}
			if l.peek() != ':' {
				err = d.fail(n, ErrJSONSyntax, errSyntax)
				break
			}
			l.i++
			idx := -1
			if guess < len(n.fields) && n.fields[guess].name == string(key) {
				idx = guess
			} else if i, ok := n.index[string(key)]; ok {
				idx = i
			}
			if idx < 0 || n.seen[idx] {
				if serr := l.skip(0); serr != nil {
					err = d.fail(n, ErrJSONSyntax, serr)
					break
				}
			} else {
				n.seen[idx] = true
				guess = idx + 1
				if err = d.value(n.fields[idx]); err != nil {
					break
				}
			}
			c := l.peek()
			l.i++
			if c == ',' {
				continue
			}
			if c != '}' {
				err = d.fail(n, ErrJSONSyntax, errSyntax)
			}
			break
		}
	}
	for i, f := range n.fields {
		if !n.seen[i] {
			f.count++
			if err == nil && !f.nullable {
				err = d.fail(f, ErrMissingField, errors.New("absent"))
			}
			f.b.AppendNull()
		}
	}
	return err
}

// value decodes one value into node n, appending exactly one entry to n.b.
func (d *JSONDecoder) value(n *jnode) error {
	l := &d.lex
	n.count++
	c := l.peek()
	if c == 'n' {
		n.b.AppendNull()
		if err := l.literal("null"); err != nil {
			return d.fail(n, ErrJSONSyntax, err)
		}
		if !n.nullable {
			return d.fail(n, ErrMissingField, errors.New("null"))
		}
		return nil
	}
	var err error
	switch n.kind {
	case jStruct:
		if c != '{' {
			n.b.AppendNull()
			return d.fail(n, ErrJSONType, errors.New("want an object"))
		}
		return d.object(n)
	case jList, jLargeList:
		return d.list(n, c)
	case jBool:
		err = d.boolean(n, c)
	case jString, jLargeString, jStringView, jBinary, jLargeBinary, jBinaryView, jFixedBinary:
		err = d.bytesValue(n, c)
	default:
		err = d.scalar(n, c)
	}
	if err != nil {
		n.b.AppendNull()
	}
	return err
}

func (d *JSONDecoder) list(n *jnode, c byte) error {
	l := &d.lex
	if c != '[' {
		n.b.AppendNull()
		return d.fail(n, ErrJSONType, errors.New("want an array"))
	}
	if n.kind == jList {
		n.b.(*array.ListBuilder).Append(true)
	} else {
		n.b.(*array.LargeListBuilder).Append(true)
	}
	l.i++
	if l.peek() == ']' {
		l.i++
		return nil
	}
	for {
		if err := d.value(n.elem); err != nil {
			return err
		}
		switch l.peek() {
		case ',':
			l.i++
		case ']':
			l.i++
			return nil
		default:
			return d.fail(n, ErrJSONSyntax, errSyntax)
		}
	}
}

func (d *JSONDecoder) boolean(n *jnode, c byte) error {
	var v bool
	switch c {
	case 't':
		if err := d.lex.literal("true"); err != nil {
			return d.fail(n, ErrJSONSyntax, err)
		}
		v = true
	case 'f':
		if err := d.lex.literal("false"); err != nil {
			return d.fail(n, ErrJSONSyntax, err)
		}
	default:
		return d.fail(n, ErrJSONType, errors.New("want true or false"))
	}
	n.b.(*array.BooleanBuilder).Append(v)
	return nil
}

func (d *JSONDecoder) bytesValue(n *jnode, c byte) error {
	if c != '"' {
		return d.fail(n, ErrJSONType, errors.New("want a string"))
	}
	s, err := d.lex.str()
	if err != nil {
		return d.fail(n, ErrJSONSyntax, err)
	}
	n.bytes += len(s)
	switch n.kind {
	case jString, jLargeString, jStringView:
		if !utf8.Valid(s) {
			return d.fail(n, ErrJSONType, errBadUTF8)
		}
		switch b := n.b.(type) {
		case *array.StringBuilder:
			b.BinaryBuilder.Append(s)
		case *array.LargeStringBuilder:
			b.BinaryBuilder.Append(s)
		case *array.StringViewBuilder:
			b.BinaryViewBuilder.Append(s)
		}
		return nil
	}
	d.b64 = d.b64[:0]
	raw, err := base64.StdEncoding.AppendDecode(d.b64, s)
	if err != nil {
		return d.fail(n, ErrJSONType, err)
	}
	d.b64 = raw
	switch b := n.b.(type) {
	case *array.BinaryBuilder:
		b.Append(raw)
	case *array.BinaryViewBuilder:
		b.Append(raw)
	case *array.FixedSizeBinaryBuilder:
		if len(raw) != n.width {
			return d.fail(n, ErrJSONType, fmt.Errorf("%d bytes, want %d", len(raw), n.width))
		}
		b.Append(raw)
	}
	return nil
}
