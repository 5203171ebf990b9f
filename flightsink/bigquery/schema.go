package bigquery

import (
	"fmt"
	"math"
	"slices"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/managedwriter/adapt"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/flightline/flightline"
)

// column is how one Arrow column is written: its BigQuery type and the
// protobuf wire type and encoder of its values.
type column struct {
	name     string
	bq       bigquery.FieldType
	nullable bool
	wire     protowire.Type
	proto    descriptorpb.FieldDescriptorProto_Type
	// scale converts timestamp units to microseconds (multiply); 0 for
	// other types.
	scale int64
	// repeated: a list column (REPEATED); its values are encoded as elem.
	repeated bool
	elem     *column
	// fields of a RECORD (a struct, or the struct elements of a list).
	fields []column
}

// mapField maps one Arrow field to a BigQuery column, or refuses it with an
// error naming it. The mapping is exact: every value of the Arrow type has
// one BigQuery value and reads back as the same value (a TIMESTAMP reads
// back in UTC; see the package doc).
func mapField(f arrow.Field) (column, error) { return mapNested(f, 0) }

func mapNested(f arrow.Field, depth int) (column, error) {
	c := column{name: f.Name, nullable: f.Nullable}
	refuse := func(why string) (column, error) {
		return column{}, fmt.Errorf("%w: column %q: %s %s", flightline.ErrSchemaMismatch, f.Name, f.Type, why)
	}
	switch t := f.Type.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type:
		c.bq, c.wire, c.proto = bigquery.IntegerFieldType, protowire.VarintType, descriptorpb.FieldDescriptorProto_TYPE_INT64
	case *arrow.Uint64Type:
		return refuse("does not fit INT64 (BigQuery has no unsigned 64-bit integer)")
	case *arrow.Float32Type, *arrow.Float64Type:
		c.bq, c.wire, c.proto = bigquery.FloatFieldType, protowire.Fixed64Type, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	case *arrow.BooleanType:
		c.bq, c.wire, c.proto = bigquery.BooleanFieldType, protowire.VarintType, descriptorpb.FieldDescriptorProto_TYPE_BOOL
	case *arrow.StringType, *arrow.LargeStringType:
		c.bq, c.wire, c.proto = bigquery.StringFieldType, protowire.BytesType, descriptorpb.FieldDescriptorProto_TYPE_STRING
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.FixedSizeBinaryType:
		c.bq, c.wire, c.proto = bigquery.BytesFieldType, protowire.BytesType, descriptorpb.FieldDescriptorProto_TYPE_BYTES
	case *arrow.Date32Type:
		c.bq, c.wire, c.proto = bigquery.DateFieldType, protowire.VarintType, descriptorpb.FieldDescriptorProto_TYPE_INT32
	case *arrow.TimestampType:
		if t.TimeZone == "" {
			return refuse("has no time zone: a zone-less timestamp (BigQuery DATETIME) is not supported yet; give it a zone (UTC)")
		}
		switch t.Unit {
		case arrow.Second:
			c.scale = 1_000_000
		case arrow.Millisecond:
			c.scale = 1_000
		case arrow.Microsecond:
			c.scale = 1
		default:
			return refuse("is finer than BigQuery's microseconds")
		}
		c.bq, c.wire, c.proto = bigquery.TimestampFieldType, protowire.VarintType, descriptorpb.FieldDescriptorProto_TYPE_INT64
	case *arrow.BinaryViewType:
		c.bq, c.wire, c.proto = bigquery.BytesFieldType, protowire.BytesType, descriptorpb.FieldDescriptorProto_TYPE_BYTES
	case *arrow.StringViewType:
		c.bq, c.wire, c.proto = bigquery.StringFieldType, protowire.BytesType, descriptorpb.FieldDescriptorProto_TYPE_STRING
	case *arrow.ListType:
		if depth > 0 {
			return refuse("is a list inside a list or struct: only one level of REPEATED or RECORD is written")
		}
		elem, err := mapNested(arrow.Field{Name: f.Name, Type: t.Elem(), Nullable: true}, depth+1)
		if err != nil {
			return column{}, err
		}
		if elem.repeated {
			return refuse("is a list of lists: BigQuery has no ARRAY of ARRAY")
		}
		elem.repeated = false
		c = elem
		c.nullable = f.Nullable
		c.repeated = true
		c.elem = &elem
	case *arrow.StructType:
		if depth > 1 {
			return refuse("nests too deep: only one level of RECORD is written")
		}
		for _, ch := range t.Fields() {
			cc, err := mapNested(ch, 2)
			if err != nil {
				return column{}, fmt.Errorf("%w (in column %q)", err, f.Name)
			}
			c.fields = append(c.fields, cc)
		}
		c.bq, c.wire, c.proto = bigquery.RecordFieldType, protowire.BytesType, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	case *arrow.LargeListType, *arrow.FixedSizeListType, *arrow.MapType:
		return refuse("is not mapped: of the nested types, list and struct are (REPEATED, RECORD)")
	default:
		return refuse("has no exact BigQuery type")
	}
	return c, nil
}

// layout is the mapping of one Arrow schema.
type layout struct {
	schema *arrow.Schema
	cols   []column
	desc   *descriptorpb.DescriptorProto
}

func newLayout(s *arrow.Schema) (*layout, error) {
	l := &layout{schema: s}
	seen := map[string]bool{}
	for _, f := range s.Fields() {
		if seen[f.Name] {
			return nil, fmt.Errorf("%w: column %q appears twice", flightline.ErrSchemaMismatch, f.Name)
		}
		seen[f.Name] = true
		c, err := mapField(f)
		if err != nil {
			return nil, err
		}
		l.cols = append(l.cols, c)
	}
	// The staging row's descriptor: proto2, one optional (or repeated)
	// field per column numbered from 1 in schema order, a message of its
	// own per RECORD; normalized into one self-contained DescriptorProto.
	// BigQuery matches fields to columns by name.
	file := &descriptorpb.FileDescriptorProto{Name: proto.String("flightline_row.proto"), Syntax: proto.String("proto2")}
	var message func(name string, cols []column) *descriptorpb.DescriptorProto
	message = func(name string, cols []column) *descriptorpb.DescriptorProto {
		d := &descriptorpb.DescriptorProto{Name: proto.String(name)}
		for i, c := range cols {
			fd := &descriptorpb.FieldDescriptorProto{
				Name: proto.String(c.name), Number: proto.Int32(int32(i + 1)),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: c.proto.Enum(),
			}
			if c.repeated {
				fd.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
			}
			if c.fields != nil {
				sub := fmt.Sprintf("%s_%d", name, i+1)
				file.MessageType = append(file.MessageType, message(sub, c.fields))
				fd.TypeName = proto.String("." + sub)
			}
			d.Field = append(d.Field, fd)
		}
		return d
	}
	file.MessageType = append([]*descriptorpb.DescriptorProto{message("FlightlineRow", l.cols)}, file.MessageType...)
	fdesc, err := protodesc.NewFile(file, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: bigquery: building the row descriptor: %v", flightline.ErrInternal, err)
	}
	if l.desc, err = adapt.NormalizeDescriptor(fdesc.Messages().ByName("FlightlineRow")); err != nil {
		return nil, fmt.Errorf("%w: bigquery: normalizing the row descriptor: %v", flightline.ErrInternal, err)
	}
	return l, nil
}

// tableSchema is the target's schema (and the staging table's, where
// every column is NULLABLE).
func (l *layout) tableSchema(staging bool) bigquery.Schema { return bqSchema(l.cols, staging) }

func bqSchema(cols []column, staging bool) bigquery.Schema {
	out := make(bigquery.Schema, 0, len(cols))
	for _, c := range cols {
		f := &bigquery.FieldSchema{Name: c.name, Type: c.bq, Repeated: c.repeated,
			Required: !c.nullable && !staging && !c.repeated}
		if c.fields != nil {
			f.Schema = bqSchema(c.fields, staging)
		}
		out = append(out, f)
	}
	return out
}

// checkTable reports whether an existing table holds l's columns: the same
// names and types in the same order (nullability may be looser in the
// table). The error names the first column that differs.
func (l *layout) checkTable(table string, ts bigquery.Schema) error {
	if len(ts) != len(l.cols) {
		return fmt.Errorf("%w: table %s has %d columns, the batch %d", flightline.ErrSchemaMismatch, table, len(ts), len(l.cols))
	}
	return checkCols(table, l.cols, ts)
}

func checkCols(table string, cols []column, ts bigquery.Schema) error {
	if len(ts) != len(cols) {
		return fmt.Errorf("%w: table %s: a RECORD has %d fields, the batch's %d", flightline.ErrSchemaMismatch, table, len(ts), len(cols))
	}
	for i, c := range cols {
		f := ts[i]
		if f.Name != c.name || f.Type != c.bq || f.Repeated != c.repeated {
			return fmt.Errorf("%w: table %s column %d is %s %s (repeated %t), the batch's %q needs %s (repeated %t)",
				flightline.ErrSchemaMismatch, table, i, f.Name, f.Type, f.Repeated, c.name, c.bq, c.repeated)
		}
		if f.Required && c.nullable {
			return fmt.Errorf("%w: table %s column %q is REQUIRED, the batch's is nullable", flightline.ErrSchemaMismatch, table, c.name)
		}
		if c.fields != nil {
			if err := checkCols(table, c.fields, f.Schema); err != nil {
				return err
			}
		}
	}
	return nil
}

// encoder turns a batch into protobuf rows for the Storage Write API. It
// writes the wire format directly into one buffer that it reuses from batch
// to batch; rows are slices of that buffer, valid until the next encode.
// No per-value allocation (a RECORD is encoded in a reused scratch buffer
// first, for its length prefix).
type encoder struct {
	buf  []byte
	sub  []byte
	ends []int
	rows [][]byte
}

// encode encodes the rows sel of rec (whose schema is l's), every row when
// sel is nil. A NULL element of a list is refused (a BigQuery ARRAY cannot
// hold NULL).
func (e *encoder) encode(l *layout, rec arrow.RecordBatch, sel []int) ([][]byte, error) {
	n := int(rec.NumRows())
	if sel != nil {
		n = len(sel)
	}
	e.buf, e.ends, e.rows = e.buf[:0], e.ends[:0], e.rows[:0]
	for j := 0; j < n; j++ {
		r := j
		if sel != nil {
			r = sel[j]
		}
		for i := range l.cols {
			var err error
			if e.buf, err = e.appendColumn(e.buf, protowire.Number(i+1), &l.cols[i], rec.Column(i), r); err != nil {
				return nil, err
			}
		}
		e.ends = append(e.ends, len(e.buf))
	}
	start := 0
	for _, end := range e.ends {
		e.rows = append(e.rows, e.buf[start:end:end])
		start = end
	}
	return e.rows, nil
}

// appendColumn appends field num holding row r of col (absent when NULL).
func (e *encoder) appendColumn(b []byte, num protowire.Number, c *column, col arrow.Array, r int) ([]byte, error) {
	if col.IsNull(r) {
		return b, nil
	}
	if c.repeated {
		list := col.(*array.List)
		start, end := list.ValueOffsets(r)
		vals := list.ListValues()
		for j := int(start); j < int(end); j++ {
			if vals.IsNull(j) {
				return nil, fmt.Errorf("%w: bigquery: column %q: a list holds a NULL element, which a BigQuery ARRAY cannot", flightline.ErrInvalidInput, c.name)
			}
			b = e.appendOne(b, num, c.elem, vals, j)
		}
		return b, nil
	}
	return e.appendOne(b, num, c, col, r), nil
}

// appendOne appends one non-NULL value: a scalar, or a RECORD.
func (e *encoder) appendOne(b []byte, num protowire.Number, c *column, col arrow.Array, r int) []byte {
	b = protowire.AppendTag(b, num, c.wire)
	if c.fields == nil {
		return appendValue(b, *c, col, r)
	}
	st := col.(*array.Struct)
	e.sub = e.sub[:0]
	for k := range c.fields {
		f := st.Field(k)
		if f.IsNull(r) {
			continue
		}
		e.sub = protowire.AppendTag(e.sub, protowire.Number(k+1), c.fields[k].wire)
		e.sub = appendValue(e.sub, c.fields[k], f, r)
	}
	return protowire.AppendBytes(b, e.sub)
}

func appendValue(b []byte, c column, col arrow.Array, r int) []byte {
	switch a := col.(type) {
	case *array.Int8:
		return protowire.AppendVarint(b, uint64(int64(a.Value(r))))
	case *array.Int16:
		return protowire.AppendVarint(b, uint64(int64(a.Value(r))))
	case *array.Int32:
		return protowire.AppendVarint(b, uint64(int64(a.Value(r))))
	case *array.Int64:
		return protowire.AppendVarint(b, uint64(a.Value(r)))
	case *array.Uint8:
		return protowire.AppendVarint(b, uint64(a.Value(r)))
	case *array.Uint16:
		return protowire.AppendVarint(b, uint64(a.Value(r)))
	case *array.Uint32:
		return protowire.AppendVarint(b, uint64(a.Value(r)))
	case *array.Float32:
		return protowire.AppendFixed64(b, math.Float64bits(float64(a.Value(r))))
	case *array.Float64:
		return protowire.AppendFixed64(b, math.Float64bits(a.Value(r)))
	case *array.Boolean:
		return protowire.AppendVarint(b, protowire.EncodeBool(a.Value(r)))
	case *array.String:
		return protowire.AppendString(b, a.Value(r))
	case *array.LargeString:
		return protowire.AppendString(b, a.Value(r))
	case *array.Binary:
		return protowire.AppendBytes(b, a.Value(r))
	case *array.LargeBinary:
		return protowire.AppendBytes(b, a.Value(r))
	case *array.FixedSizeBinary:
		return protowire.AppendBytes(b, a.Value(r))
	case *array.BinaryView:
		return protowire.AppendBytes(b, a.Value(r))
	case *array.StringView:
		return protowire.AppendString(b, a.Value(r))
	case *array.Date32:
		return protowire.AppendVarint(b, uint64(int64(a.Value(r))))
	case *array.Timestamp:
		return protowire.AppendVarint(b, uint64(int64(a.Value(r))*c.scale))
	}
	// newLayout admits only the types above.
	panic(fmt.Sprintf("bigquery: no encoder for %T", col))
}

// lastPerKey returns the rows of rec to write when some key occurs more
// than once — the last row of each key, by position, in position order —
// and nil when every key is unique (write every row). keyIdx are the key
// columns; scratch is reused between batches.
func (d *dedup) lastPerKey(l *layout, rec arrow.RecordBatch, keyIdx []int) []int {
	n := int(rec.NumRows())
	clear(d.last)
	if d.last == nil {
		d.last = map[string]int{}
	}
	dups := false
	for r := 0; r < n; r++ {
		d.key = d.key[:0]
		for _, i := range keyIdx {
			d.key = appendValue(d.key, l.cols[i], rec.Column(i), r)
			d.key = append(d.key, 0xff) // separates variable-length values
		}
		if _, ok := d.last[string(d.key)]; ok {
			dups = true
		}
		d.last[string(d.key)] = r
	}
	if !dups {
		return nil
	}
	d.sel = d.sel[:0]
	for _, r := range d.last {
		d.sel = append(d.sel, r)
	}
	slices.Sort(d.sel)
	return d.sel
}

type dedup struct {
	last map[string]int
	key  []byte
	sel  []int
}
