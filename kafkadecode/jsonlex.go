package kafkadecode

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

var (
	errUnexpectedEnd = errors.New("unexpected end of input")
	errSyntax        = errors.New("invalid JSON")
	errBadEscape     = errors.New("invalid escape in string")
	errBadUTF8       = errors.New("invalid UTF-8 in string")
	errDepth         = errors.New("nesting too deep")
)

// maxSkipDepth bounds the nesting of skipped (unknown) values, so hostile
// input cannot exhaust the stack.
const maxSkipDepth = 1000

// lexer reads one JSON text in place. Strings without escapes are returned
// as sub-slices of the input; escaped strings are unescaped into buf, which
// the next string overwrites.
type lexer struct {
	b   []byte
	i   int
	buf []byte
}

func (l *lexer) reset(b []byte) { l.b, l.i = b, 0 }

func (l *lexer) ws() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\n', '\t', '\r':
			l.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, or 0 at the end.
func (l *lexer) peek() byte {
	l.ws()
	if l.i < len(l.b) {
		return l.b[l.i]
	}
	return 0
}

func (l *lexer) literal(lit string) error {
	if len(l.b)-l.i < len(lit) || string(l.b[l.i:l.i+len(lit)]) != lit {
		return errSyntax
	}
	l.i += len(lit)
	return nil
}

// str reads a string; l.b[l.i] must be '"'.
func (l *lexer) str() ([]byte, error) {
	start := l.i + 1
	j := bytes.IndexByte(l.b[start:], '"')
	if j < 0 {
		return nil, errUnexpectedEnd
	}
	s := l.b[start : start+j]
	if bytes.IndexByte(s, '\\') < 0 {
		l.i = start + j + 1
		return s, nil
	}
	return l.unescape(start)
}

func (l *lexer) unescape(i int) ([]byte, error) {
	out := l.buf[:0]
	for {
		if i >= len(l.b) {
			return nil, errUnexpectedEnd
		}
		c := l.b[i]
		switch {
		case c == '"':
			l.i, l.buf = i+1, out
			return out, nil
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(l.b) {
			return nil, errUnexpectedEnd
		}
		e := l.b[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(l.b[i:])
			if !ok {
				return nil, errBadEscape
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if len(l.b)-i >= 6 && l.b[i] == '\\' && l.b[i+1] == 'u' {
					r2, ok = hex4(l.b[i+2:])
					if ok {
						i += 6
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, errBadEscape
		}
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a number token (validated by the caller's parser).
func (l *lexer) number() []byte {
	start := l.i
	for l.i < len(l.b) {
		switch c := l.b[l.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			l.i++
		default:
			return l.b[start:l.i]
		}
	}
	return l.b[start:l.i]
}

// skip skips one value of any type.
func (l *lexer) skip(depth int) error {
	if depth > maxSkipDepth {
		return errDepth
	}
	switch l.peek() {
	case '"':
		_, err := l.str()
		return err
	case '{', '[':
		closing := byte('}')
		if l.b[l.i] == '[' {
			closing = ']'
		}
		l.i++
		if l.peek() == closing {
			l.i++
			return nil
		}
		for {
			if closing == '}' {
				if l.peek() != '"' {
					return errSyntax
				}
				if _, err := l.str(); err != nil {
					return err
				}
				if l.peek() != ':' {
					return errSyntax
				}
				l.i++
			}
			if err := l.skip(depth + 1); err != nil {
				return err
			}
			switch l.peek() {
			case ',':
				l.i++
			case closing:
				l.i++
				return nil
			default:
				return errSyntax
			}
		}
	case 't':
		return l.literal("true")
	case 'f':
		return l.literal("false")
	case 'n':
		return l.literal("null")
	case 0:
		return errUnexpectedEnd
	default:
		if tok := l.number(); len(tok) == 0 {
			return errSyntax
		} else if _, err := strconv.ParseFloat(unsafeString(tok), 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return errSyntax
		}
		return nil
	}
}

func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

var (
	errNotInteger = errors.New("not an integer")
	errOverflow   = errors.New("value out of range")
)

// parseInt parses a JSON number as an int64. Integral numbers written with
// a fraction or exponent (1.0, 1e3) are accepted when exact.
func parseInt(tok []byte) (int64, error) {
	if len(tok) == 0 {
		return 0, errNotInteger
	}
	neg := tok[0] == '-'
	s := tok
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 19 {
		return parseIntSlow(tok)
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return parseIntSlow(tok)
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, errOverflow
		}
		return -int64(v), nil
	}
	if v > math.MaxInt64 {
		return 0, errOverflow
	}
	return int64(v), nil
}

func parseIntSlow(tok []byte) (int64, error) {
	f, err := strconv.ParseFloat(unsafeString(tok), 64)
	if err != nil {
		return 0, errNotInteger
	}
	if f != math.Trunc(f) {
		return 0, errNotInteger
	}
	if f < -(1<<63) || f >= 1<<63 {
		return 0, errOverflow
	}
	return int64(f), nil
}

func parseUint(tok []byte) (uint64, error) {
	if len(tok) > 0 && tok[0] != '-' && len(tok) <= 19 {
		var v uint64
		ok := true
		for _, c := range tok {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			v = v*10 + uint64(c-'0')
		}
		if ok {
			return v, nil
		}
	}
	u, err := strconv.ParseUint(unsafeString(tok), 10, 64)
	if err == nil {
		return u, nil
	}
	i, err := parseIntSlow(tok)
	if err != nil {
		return 0, err
	}
	if i < 0 {
		return 0, errOverflow
	}
	return uint64(i), nil
}

func parseFloat(tok []byte, bits int) (float64, error) {
	f, err := strconv.ParseFloat(unsafeString(tok), bits)
	if err != nil {
		return 0, errSyntax
	}
	return f, nil
}
