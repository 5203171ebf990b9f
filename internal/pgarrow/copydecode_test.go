package pgarrow

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// copyTypes are the binary types of the source's map, as (Arrow type, OID,
// typmod) with a value builder for row i (i%5 == 4 is null).
var copyTypes = []struct {
	dt     arrow.DataType
	oid    uint32
	typmod int32
	add    func(b array.Builder, i int)
}{
	{arrow.PrimitiveTypes.Int16, OIDInt2, -1, func(b array.Builder, i int) { b.(*array.Int16Builder).Append(int16(i - 300)) }},
	{arrow.PrimitiveTypes.Int32, OIDInt4, -1, func(b array.Builder, i int) { b.(*array.Int32Builder).Append(int32(i * -70001)) }},
	{arrow.PrimitiveTypes.Int64, OIDInt8, -1, func(b array.Builder, i int) { b.(*array.Int64Builder).Append(int64(i) << 40) }},
	{arrow.PrimitiveTypes.Float32, OIDFloat4, -1, func(b array.Builder, i int) { b.(*array.Float32Builder).Append(float32(i) / 3) }},
	{arrow.PrimitiveTypes.Float64, OIDFloat8, -1, func(b array.Builder, i int) { b.(*array.Float64Builder).Append(float64(i) * -1.25) }},
	{arrow.FixedWidthTypes.Boolean, OIDBool, -1, func(b array.Builder, i int) { b.(*array.BooleanBuilder).Append(i%2 == 0) }},
	{arrow.BinaryTypes.String, OIDText, -1, func(b array.Builder, i int) {
		b.(*array.StringBuilder).Append([]string{"", "a", "O'Brien \\ é", "x\ny"}[i%4])
	}},
	{arrow.BinaryTypes.Binary, OIDBytea, -1, func(b array.Builder, i int) { b.(*array.BinaryBuilder).Append([]byte{0, byte(i), 0xff}[:i%4%3]) }},
	{&arrow.TimestampType{Unit: arrow.Microsecond}, OIDTimestamp, -1, func(b array.Builder, i int) {
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i)*86_400_000_001 - 1e15))
	}},
	{&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, OIDTimestamptz, -1, func(b array.Builder, i int) {
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 1_700_000_000_123_456))
	}},
	{arrow.FixedWidthTypes.Date32, OIDDate, -1, func(b array.Builder, i int) { b.(*array.Date32Builder).Append(arrow.Date32(i*400 - 20000)) }},
	{&arrow.Decimal128Type{Precision: 12, Scale: 2}, OIDNumeric, (12<<16 | 2) + 4, func(b array.Builder, i int) {
		b.(*array.Decimal128Builder).Append(decimal128.FromI64(int64(i)*123457 - 5000))
	}},
	{arrow.ListOf(arrow.PrimitiveTypes.Int32), arrayOID[OIDInt4], -1, func(b array.Builder, i int) {
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		for j := range i % 3 {
			if j == 1 {
				lb.ValueBuilder().AppendNull()
			} else {
				lb.ValueBuilder().(*array.Int32Builder).Append(int32(i + j))
			}
		}
	}},
	{arrow.ListOf(arrow.BinaryTypes.String), arrayOID[OIDText], -1, func(b array.Builder, i int) {
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		for j := range i % 4 {
			lb.ValueBuilder().(*array.StringBuilder).Append([]string{"p", "", "q'r"}[j%3])
		}
	}},
}

// copyStream builds a record of n rows of every type in copyTypes and its
// binary COPY stream, as the sink's encoder writes it and PostgreSQL's
// COPY TO sends it.
func copyStream(t *testing.T, mem memory.Allocator, n int) (arrow.RecordBatch, []byte, []Decoder) {
	var fields []arrow.Field
	var oids []uint32
	var decs []Decoder
	for i, ct := range copyTypes {
		dt, bin := ForPostgres(ct.oid, ct.typmod)
		require.True(t, bin, ct.dt)
		require.True(t, arrow.TypeEqual(dt, ct.dt), "%s read as %s", ct.dt, dt)
		dec, err := NewDecoder(ct.oid, dt)
		require.NoError(t, err)
		fields = append(fields, arrow.Field{Name: string(rune('a' + i)), Type: ct.dt, Nullable: true})
		oids = append(oids, ct.oid)
		decs = append(decs, dec)
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i := range n {
		for j, ct := range copyTypes {
			if i%5 == 4 {
				b.Field(j).AppendNull()
			} else {
				ct.add(b.Field(j), i)
			}
		}
	}
	rec := b.NewRecordBatch()
	enc, err := NewRowEncoder(rec, oids)
	require.NoError(t, err)
	out := AppendCopyHeader(nil)
	for i := range enc.NumRows() {
		out = enc.AppendRow(out, i)
	}
	require.NoError(t, enc.Err())
	return rec, AppendCopyTrailer(out), decs
}

// Every type of the map, with nulls, decodes back to what was encoded,
// however the stream is cut into writes (pgconn writes one CopyData
// message at a time; a tuple may span several, or one hold several).
func TestCopyDecoderRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	want, stream, decs := copyStream(t, mem, 200)
	defer want.Release()
	for _, size := range []int{1, 2, 3, 7, 19, 64, 4096, len(stream)} {
		b := array.NewRecordBuilder(mem, want.Schema())
		d := NewCopyDecoder(b, decs)
		for p := stream; len(p) > 0; {
			w := p[:min(size, len(p))]
			buf := append([]byte(nil), w...) // the caller reuses its buffer
			n, err := d.Write(buf)
			require.NoError(t, err)
			require.Equal(t, len(w), n)
			clear(buf)
			p = p[len(w):]
		}
		require.NoError(t, d.Finish())
		require.Equal(t, 200, d.Rows())
		got := b.NewRecordBatch()
		b.Release()
		require.Truef(t, array.RecordEqual(want, got), "write size %d:\nwant %v\ngot  %v", size, want, got)
		got.Release()
	}
}

// jsonb arrives with its version byte, which the decoder drops.
func TestCopyDecoderJSONB(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dec, err := NewDecoder(OIDJSONB, arrow.BinaryTypes.String)
	require.NoError(t, err)
	b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "j", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	defer b.Release()
	d := NewCopyDecoder(b, []Decoder{dec})
	s := AppendCopyHeader(nil)
	s = append(s, 0, 1, 0, 0, 0, 8, 1, '{', '"', 'a', '"', ':', '1', '}')
	s = append(s, 0, 1, 0xff, 0xff, 0xff, 0xff)
	_, err = d.Write(AppendCopyTrailer(s))
	require.NoError(t, err)
	require.NoError(t, d.Finish())
	rec := b.NewRecordBatch()
	defer rec.Release()
	require.Equal(t, `["{\"a\":1}" (null)]`, rec.Column(0).String())
}

// A stream that is not what COPY … (FORMAT binary) of these columns sends is
// an error wrapping ErrCopyStream; a value the decoder refuses is a
// *ColumnError naming the column; a stream cut short fails Finish.
func TestCopyDecoderMalformed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	want, stream, decs := copyStream(t, mem, 10)
	defer want.Release()
	try := func(s []byte) (error, error) {
		b := array.NewRecordBuilder(mem, want.Schema())
		defer b.Release()
		d := NewCopyDecoder(b, decs)
		_, err := d.Write(s)
		return err, d.Finish()
	}
	bad := append([]byte(nil), stream...)
	bad[0] = 'X'
	err, _ := try(bad)
	require.ErrorIs(t, err, ErrCopyStream)

	hdr := len(AppendCopyHeader(nil))
	bad = append([]byte(nil), stream...)
	bad[hdr+1] = byte(len(copyTypes) - 1) // the first tuple's column count
	err, _ = try(bad)
	require.ErrorIs(t, err, ErrCopyStream)

	err, _ = try(append(append([]byte(nil), stream...), 0, 0))
	require.ErrorIs(t, err, ErrCopyStream, "data after the trailer")

	err, fin := try(stream[:len(stream)-3])
	require.NoError(t, err)
	require.ErrorIs(t, fin, ErrCopyStream, "truncated")

	bad = append([]byte(nil), stream[:hdr]...)
	bad = append(bad, 0, byte(len(copyTypes)), 0, 0, 0, 3, 1, 2, 3) // an int2 of 3 bytes
	for range len(copyTypes) - 1 {
		bad = append(bad, 0xff, 0xff, 0xff, 0xff)
	}
	err, _ = try(bad)
	var ce *ColumnError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 0, ce.Column)
	require.False(t, errors.Is(err, ErrCopyStream))
}
