package pgarrow

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

func TestNumericRoundTrip(t *testing.T) {
	// 12.34 = digits [12, 3400], weight 0, dscale 2.
	n, err := decimal128.FromString("12.34", 10, 2)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x0d, 0x48}, AppendNumeric(nil, n, 2))

	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		scale := int32(rng.IntN(39))
		hi := rng.Int64N(1 << 62)
		if rng.IntN(3) == 0 {
			hi = 0
		}
		v := decimal128.New(hi>>(rng.IntN(64)), rng.Uint64())
		for !v.FitsInPrecision(38) {
			v, _ = v.Div(decimal128.FromU64(10))
		}
		if rng.IntN(2) == 0 {
			v = v.Negate()
		}
		got, err := ParseNumeric(AppendNumeric(nil, v, scale), scale)
		require.NoError(t, err)
		require.Equalf(t, v, got, "%s scale %d", v.ToString(scale), scale)
	}
}

func TestForArrowRefuses(t *testing.T) {
	for _, dt := range []arrow.DataType{
		arrow.PrimitiveTypes.Uint64, arrow.FixedWidthTypes.Float16, arrow.FixedWidthTypes.Duration_ms,
		arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int32)), &arrow.FixedSizeBinaryType{ByteWidth: 4},
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
	} {
		_, err := ForArrow(dt)
		require.Truef(t, errors.Is(err, flightline.ErrInvalidInput), "%s: %v", dt, err)
	}
	require.True(t, Accepts(arrow.ListOf(arrow.BinaryTypes.String), arrayOID[OIDVarchar]))
	require.False(t, Accepts(arrow.PrimitiveTypes.Int32, OIDInt8))
}

// The streamed reader yields exactly what AppendRow produces, whatever the
// caller's buffer size.
func TestCopyReaderChunks(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	for i := range 50000 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%3 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append("value")
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	enc, err := NewRowEncoder(rec, []uint32{OIDInt8, OIDText})
	require.NoError(t, err)
	want := AppendCopyHeader(nil)
	for i := range enc.NumRows() {
		want = enc.AppendRow(want, i)
	}
	want = AppendCopyTrailer(want)
	for _, size := range []int{1, 7, 4096, 65531, 1 << 20} {
		r := NewCopyReader(enc)
		var got bytes.Buffer
		buf := make([]byte, size)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		require.Equal(t, want, got.Bytes(), "chunk size %d", size)
	}
}

// View columns (the in-process Kafka source's key and value are
// binary_view) encode exactly as their plain counterparts: before, Kafka →
// PostgreSQL in one process (flightline run with in-process kinds) failed on
// its first batch with "binary_view is not supported".
func TestViewTypesEncodeAsPlain(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	build := func(bin, str arrow.DataType) arrow.RecordBatch {
		sc := arrow.NewSchema([]arrow.Field{{Name: "k", Type: bin, Nullable: true}, {Name: "s", Type: str, Nullable: true}}, nil)
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		for i := range 100 {
			if i%7 == 0 {
				b.Field(0).AppendNull()
				b.Field(1).AppendNull()
				continue
			}
			v := bytes.Repeat([]byte{byte('a' + i%26)}, i) // inline (≤12) and out-of-line views
			switch fb := b.Field(0).(type) {
			case *array.BinaryBuilder:
				fb.Append(v)
			case *array.BinaryViewBuilder:
				fb.Append(v)
			}
			switch fb := b.Field(1).(type) {
			case *array.StringBuilder:
				fb.Append(string(v))
			case *array.StringViewBuilder:
				fb.Append(string(v))
			}
		}
		return b.NewRecordBatch()
	}
	encode := func(rec arrow.RecordBatch) []byte {
		defer rec.Release()
		var oids []uint32
		for _, f := range rec.Schema().Fields() {
			ty, err := ForArrow(f.Type)
			require.NoError(t, err, f.Type)
			require.True(t, Accepts(f.Type, ty.OID))
			oids = append(oids, ty.OID)
		}
		enc, err := NewRowEncoder(rec, oids)
		require.NoError(t, err)
		out := AppendCopyHeader(nil)
		for i := range enc.NumRows() {
			out = enc.AppendRow(out, i)
		}
		return AppendCopyTrailer(out)
	}
	want := encode(build(arrow.BinaryTypes.Binary, arrow.BinaryTypes.String))
	got := encode(build(arrow.BinaryTypes.BinaryView, arrow.BinaryTypes.StringView))
	require.Equal(t, want, got)
}
