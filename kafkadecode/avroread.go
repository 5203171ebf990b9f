package kafkadecode

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

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
			if d := n.defs[i]; d != nil && err == nil {
				appendDefault(fb, d)
			} else {
				fb.AppendNull()
			}
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
