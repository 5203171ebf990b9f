package bigquery

import (
	"fmt"
	"math"
	"slices"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
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
}

// mapField maps one Arrow field to a BigQuery column, or refuses it with an
// error naming it. The mapping is exact: every value of the Arrow type has
// one BigQuery value and reads back as the same value (a TIMESTAMP reads
// back in UTC; see the package doc).
func mapField(f arrow.Field) (column, error) {
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
	case *arrow.ListType, *arrow.LargeListType, *arrow.FixedSizeListType, *arrow.StructType, *arrow.MapType:
		return refuse("is nested: REPEATED and RECORD columns are not supported by this sink (flatten it first)")
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
	// The staging row's descriptor: proto2, one optional field per column
	// numbered from 1 in schema order. BigQuery matches fields to columns by
	// name.
	d := &descriptorpb.DescriptorProto{Name: proto.String("FlightlineRow")}
	add := func(name string, num int, t descriptorpb.FieldDescriptorProto_Type) {
		d.Field = append(d.Field, &descriptorpb.FieldDescriptorProto{
			Name: proto.String(name), Number: proto.Int32(int32(num)),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: t.Enum(),
		})
	}
	for i, c := range l.cols {
		add(c.name, i+1, c.proto)
	}
	l.desc = d
	return l, nil
}

// tableSchema is the target's schema (and the staging table's, where
// every column is NULLABLE).
func (l *layout) tableSchema(staging bool) bigquery.Schema {
	out := make(bigquery.Schema, 0, len(l.cols))
	for _, c := range l.cols {
		out = append(out, &bigquery.FieldSchema{Name: c.name, Type: c.bq, Required: !c.nullable && !staging})
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
	for i, c := range l.cols {
		f := ts[i]
		if f.Name != c.name || f.Type != c.bq || f.Repeated {
			return fmt.Errorf("%w: table %s column %d is %s %s, the batch's %q needs %s",
				flightline.ErrSchemaMismatch, table, i, f.Name, f.Type, c.name, c.bq)
		}
		if f.Required && c.nullable {
			return fmt.Errorf("%w: table %s column %q is REQUIRED, the batch's is nullable", flightline.ErrSchemaMismatch, table, c.name)
		}
	}
	return nil
}

// encoder turns a batch into protobuf rows for the Storage Write API. It
// writes the wire format directly into one buffer that it reuses from batch
// to batch; rows are slices of that buffer, valid until the next encode.
// No per-value allocation.
type encoder struct {
	buf  []byte
	ends []int
	rows [][]byte
}

// encode encodes the rows sel of rec (whose schema is l's), every row when
// sel is nil.
func (e *encoder) encode(l *layout, rec arrow.RecordBatch, sel []int) [][]byte {
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
		for i, c := range l.cols {
			col := rec.Column(i)
			if col.IsNull(r) {
				continue
			}
			e.buf = protowire.AppendTag(e.buf, protowire.Number(i+1), c.wire)
			e.buf = appendValue(e.buf, c, col, r)
		}
		e.ends = append(e.ends, len(e.buf))
	}
	start := 0
	for _, end := range e.ends {
		e.rows = append(e.rows, e.buf[start:end:end])
		start = end
	}
	return e.rows
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
