package kafkadecode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/hamba/avro/v2"
)

// Errors of Avro value decoding.
var (
	// ErrAvroData means the bytes do not decode with the writer schema.
	ErrAvroData = errors.New("kafkadecode: malformed Avro data")
	// ErrAvroIncompatible means a writer schema cannot be read into the
	// reader schema (a field changed to an incompatible type).
	ErrAvroIncompatible = errors.New("kafkadecode: Avro writer schema incompatible with reader schema")
	// ErrWireFormat means a value lacks the Confluent wire-format header.
	ErrWireFormat = errors.New("kafkadecode: value is not in Confluent wire format")
)

// AvroError reports where an Avro value failed to decode.
type AvroError struct {
	Field  string // innermost field involved
	Offset int    // byte offset in the Avro payload
	Err    error
}

func (e *AvroError) Error() string {
	return fmt.Sprintf("kafkadecode: Avro field %q at byte %d: %v", e.Field, e.Offset, e.Err)
}

// Unwrap returns the cause (wrapping ErrAvroData or ErrAvroIncompatible).
func (e *AvroError) Unwrap() error { return e.Err }

// AvroOption configures an AvroDecoder.
type AvroOption func(*avroConfig)

type avroConfig struct {
	confluent bool
	registry  *Registry
	timeout   time.Duration
}

// AvroConfluent expects every value in the Confluent wire format: a zero
// magic byte and a big-endian 4-byte schema id before the Avro payload.
// Without a registry the payload is read with the reader schema whatever
// the id.
func AvroConfluent() AvroOption { return func(c *avroConfig) { c.confluent = true } }

// AvroRegistry looks writer schemas up by id in r (implies AvroConfluent)
// and reads them into the reader schema, matching record fields by name:
// writer fields the reader lacks are skipped, reader fields the writer
// lacks become null, and int→long, int/long→double and float→double are
// promoted. A lookup blocks the Append that meets a new id for at most
// timeout (0 means 10s); a failed lookup stops Append with an error for
// which IsRetryable is true, while an unknown id dead-letters the record.
func AvroRegistry(r *Registry, timeout time.Duration) AvroOption {
	return func(c *avroConfig) { c.confluent, c.registry, c.timeout = true, r, timeout }
}

// AvroDecoder decodes Avro binary values into a struct column, with a
// decoder compiled from the schemas and appending straight into the column
// builders (no intermediate Go values). hamba/avro parses the schemas.
// It is not safe for concurrent use.
type AvroDecoder struct {
	reader avro.Schema
	typ    *arrow.StructType
	cfg    avroConfig
	bound  *array.StructBuilder
	prog   *anode            // reader schema as writer schema
	byID   map[uint32]*anode // compiled per writer schema id (registry)
	badIDs map[uint32]error  // ids whose schema cannot be read
	r      areader
}

// NewAvroDecoder returns a decoder whose output type is derived from the
// Avro record schema readerSchema (see SchemaFromAvro).
func NewAvroDecoder(readerSchema string, opts ...AvroOption) (*AvroDecoder, error) {
	s, err := parseAvro(readerSchema)
	if err != nil {
		return nil, err
	}
	st, err := avroRecordType(s)
	if err != nil {
		return nil, err
	}
	var cfg avroConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout < 0 {
		return nil, fmt.Errorf("%w: negative registry timeout", ErrInvalidOption)
	}
	if cfg.timeout == 0 {
		cfg.timeout = 10 * time.Second
	}
	return &AvroDecoder{reader: s, typ: st, cfg: cfg, byID: map[uint32]*anode{}, badIDs: map[uint32]error{}}, nil
}

// Type returns the struct type of the value column.
func (d *AvroDecoder) Type() *arrow.StructType { return d.typ }

// AppendValue decodes one Avro value into a new row of b (see ValueDecoder).
func (d *AvroDecoder) AppendValue(b *array.StructBuilder, value []byte) error {
	if b != d.bound {
		if !arrow.TypeEqual(b.Type(), d.typ) {
			b.AppendNull()
			return fmt.Errorf("%w: builder type %s, decoder type %s", ErrInvalidOption, b.Type(), d.typ)
		}
		prog, err := compileAvro(d.reader, d.reader, b, "")
		if err != nil { // the reader schema was validated by NewAvroDecoder
			b.AppendNull()
			return err
		}
		d.bound, d.prog = b, prog
		clear(d.byID)
		clear(d.badIDs)
	}
	prog := d.prog
	if d.cfg.confluent {
		if len(value) < 5 || value[0] != 0 {
			b.AppendNull()
			return ErrWireFormat
		}
		id := binary.BigEndian.Uint32(value[1:5])
		value = value[5:]
		if d.cfg.registry != nil {
			var err error
			if prog, err = d.program(id, b); err != nil {
				b.AppendNull()
				return err
			}
		}
	}
	if b.Len() == 0 {
		prog.reserve()
	}
	d.r = areader{b: value}
	if err := d.r.decode(prog); err != nil {
		return err
	}
	if d.r.i != len(value) {
		return &AvroError{Offset: d.r.i, Err: fmt.Errorf("%w: %d bytes after the record", ErrAvroData, len(value)-d.r.i)}
	}
	return nil
}

// program returns the compiled reader for writer schema id.
func (d *AvroDecoder) program(id uint32, b *array.StructBuilder) (*anode, error) {
	if p, ok := d.byID[id]; ok {
		return p, nil
	}
	if err, ok := d.badIDs[id]; ok {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.timeout)
	defer cancel()
	text, err := d.cfg.registry.Schema(ctx, id)
	if err != nil {
		if !IsRetryable(err) {
			d.badIDs[id] = err
		}
		return nil, err
	}
	ws, err := parseAvro(text)
	if err == nil {
		var p *anode
		if p, err = compileAvro(ws, d.reader, b, ""); err == nil {
			if len(d.byID) >= 1024 { // bound the cache; ids are few in practice
				clear(d.byID)
			}
			d.byID[id] = p
			return p, nil
		}
	}
	err = fmt.Errorf("schema id %d: %w", id, err)
	d.badIDs[id] = err
	return nil, err
}

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

// areader reads Avro binary encoding.
type areader struct {
	b []byte
	i int
}

var (
	errAvroEOF      = fmt.Errorf("%w: unexpected end of data", ErrAvroData)
	errAvroVarint   = fmt.Errorf("%w: bad varint", ErrAvroData)
	errAvroLength   = fmt.Errorf("%w: bad length", ErrAvroData)
	errAvroIndex    = fmt.Errorf("%w: union or enum index out of range", ErrAvroData)
	errAvroUTF8     = fmt.Errorf("%w: invalid UTF-8 in string", ErrAvroData)
	errAvroBool     = fmt.Errorf("%w: boolean not 0 or 1", ErrAvroData)
	errAvroRange    = fmt.Errorf("%w: int out of range", ErrAvroData)
	errAvroDecimal  = fmt.Errorf("%w: decimal wider than 16 bytes", ErrAvroData)
	errAvroTooMany  = fmt.Errorf("%w: block count too large", ErrAvroData)
	errAvroMaxDepth = fmt.Errorf("%w: nesting too deep", ErrAvroData)
)

func (r *areader) long() (int64, error) {
	if r.i < len(r.b) && r.b[r.i] < 0x80 {
		c := r.b[r.i]
		r.i++
		return int64(c>>1) ^ -int64(c&1), nil
	}
	u, n := binary.Uvarint(r.b[r.i:])
	if n <= 0 {
		if n == 0 {
			return 0, errAvroEOF
		}
		return 0, errAvroVarint
	}
	r.i += n
	return int64(u>>1) ^ -int64(u&1), nil
}

func (r *areader) bytes() ([]byte, error) {
	l, err := r.long()
	if err != nil {
		return nil, err
	}
	if l < 0 || l > int64(len(r.b)-r.i) {
		return nil, errAvroLength
	}
	v := r.b[r.i : r.i+int(l)]
	r.i += int(l)
	return v, nil
}

func (r *areader) fail(n *anode, err error) error {
	return &AvroError{Field: n.name, Offset: r.i, Err: err}
}

// decode reads one value of n, appending exactly one entry to n.b (when
// n.b is not nil), also on error.
func (r *areader) decode(n *anode) error {
	return r.decodeDepth(n, 0)
}

func (r *areader) decodeDepth(n *anode, depth int) error {
	if depth > 64 {
		if n.b != nil {
			n.b.AppendNull()
		}
		return r.fail(n, errAvroMaxDepth)
	}
	if n.op != aUnion {
		n.count++
	}
	var err error
	switch n.op {
	case aRecord:
		return r.record(n, depth)
	case aArray, aMap:
		return r.blocks(n, depth)
	case aUnion:
		idx, err := r.long()
		if err == nil && (idx < 0 || idx >= int64(len(n.branches))) {
			err = errAvroIndex
		}
		if err != nil {
			if n.b != nil {
				n.b.AppendNull()
			}
			return r.fail(n, err)
		}
		br := n.branches[idx]
		if br.op == aNull {
			if br.b != nil {
				br.b.AppendNull()
			}
			return nil
		}
		return r.decodeDepth(br, depth+1)
	case aNull:
		if n.b != nil {
			n.b.AppendNull()
		}
		return nil
	default:
		err = r.scalar(n)
	}
	if err != nil {
		if n.b != nil {
			n.b.AppendNull()
		}
		return r.fail(n, err)
	}
	return nil
}

func (r *areader) record(n *anode, depth int) error {
	if n.b != nil {
		n.b.(*array.StructBuilder).Append(true)
		clear(n.seen)
	}
	var err error
	for i, f := range n.fields {
		if n.b != nil && n.slot[i] >= 0 {
			n.seen[n.slot[i]] = true
		}
		if err = r.decodeDepth(f, depth+1); err != nil {
			break
		}
	}
	for i, fb := range n.fill {
		if !n.seen[i] {
			fb.AppendNull()
		}
	}
	return err
}

// blocks reads an array or map: blocks of (count, [byte size,] items)
// ending with a zero count.
func (r *areader) blocks(n *anode, depth int) error {
	if n.b != nil {
		switch b := n.b.(type) {
		case *array.ListBuilder:
			b.Append(true)
		case *array.MapBuilder:
			b.Append(true)
		}
	}
	for {
		count, err := r.long()
		if err != nil {
			return r.fail(n, err)
		}
		if count == 0 {
			return nil
		}
		if count < 0 {
			if count == math.MinInt64 {
				return r.fail(n, errAvroTooMany)
			}
			count = -count
			if _, err := r.long(); err != nil { // block size in bytes
				return r.fail(n, err)
			}
		}
		per := n.elem.minSize
		if n.op == aMap {
			per++ // the key's length
		}
		if (per > 0 && count > int64(len(r.b)-r.i)/int64(per)) || (per == 0 && count > 1<<16) {
			return r.fail(n, errAvroTooMany)
		}
		for ; count > 0; count-- {
			if n.op == aMap {
				k, err := r.bytes()
				if err == nil && n.key != nil && !utf8.Valid(k) {
					err = errAvroUTF8
				}
				if err != nil {
					return r.fail(n, err)
				}
				if n.key != nil {
					n.key.BinaryBuilder.Append(k)
				}
			}
			if err := r.decodeDepth(n.elem, depth+1); err != nil {
				return err
			}
		}
	}
}

func (r *areader) scalar(n *anode) error {
	switch n.op {
	case aBool:
		if r.i >= len(r.b) {
			return errAvroEOF
		}
		c := r.b[r.i]
		r.i++
		if c > 1 {
			return errAvroBool
		}
		if n.b != nil {
			n.b.(*array.BooleanBuilder).Append(c == 1)
		}
	case aInt, aLong:
		v, err := r.long()
		if err != nil {
			return err
		}
		if n.op == aInt && (v < math.MinInt32 || v > math.MaxInt32) {
			return errAvroRange
		}
		switch b := n.b.(type) {
		case nil:
		case *array.Int64Builder:
			b.Append(v)
		case *array.Int32Builder:
			b.Append(int32(v))
		case *array.TimestampBuilder:
			b.Append(arrow.Timestamp(v))
		case *array.Date32Builder:
			b.Append(arrow.Date32(v))
		case *array.Time32Builder:
			b.Append(arrow.Time32(v))
		case *array.Time64Builder:
			b.Append(arrow.Time64(v))
		case *array.Float64Builder:
			b.Append(float64(v))
		}
	case aFloat:
		if len(r.b)-r.i < 4 {
			return errAvroEOF
		}
		v := math.Float32frombits(binary.LittleEndian.Uint32(r.b[r.i:]))
		r.i += 4
		switch b := n.b.(type) {
		case *array.Float32Builder:
			b.Append(v)
		case *array.Float64Builder:
			b.Append(float64(v))
		}
	case aDouble:
		if len(r.b)-r.i < 8 {
			return errAvroEOF
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.i:]))
		r.i += 8
		if n.b != nil {
			n.b.(*array.Float64Builder).Append(v)
		}
	case aBytes, aString, aFixed:
		var v []byte
		var err error
		if n.op == aFixed {
			if len(r.b)-r.i < n.size {
				return errAvroEOF
			}
			v = r.b[r.i : r.i+n.size]
			r.i += n.size
		} else if v, err = r.bytes(); err != nil {
			return err
		}
		n.bytes += len(v)
		switch b := n.b.(type) {
		case nil:
		case *array.StringBuilder:
			if !utf8.Valid(v) {
				return errAvroUTF8
			}
			b.BinaryBuilder.Append(v)
		case *array.BinaryBuilder:
			b.Append(v)
		case *array.FixedSizeBinaryBuilder:
			b.Append(v)
		case *array.Decimal128Builder:
			d, err := decimalFromTwos(v)
			if err != nil {
				return err
			}
			b.Append(d)
		}
	case aEnum:
		idx, err := r.long()
		if err != nil {
			return err
		}
		if idx < 0 || idx >= int64(len(n.symbols)) {
			return errAvroIndex
		}
		if n.b != nil {
			n.b.(*array.StringBuilder).Append(n.symbols[idx])
		}
	}
	return nil
}

// decimalFromTwos reads a big-endian two's-complement unscaled integer.
func decimalFromTwos(v []byte) (decimal128.Num, error) {
	if len(v) > 16 {
		return decimal128.Num{}, errAvroDecimal
	}
	if len(v) == 0 {
		return decimal128.Num{}, nil
	}
	var buf [16]byte
	if v[0]&0x80 != 0 {
		for i := range buf {
			buf[i] = 0xff
		}
	}
	copy(buf[16-len(v):], v)
	return decimal128.New(int64(binary.BigEndian.Uint64(buf[:8])), binary.BigEndian.Uint64(buf[8:])), nil
}
