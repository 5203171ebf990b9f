package pgarrow

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/flightline/flightline"
)

// PostgreSQL's epoch, 2000-01-01, relative to the Unix epoch.
const (
	pgEpochMicros = 946684800 * 1_000_000
	pgEpochDays   = 10957
)

// copyHeader is the binary COPY signature, flags and header extension length.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

var nullField = []byte{0xff, 0xff, 0xff, 0xff}

// AppendCopyHeader appends the binary COPY file header.
func AppendCopyHeader(b []byte) []byte { return append(b, copyHeader...) }

// AppendCopyTrailer appends the binary COPY file trailer.
func AppendCopyTrailer(b []byte) []byte { return append(b, 0xff, 0xff) }

// raw appends the binary value of row i (not null) without its length.
type raw func(b []byte, i int) []byte

// fieldEnc appends row i as a COPY field: length and value, or -1 for NULL.
type fieldEnc func(b []byte, i int) []byte

// RowEncoder encodes the rows of one record batch as binary COPY tuples. It
// reads the batch's columns in place; the caller keeps the batch alive (and
// owns its reference) while the encoder is used. Not safe for concurrent use.
type RowEncoder struct {
	cols  []fieldEnc
	nrows int
	err   error // set by encoders that can fail on a value (JSON of NaN)
}

// NewRowEncoder prepares the encoding of rec into columns of the given type
// OIDs (one per column of rec, as found in an existing table or as created
// from ForArrow). It validates everything that can be validated before any
// byte is sent: types (ErrInvalidInput for unsupported ones, or a column
// type the Arrow type cannot be written into) and sub-microsecond
// timestamps.
func NewRowEncoder(rec arrow.RecordBatch, colOIDs []uint32) (*RowEncoder, error) {
	if int(rec.NumCols()) != len(colOIDs) {
		return nil, fmt.Errorf("%w: %d columns, %d target types", flightline.ErrInvalidInput, rec.NumCols(), len(colOIDs))
	}
	e := &RowEncoder{nrows: int(rec.NumRows())}
	for c, arr := range rec.Columns() {
		f, err := e.field(arr, colOIDs[c])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", rec.Schema().Field(c).Name, err)
		}
		e.cols = append(e.cols, f)
	}
	return e, nil
}

// Err returns the first value-level encoding error, if any.
func (e *RowEncoder) Err() error { return e.err }

// NumRows is the number of rows of the batch.
func (e *RowEncoder) NumRows() int { return e.nrows }

// AppendRow appends row i as one binary COPY tuple.
func (e *RowEncoder) AppendRow(b []byte, i int) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.cols)))
	for _, f := range e.cols {
		b = f(b, i)
	}
	return b
}

func (e *RowEncoder) field(arr arrow.Array, col uint32) (fieldEnc, error) {
	r, size, err := e.raw(arr, col)
	if err != nil {
		return nil, err
	}
	return wrapField(arr, size, r), nil
}

func wrapField(arr arrow.Array, size int, r raw) fieldEnc {
	hasNulls := arr.NullN() > 0
	if size >= 0 {
		var lb [4]byte
		binary.BigEndian.PutUint32(lb[:], uint32(size))
		return func(b []byte, i int) []byte {
			if hasNulls && arr.IsNull(i) {
				return append(b, nullField...)
			}
			return r(append(b, lb[:]...), i)
		}
	}
	return func(b []byte, i int) []byte {
		if hasNulls && arr.IsNull(i) {
			return append(b, nullField...)
		}
		p := len(b)
		b = r(append(b, 0, 0, 0, 0), i)
		binary.BigEndian.PutUint32(b[p:], uint32(len(b)-p-4))
		return b
	}
}

// raw returns the value encoder of arr for a column of type col and the
// fixed size of its values (-1 when variable).
func (e *RowEncoder) raw(arr arrow.Array, col uint32) (raw, int, error) {
	dt := arr.DataType()
	if _, err := ForArrow(dt); err != nil {
		return nil, 0, err
	}
	if !Accepts(dt, col) {
		return nil, 0, fmt.Errorf("%w: arrow type %s cannot be written into a column of type oid %d", flightline.ErrSchemaMismatch, dt, col)
	}
	be := binary.BigEndian
	switch a := arr.(type) {
	case *array.Int8:
		v := a.Int8Values()
		return func(b []byte, i int) []byte { return be.AppendUint16(b, uint16(int16(v[i]))) }, 2, nil
	case *array.Uint8:
		v := a.Uint8Values()
		return func(b []byte, i int) []byte { return be.AppendUint16(b, uint16(v[i])) }, 2, nil
	case *array.Int16:
		v := a.Int16Values()
		return func(b []byte, i int) []byte { return be.AppendUint16(b, uint16(v[i])) }, 2, nil
	case *array.Uint16:
		v := a.Uint16Values()
		return func(b []byte, i int) []byte { return be.AppendUint32(b, uint32(v[i])) }, 4, nil
	case *array.Int32:
		v := a.Int32Values()
		return func(b []byte, i int) []byte { return be.AppendUint32(b, uint32(v[i])) }, 4, nil
	case *array.Uint32:
		v := a.Uint32Values()
		return func(b []byte, i int) []byte { return be.AppendUint64(b, uint64(v[i])) }, 8, nil
	case *array.Int64:
		v := a.Int64Values()
		return func(b []byte, i int) []byte { return be.AppendUint64(b, uint64(v[i])) }, 8, nil
	case *array.Float32:
		v := a.Float32Values()
		return func(b []byte, i int) []byte { return be.AppendUint32(b, math.Float32bits(v[i])) }, 4, nil
	case *array.Float64:
		v := a.Float64Values()
		return func(b []byte, i int) []byte { return be.AppendUint64(b, math.Float64bits(v[i])) }, 8, nil
	case *array.Boolean:
		return func(b []byte, i int) []byte {
			if a.Value(i) {
				return append(b, 1)
			}
			return append(b, 0)
		}, 1, nil
	case *array.String:
		return func(b []byte, i int) []byte { return append(b, a.Value(i)...) }, -1, nil
	case *array.LargeString:
		return func(b []byte, i int) []byte { return append(b, a.Value(i)...) }, -1, nil
	case *array.Binary:
		return func(b []byte, i int) []byte { return append(b, a.Value(i)...) }, -1, nil
	case *array.LargeBinary:
		return func(b []byte, i int) []byte { return append(b, a.Value(i)...) }, -1, nil
	case *array.StringView: // the Kafka source's in-process batches
		return func(b []byte, i int) []byte { return append(b, a.Value(i)...) }, -1, nil
	case *array.BinaryView:
		return func(b []byte, i int) []byte { return append(b, a.Value(i)...) }, -1, nil
	case *array.Timestamp:
		return timestampRaw(a)
	case *array.Date32:
		v := a.Date32Values()
		return func(b []byte, i int) []byte { return be.AppendUint32(b, uint32(int32(v[i])-pgEpochDays)) }, 4, nil
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return func(b []byte, i int) []byte { return AppendNumeric(b, a.Value(i), scale) }, -1, nil
	case *array.Struct, *array.Map:
		jsonb := col == OIDJSONB || elemOID[col] == OIDJSONB
		return func(b []byte, i int) []byte {
			if jsonb {
				b = append(b, 1) // jsonb binary format version
			}
			return e.appendJSON(b, arr, i)
		}, -1, nil
	case *array.List:
		return e.listRaw(a, a.ListValues(), col)
	case *array.LargeList:
		return e.listRaw(a, a.ListValues(), col)
	}
	return nil, 0, unsupported(dt, "no encoder")
}

func timestampRaw(a *array.Timestamp) (raw, int, error) {
	v := a.TimestampValues()
	var mul, div int64 = 1, 1
	switch a.DataType().(*arrow.TimestampType).Unit {
	case arrow.Second:
		mul = 1_000_000
	case arrow.Millisecond:
		mul = 1_000
	case arrow.Nanosecond:
		div = 1_000
		for i, x := range v {
			if x%1000 != 0 && a.IsValid(i) {
				return nil, 0, fmt.Errorf("%w: row %d: timestamp %d ns is not a whole microsecond; PostgreSQL stores microseconds", flightline.ErrInvalidInput, i, x)
			}
		}
	}
	be := binary.BigEndian
	if mul == 1 && div == 1 {
		return func(b []byte, i int) []byte { return be.AppendUint64(b, uint64(int64(v[i])-pgEpochMicros)) }, 8, nil
	}
	return func(b []byte, i int) []byte {
		return be.AppendUint64(b, uint64(int64(v[i])*mul/div-pgEpochMicros))
	}, 8, nil
}

// listRaw encodes a list as a one-dimensional PostgreSQL array (array_send
// format: ndim, has-nulls flag, element OID, then per dimension length and
// lower bound, then length-prefixed elements).
func (e *RowEncoder) listRaw(l array.ListLike, child arrow.Array, col uint32) (raw, int, error) {
	elemCol := elemOID[col]
	er, esize, err := e.raw(child, elemCol)
	if err != nil {
		return nil, 0, err
	}
	elem := wrapField(child, esize, er)
	be := binary.BigEndian
	return func(b []byte, i int) []byte {
		start, end := l.ValueOffsets(i)
		if start == end {
			b = be.AppendUint32(b, 0) // ndim 0: the empty array
			b = be.AppendUint32(b, 0)
			return be.AppendUint32(b, elemCol)
		}
		nulls := uint32(0)
		if child.NullN() > 0 {
			for j := start; j < end; j++ {
				if child.IsNull(int(j)) {
					nulls = 1
					break
				}
			}
		}
		b = be.AppendUint32(b, 1)
		b = be.AppendUint32(b, nulls)
		b = be.AppendUint32(b, elemCol)
		b = be.AppendUint32(b, uint32(end-start))
		b = be.AppendUint32(b, 1)
		for j := start; j < end; j++ {
			b = elem(b, int(j))
		}
		return b
	}, -1, nil
}

func (e *RowEncoder) appendJSON(b []byte, arr arrow.Array, i int) []byte {
	v, err := json.Marshal(jsonValue(arr, i))
	if err != nil && e.err == nil {
		e.err = fmt.Errorf("%w: value not representable as JSON: %v", flightline.ErrInvalidInput, err)
	}
	return append(b, v...)
}

// jsonValue returns a JSON-marshallable form of row i of arr. Maps with
// string keys become JSON objects; other maps become lists of {key, value}.
func jsonValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := make(map[string]any, a.NumField())
		for j := range a.NumField() {
			m[st.Field(j).Name] = jsonValue(a.Field(j), i)
		}
		return m
	case *array.Map:
		start, end := a.ValueOffsets(i)
		if ks, ok := a.Keys().(*array.String); ok {
			m := make(map[string]any, end-start)
			for j := start; j < end; j++ {
				m[ks.Value(int(j))] = jsonValue(a.Items(), int(j))
			}
			return m
		}
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			out = append(out, map[string]any{"key": jsonValue(a.Keys(), int(j)), "value": jsonValue(a.Items(), int(j))})
		}
		return out
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			out = append(out, jsonValue(a.ListValues(), int(j)))
		}
		return out
	case *array.Binary:
		return a.Value(i) // base64, as encoding/json does for []byte
	}
	return arr.GetOneForMarshal(i)
}

// AppendNumeric appends n (with the given scale) in PostgreSQL's binary
// numeric format: ndigits, weight, sign, dscale, then base-10000 digits,
// most significant first. It does not allocate.
func AppendNumeric(b []byte, n decimal128.Num, scale int32) []byte {
	be := binary.BigEndian
	sign := uint16(0)
	if n.Sign() < 0 {
		sign = 0x4000
		n = n.Negate()
	}
	if scale < 0 {
		n = n.IncreaseScaleBy(-scale)
		scale = 0
	}
	hi, lo := uint64(n.HighBits()), n.LowBits()
	var digits [12]uint16 // least significant first; 10^38 needs ≤ 11 digits
	nd := 0
	if r := scale % 4; r != 0 {
		var rem uint64
		hi, lo, rem = divmod(hi, lo, pow10[r])
		digits[nd] = uint16(rem * pow10[4-r])
		nd++
	}
	for hi != 0 || lo != 0 {
		var rem uint64
		hi, lo, rem = divmod(hi, lo, 10000)
		digits[nd] = uint16(rem)
		nd++
	}
	low := 0
	for low < nd && digits[low] == 0 {
		low++
	}
	if low == nd { // zero
		b = be.AppendUint16(b, 0)
		b = be.AppendUint16(b, 0)
		b = be.AppendUint16(b, 0)
		return be.AppendUint16(b, uint16(scale))
	}
	weight := nd - 1 - int((scale+3)/4)
	b = be.AppendUint16(b, uint16(nd-low))
	b = be.AppendUint16(b, uint16(int16(weight)))
	b = be.AppendUint16(b, sign)
	b = be.AppendUint16(b, uint16(scale))
	for k := nd - 1; k >= low; k-- {
		b = be.AppendUint16(b, digits[k])
	}
	return b
}

var pow10 = [...]uint64{1, 10, 100, 1000, 10000}

func divmod(hi, lo, d uint64) (qhi, qlo, rem uint64) {
	qhi, r := hi/d, hi%d
	qlo, rem = bits.Div64(r, lo, d)
	return
}

// CopyReader is an io.Reader over the binary COPY stream of a RowEncoder's
// batch: header, one tuple per row, trailer. It encodes on demand into a
// small reused buffer, so the stream is never materialised whole.
//
// Read and Close are safe to call from different goroutines: pgconn's
// CopyFrom reads on a goroutine of its own, which it does not wait for when
// it returns early (context cancelled, server error).
type CopyReader struct {
	mu     sync.Mutex // held while a Read encodes from the batch
	closed bool
	enc    *RowEncoder
	buf    []byte
	off    int
	row    int
	done   bool
}

// ErrCopyReaderClosed is what Read returns after Close.
var ErrCopyReaderClosed = errors.New("pgarrow: copy reader closed")

// NewCopyReader returns a reader over the COPY stream of enc.
func NewCopyReader(enc *RowEncoder) *CopyReader {
	return &CopyReader{enc: enc, buf: AppendCopyHeader(make([]byte, 0, 256<<10))}
}

// Close waits for a Read in progress to return and makes every later Read
// fail with ErrCopyReaderClosed without touching the batch. Once Close
// returns, the encoder's batch may be released. Close is idempotent.
func (r *CopyReader) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// Read implements io.Reader. It returns the encoder's value error, if any,
// which makes COPY fail and its transaction roll back.
func (r *CopyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrCopyReaderClosed
	}
	n := 0
	for n < len(p) {
		if r.off == len(r.buf) {
			if r.done {
				break
			}
			r.fill(max(len(p)-n, 64<<10))
			if err := r.enc.err; err != nil {
				return n, err
			}
		}
		c := copy(p[n:], r.buf[r.off:])
		r.off += c
		n += c
	}
	if n == 0 && r.done && r.off == len(r.buf) {
		return 0, io.EOF
	}
	return n, nil
}

func (r *CopyReader) fill(want int) {
	r.buf, r.off = r.buf[:0], 0
	for len(r.buf) < want && r.row < r.enc.nrows {
		r.buf = r.enc.AppendRow(r.buf, r.row)
		r.row++
	}
	if r.row == r.enc.nrows {
		r.buf = AppendCopyTrailer(r.buf)
		r.done = true
	}
}
