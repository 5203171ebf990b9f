package kafkadecode

import (
	"errors"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
)

// scalar decodes numbers, timestamps, dates and decimals.
func (d *JSONDecoder) scalar(n *jnode, c byte) error {
	l := &d.lex
	var tok []byte
	quoted := c == '"'
	if quoted {
		s, err := l.str()
		if err != nil {
			return d.fail(n, ErrJSONSyntax, err)
		}
		tok = s
	} else {
		if c != '-' && (c < '0' || c > '9') {
			return d.fail(n, ErrJSONType, errors.New("want a number"))
		}
		tok = l.number()
	}
	switch n.kind {
	case jInt8, jInt16, jInt32, jInt64:
		v, err := parseInt(tok)
		if err != nil {
			return d.fail(n, ErrJSONType, err)
		}
		switch b := n.b.(type) {
		case *array.Int64Builder:
			b.Append(v)
		case *array.Int32Builder:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return d.fail(n, ErrJSONType, errOverflow)
			}
			b.Append(int32(v))
		case *array.Int16Builder:
			if v < math.MinInt16 || v > math.MaxInt16 {
				return d.fail(n, ErrJSONType, errOverflow)
			}
			b.Append(int16(v))
		case *array.Int8Builder:
			if v < math.MinInt8 || v > math.MaxInt8 {
				return d.fail(n, ErrJSONType, errOverflow)
			}
			b.Append(int8(v))
		}
	case jUint8, jUint16, jUint32, jUint64:
		v, err := parseUint(tok)
		if err != nil {
			return d.fail(n, ErrJSONType, err)
		}
		switch b := n.b.(type) {
		case *array.Uint64Builder:
			b.Append(v)
		case *array.Uint32Builder:
			if v > math.MaxUint32 {
				return d.fail(n, ErrJSONType, errOverflow)
			}
			b.Append(uint32(v))
		case *array.Uint16Builder:
			if v > math.MaxUint16 {
				return d.fail(n, ErrJSONType, errOverflow)
			}
			b.Append(uint16(v))
		case *array.Uint8Builder:
			if v > math.MaxUint8 {
				return d.fail(n, ErrJSONType, errOverflow)
			}
			b.Append(uint8(v))
		}
	case jFloat64:
		v, err := parseFloat(tok, 64)
		if err != nil {
			return d.fail(n, ErrJSONType, err)
		}
		n.b.(*array.Float64Builder).Append(v)
	case jFloat32:
		v, err := parseFloat(tok, 32)
		if err != nil {
			return d.fail(n, ErrJSONType, err)
		}
		n.b.(*array.Float32Builder).Append(float32(v))
	case jTimestamp:
		var v int64
		var err error
		if quoted {
			v, err = parseRFC3339(tok, n.unit)
		} else {
			v, err = parseInt(tok)
			if err == nil && d.cfg.hasEpochUnit {
				var ok bool
				if v, ok = convertUnit(v, d.cfg.epochUnit, n.unit); !ok {
					err = errOverflow
				}
			}
		}
		if err != nil {
			return d.fail(n, ErrJSONType, err)
		}
		n.b.(*array.TimestampBuilder).Append(arrow.Timestamp(v))
	case jDate32:
		var v int64
		var err error
		if quoted {
			var ok bool
			if v, ok = parseDate(tok); !ok || (len(tok) > 10) {
				var ms int64
				if ms, err = parseRFC3339(tok, arrow.Second); err == nil {
					v = floorDiv(ms, 86400)
				}
			}
		} else {
			v, err = parseInt(tok)
		}
		if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
			err = errOverflow
		}
		if err != nil {
			return d.fail(n, ErrJSONType, err)
		}
		n.b.(*array.Date32Builder).Append(arrow.Date32(v))
	case jDecimal128:
		v, err := parseDecimal128(tok, n.prec, n.scale)
		if err != nil {
			return d.fail(n, ErrJSONType, err)
		}
		n.b.(*array.Decimal128Builder).Append(v)
	case jDecimal256:
		v, err := decimal256.FromString(string(tok), n.prec, n.scale)
		if err != nil {
			return d.fail(n, ErrJSONType, err)
		}
		n.b.(*array.Decimal256Builder).Append(v)
	}
	return nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

var errPrecision = errors.New("decimal does not fit the precision")

// parseDecimal128 parses a plain decimal without allocating when it has at
// most 18 digits and no more fraction digits than scale; otherwise it falls
// back to decimal128.FromString (which rounds extra fraction digits).
func parseDecimal128(tok []byte, prec, scale int32) (decimal128.Num, error) {
	s := tok
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	var v int64
	nd, frac, dot := 0, 0, false
	ok := len(s) > 0 && scale >= 0 && scale <= 18
	for _, c := range s {
		if c == '.' && !dot {
			dot = true
			continue
		}
		if c < '0' || c > '9' {
			ok = false
			break
		}
		v = v*10 + int64(c-'0')
		nd++
		if dot {
			frac++
		}
	}
	if ok && nd > 0 && nd <= 18 && int32(frac) <= scale && nd-frac+int(scale) <= 18 {
		v *= pow10[int(scale)-frac]
		if prec <= 18 && v >= pow10[prec] {
			return decimal128.Num{}, errPrecision
		}
		if neg {
			v = -v
		}
		return decimal128.FromI64(v), nil
	}
	n, err := decimal128.FromString(string(tok), prec, scale)
	if err != nil {
		return decimal128.Num{}, err
	}
	if !n.FitsInPrecision(prec) {
		return decimal128.Num{}, errPrecision
	}
	return n, nil
}
