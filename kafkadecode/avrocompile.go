package kafkadecode

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/hamba/avro/v2"
)

type aop uint8

const (
	aNull aop = iota
	aBool
	aInt
	aLong
	aFloat
	aDouble
	aBytes
	aString
	aFixed
	aEnum
	aRecord
	aArray
	aMap
	aUnion
)

// anode is one step of a compiled Avro reader: the writer's encoding (op)
// and the builder the value goes to (nil: decode and discard).
type anode struct {
	op      aop
	name    string
	b       array.Builder
	size    int      // fixed size
	symbols []string // enum symbols
	scale   int32    // decimal from bytes/fixed
	isDec   bool

	fields []*anode // record: writer fields in order
	fill   []array.Builder
	defs   []any // record: value for reader fields the writer lacks (nil: null)
	seen   []bool
	slot   []int // record: reader field index of each writer field, or -1

	elem     *anode // array items, map values
	key      *array.StringBuilder
	branches []*anode // union
	minSize  int      // minimum encoded size, guards zero-size item loops

	// Entries and bytes appended since the builder was emptied, and the
	// previous round's totals, to reserve builder capacity once.
	count, lastCount int
	bytes, lastBytes int
}

// reserve sizes the builders of n's subtree for what the previous round
// held; called when the value builder has just been emptied.
func (n *anode) reserve() {
	if n.count > 0 {
		n.lastCount, n.lastBytes = n.count, n.bytes
	}
	n.count, n.bytes = 0, 0
	if n.b != nil && n.lastCount > 0 && n.op != aUnion {
		n.b.Reserve(n.lastCount)
		if rd, ok := n.b.(interface{ ReserveData(int) }); ok && n.lastBytes > 0 {
			rd.ReserveData(n.lastBytes)
		}
	}
	for _, c := range n.fields {
		c.reserve()
	}
	for _, c := range n.branches {
		c.reserve()
	}
	if n.elem != nil {
		n.elem.reserve()
	}
}

// compileAvro compiles writer schema w to decode into builder b, whose type
// came from reader schema r (nil b: skip). Errors wrap ErrAvroIncompatible
// or ErrUnsupportedType.
func compileAvro(w, r avro.Schema, b array.Builder, name string) (*anode, error) {
	if ref, ok := w.(*avro.RefSchema); ok {
		w = ref.Schema()
	}
	if r != nil {
		if ref, ok := r.(*avro.RefSchema); ok {
			r = ref.Schema()
		}
		if u, ok := r.(*avro.UnionSchema); ok {
			inner, _ := nullableBranch(u)
			r = inner
			if ref, ok := r.(*avro.RefSchema); ok {
				r = ref.Schema()
			}
		}
	}
	n := &anode{name: name, b: b, minSize: 1}
	incompatible := func() (*anode, error) {
		return nil, fmt.Errorf("%w: field %q: writer %s, reader %s", ErrAvroIncompatible, name, w.Type(), r.Type())
	}
	if wu, ok := w.(*avro.UnionSchema); ok {
		n.op = aUnion
		for _, bt := range wu.Types() {
			var rt avro.Schema
			if b != nil && bt.Type() != avro.Null {
				rt = r
			}
			bb := b
			if bt.Type() == avro.Null {
				bb = nil
			}
			c, err := compileAvro(bt, rt, bb, name)
			if err != nil {
				return nil, err
			}
			if bt.Type() == avro.Null {
				c.b = b // a null branch appends a null to the target
			}
			n.branches = append(n.branches, c)
		}
		return n, nil
	}
	if b != nil && r != nil && r.Type() != w.Type() && !promotable(w.Type(), r.Type()) {
		return incompatible()
	}
	switch t := w.(type) {
	case *avro.NullSchema:
		n.op, n.minSize = aNull, 0
	case *avro.RecordSchema:
		n.op, n.minSize = aRecord, 0
		var rr *avro.RecordSchema
		var sb *array.StructBuilder
		if b != nil {
			rr, sb = r.(*avro.RecordSchema), b.(*array.StructBuilder)
			n.seen = make([]bool, len(rr.Fields()))
			for i := range rr.Fields() {
				n.fill = append(n.fill, sb.FieldBuilder(i))
			}
		}
		for _, wf := range t.Fields() {
			slot := -1
			var rf avro.Schema
			var cb array.Builder
			if rr != nil {
				for i, f := range rr.Fields() {
					if f.Name() == wf.Name() {
						slot, rf, cb = i, f.Type(), sb.FieldBuilder(i)
						break
					}
				}
			}
			c, err := compileAvro(wf.Type(), rf, cb, wf.Name())
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, c)
			n.slot = append(n.slot, slot)
			n.minSize += c.minSize
		}
		if rr != nil {
			if err := n.compileDefaults(rr, sb); err != nil {
				return nil, err
			}
		}
	case *avro.ArraySchema:
		n.op = aArray
		var ri avro.Schema
		var eb array.Builder
		if b != nil {
			ri, eb = r.(*avro.ArraySchema).Items(), b.(*array.ListBuilder).ValueBuilder()
		}
		c, err := compileAvro(t.Items(), ri, eb, name)
		if err != nil {
			return nil, err
		}
		n.elem = c
	case *avro.MapSchema:
		n.op = aMap
		var rv avro.Schema
		var ib array.Builder
		if b != nil {
			mb := b.(*array.MapBuilder)
			rv, ib, n.key = r.(*avro.MapSchema).Values(), mb.ItemBuilder(), mb.KeyBuilder().(*array.StringBuilder)
		}
		c, err := compileAvro(t.Values(), rv, ib, name)
		if err != nil {
			return nil, err
		}
		n.elem = c
	case *avro.EnumSchema:
		n.op, n.symbols = aEnum, t.Symbols()
	case *avro.FixedSchema:
		n.op, n.size, n.minSize = aFixed, t.Size(), t.Size()
		if l, ok := t.Logical().(*avro.DecimalLogicalSchema); ok {
			n.isDec, n.scale = true, int32(l.Scale())
		}
		if b != nil {
			rf, ok := r.(*avro.FixedSchema)
			if !ok || rf.Size() != t.Size() || (rf.Logical() == nil) != (t.Logical() == nil) || !sameDecimal(rf.Logical(), t.Logical()) {
				return incompatible()
			}
		}
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Boolean:
			n.op = aBool
		case avro.Int:
			n.op = aInt
		case avro.Long:
			n.op = aLong
		case avro.Float:
			n.op, n.minSize = aFloat, 4
		case avro.Double:
			n.op, n.minSize = aDouble, 8
		case avro.Bytes:
			n.op = aBytes
			if l, ok := t.Logical().(*avro.DecimalLogicalSchema); ok {
				n.isDec, n.scale = true, int32(l.Scale())
			}
		case avro.String:
			n.op = aString
		}
		if b != nil {
			if rp, ok := r.(*avro.PrimitiveSchema); ok && r.Type() == w.Type() &&
				(logicalName(rp) != logicalName(t) || !sameDecimal(rp.Logical(), t.Logical())) {
				return incompatible()
			}
		}
	default:
		return nil, fmt.Errorf("%w: Avro type %s", ErrUnsupportedType, w.Type())
	}
	return n, nil
}

func logicalName(p *avro.PrimitiveSchema) avro.LogicalType {
	if p.Logical() == nil {
		return ""
	}
	return p.Logical().Type()
}

// sameDecimal reports whether two logical types agree on decimal scale
// and precision (true when neither is a decimal).
func sameDecimal(a, b avro.LogicalSchema) bool {
	da, okA := a.(*avro.DecimalLogicalSchema)
	db, okB := b.(*avro.DecimalLogicalSchema)
	if okA != okB {
		return false
	}
	return !okA || (da.Scale() == db.Scale() && da.Precision() == db.Precision())
}

func promotable(w, r avro.Type) bool {
	switch w {
	case avro.Int:
		return r == avro.Long || r == avro.Double
	case avro.Long:
		return r == avro.Double
	case avro.Float:
		return r == avro.Double
	}
	return false
}

// compileDefaults decides what reader fields missing from the writer get:
// null for nullable fields, else the field's default, as Avro schema
// resolution requires; a missing field with neither is incompatible.
func (n *anode) compileDefaults(rr *avro.RecordSchema, sb *array.StructBuilder) error {
	matched := make([]bool, len(rr.Fields()))
	for _, s := range n.slot {
		if s >= 0 {
			matched[s] = true
		}
	}
	n.defs = make([]any, len(rr.Fields()))
	for i, f := range rr.Fields() {
		if matched[i] {
			continue
		}
		if u, ok := f.Type().(*avro.UnionSchema); ok {
			if _, nullable := nullableBranch(u); nullable {
				continue
			}
		}
		if !f.HasDefault() {
			return fmt.Errorf("%w: reader field %q is missing from the writer and has no default", ErrAvroIncompatible, f.Name())
		}
		v, ok := defaultFor(sb.FieldBuilder(i), f.Default())
		if !ok {
			return fmt.Errorf("%w: default %v of reader field %q", ErrUnsupportedType, f.Default(), f.Name())
		}
		n.defs[i] = v
	}
	return nil
}

// defaultFor converts a default as hamba/avro parses it to what
// appendDefault appends to b, reporting unsupported combinations.
func defaultFor(b array.Builder, d any) (any, bool) {
	var i int64
	isInt := true
	switch v := d.(type) {
	case int:
		i = int64(v)
	case int64:
		i = v
	default:
		isInt = false
	}
	switch b.(type) {
	case *array.BooleanBuilder:
		_, ok := d.(bool)
		return d, ok
	case *array.Int32Builder, *array.Date32Builder, *array.Time32Builder:
		return i, isInt && i >= -1<<31 && i < 1<<31
	case *array.Int64Builder, *array.TimestampBuilder, *array.Time64Builder:
		return i, isInt
	case *array.Float32Builder:
		f, ok := d.(float32)
		return f, ok
	case *array.Float64Builder:
		switch v := d.(type) {
		case float64:
			return v, true
		case float32:
			return float64(v), true
		}
		return float64(i), isInt
	case *array.StringBuilder:
		_, ok := d.(string)
		return d, ok
	case *array.BinaryBuilder:
		_, ok := d.([]byte)
		return d, ok
	}
	return nil, false
}

// appendDefault appends a value prepared by defaultFor.
func appendDefault(b array.Builder, v any) {
	switch b := b.(type) {
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.Int32Builder:
		b.Append(int32(v.(int64)))
	case *array.Date32Builder:
		b.Append(arrow.Date32(v.(int64)))
	case *array.Time32Builder:
		b.Append(arrow.Time32(v.(int64)))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v.(int64)))
	case *array.Time64Builder:
		b.Append(arrow.Time64(v.(int64)))
	case *array.Float32Builder:
		b.Append(v.(float32))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.BinaryBuilder:
		b.Append(v.([]byte))
	}
}
