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
