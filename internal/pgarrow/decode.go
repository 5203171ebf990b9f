package pgarrow

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Decoder appends one binary result value (nil for NULL) to a builder.
type Decoder func(b array.Builder, v []byte) error

// NewDecoder returns the decoder of binary values of type oid into a builder
// of type dt, where dt came from ForPostgres(oid, typmod) with binary = true,
// or dt is utf8 and the value is a text form.
func NewDecoder(oid uint32, dt arrow.DataType) (Decoder, error) {
	if dt.ID() == arrow.STRING && oid != OIDJSONB {
		return textDec, nil
	}
	be := binary.BigEndian
	switch oid {
	case OIDInt2:
		return fixed(2, func(b array.Builder, v []byte) { b.(*array.Int16Builder).Append(int16(be.Uint16(v))) }), nil
	case OIDInt4:
		return fixed(4, func(b array.Builder, v []byte) { b.(*array.Int32Builder).Append(int32(be.Uint32(v))) }), nil
	case OIDInt8:
		return fixed(8, func(b array.Builder, v []byte) { b.(*array.Int64Builder).Append(int64(be.Uint64(v))) }), nil
	case OIDFloat4:
		return fixed(4, func(b array.Builder, v []byte) {
			b.(*array.Float32Builder).Append(math.Float32frombits(be.Uint32(v)))
		}), nil
	case OIDFloat8:
		return fixed(8, func(b array.Builder, v []byte) {
			b.(*array.Float64Builder).Append(math.Float64frombits(be.Uint64(v)))
		}), nil
	case OIDBool:
		return fixed(1, func(b array.Builder, v []byte) { b.(*array.BooleanBuilder).Append(v[0] != 0) }), nil
	case OIDBytea:
		return func(b array.Builder, v []byte) error {
			if v == nil {
				b.AppendNull()
			} else {
				b.(*array.BinaryBuilder).Append(v)
			}
			return nil
		}, nil
	case OIDJSONB:
		return func(b array.Builder, v []byte) error {
			if v == nil {
				b.AppendNull()
				return nil
			}
			if len(v) == 0 || v[0] != 1 {
				return fmt.Errorf("pgarrow: unknown jsonb binary version")
			}
			b.(*array.StringBuilder).BinaryBuilder.Append(v[1:])
			return nil
		}, nil
	case OIDTimestamp, OIDTimestamptz:
		return fixed(8, func(b array.Builder, v []byte) {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(int64(be.Uint64(v)) + pgEpochMicros))
		}), nil
	case OIDDate:
		return fixed(4, func(b array.Builder, v []byte) {
			b.(*array.Date32Builder).Append(arrow.Date32(int32(be.Uint32(v)) + pgEpochDays))
		}), nil
	case OIDNumeric:
		dec, ok := dt.(*arrow.Decimal128Type)
		if !ok {
			break
		}
		return func(b array.Builder, v []byte) error {
			if v == nil {
				b.AppendNull()
				return nil
			}
			n, err := ParseNumeric(v, dec.Scale)
			if err != nil {
				return err
			}
			b.(*array.Decimal128Builder).Append(n)
			return nil
		}, nil
	}
	if e := elemOID[oid]; e != 0 {
		lt, ok := dt.(*arrow.ListType)
		if !ok {
			return nil, fmt.Errorf("pgarrow: array oid %d read as %s", oid, dt)
		}
		ed, err := NewDecoder(e, lt.Elem())
		if err != nil {
			return nil, err
		}
		return arrayDec(ed), nil
	}
	return nil, fmt.Errorf("pgarrow: no binary decoder for oid %d as %s", oid, dt)
}

func textDec(b array.Builder, v []byte) error {
	if v == nil {
		b.AppendNull()
	} else {
		b.(*array.StringBuilder).BinaryBuilder.Append(v)
	}
	return nil
}

func fixed(n int, f func(b array.Builder, v []byte)) Decoder {
	return func(b array.Builder, v []byte) error {
		if v == nil {
			b.AppendNull()
			return nil
		}
		if len(v) != n {
			return fmt.Errorf("pgarrow: value of %d bytes, want %d", len(v), n)
		}
		f(b, v)
		return nil
	}
}

func arrayDec(elem Decoder) Decoder {
	be := binary.BigEndian
	return func(b array.Builder, v []byte) error {
		lb := b.(*array.ListBuilder)
		if v == nil {
			lb.AppendNull()
			return nil
		}
		if len(v) < 12 {
			return fmt.Errorf("pgarrow: short array value")
		}
		ndim := be.Uint32(v)
		lb.Append(true)
		if ndim == 0 {
			return nil
		}
		if ndim != 1 || len(v) < 20 {
			return fmt.Errorf("pgarrow: %d-dimensional arrays are not mapped to Arrow", ndim)
		}
		n := int(be.Uint32(v[12:]))
		v = v[20:]
		vb := lb.ValueBuilder()
		for range n {
			if len(v) < 4 {
				return fmt.Errorf("pgarrow: truncated array")
			}
			l := int32(be.Uint32(v))
			v = v[4:]
			if l < 0 {
				if err := elem(vb, nil); err != nil {
					return err
				}
				continue
			}
			if int(l) > len(v) {
				return fmt.Errorf("pgarrow: truncated array element")
			}
			if err := elem(vb, v[:l:l]); err != nil {
				return err
			}
			v = v[l:]
		}
		return nil
	}
}

// ParseNumeric decodes PostgreSQL's binary numeric into a decimal128 with
// the given scale. NaN and infinities, and values that do not fit, are
// errors.
func ParseNumeric(v []byte, scale int32) (decimal128.Num, error) {
	be := binary.BigEndian
	if len(v) < 8 {
		return decimal128.Num{}, fmt.Errorf("pgarrow: short numeric")
	}
	nd := int(be.Uint16(v))
	weight := int(int16(be.Uint16(v[2:])))
	sign := be.Uint16(v[4:])
	if sign != 0 && sign != 0x4000 {
		return decimal128.Num{}, fmt.Errorf("pgarrow: numeric NaN or infinity has no decimal128 form")
	}
	if len(v) != 8+2*nd {
		return decimal128.Num{}, fmt.Errorf("pgarrow: numeric of %d bytes with %d digits", len(v), nd)
	}
	// Digit k is worth d * 10000^(weight-k); as an unscaled decimal of the
	// given scale that is d * 10^(4*(weight-k)+scale). Adding digit by digit
	// never builds an intermediate larger than the result. Digits below the
	// scale are truncated (PostgreSQL rounds to the column's scale already).
	acc := decimal128.Num{}
	for k := range nd {
		d := uint64(be.Uint16(v[8+2*k:]))
		e := 4*(weight-k) + int(scale)
		switch {
		case e >= 0:
			if e > 38 {
				return decimal128.Num{}, fmt.Errorf("pgarrow: numeric does not fit decimal128(38)")
			}
			acc = acc.Add(decimal128.FromU64(d).IncreaseScaleBy(int32(e)))
		case e > -4:
			acc = acc.Add(decimal128.FromU64(d / pow10[-e]))
		}
	}
	if !acc.FitsInPrecision(38) {
		return decimal128.Num{}, fmt.Errorf("pgarrow: numeric does not fit decimal128(38)")
	}
	if sign == 0x4000 {
		acc = acc.Negate()
	}
	return acc, nil
}
