package kafka

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// trimmedSlice keeps the rows, nulls and values of a plain slice, and only
// the data buffers the rows point into.
func TestTrimmedSlice(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// Three chunks, each its own data buffer, as Concatenate leaves them.
	var chunks []arrow.Array
	for c := range 3 {
		b := array.NewBinaryViewBuilder(mem)
		for i := range 10 {
			switch {
			case i%4 == 1:
				b.AppendNull()
			case i%2 == 0:
				b.Append(fmt.Appendf(nil, "chunk %d, long value number %d", c, i))
			default:
				b.Append(fmt.Appendf(nil, "s%d", i)) // inline
			}
		}
		chunks = append(chunks, b.NewArray())
		b.Release()
	}
	joined, err := array.Concatenate(chunks, mem)
	require.NoError(t, err)
	for _, c := range chunks {
		c.Release()
	}
	ints := array.NewInt64Builder(mem)
	for i := range 30 {
		ints.Append(int64(i))
	}
	offs := ints.NewArray()
	ints.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "offset", Type: arrow.PrimitiveTypes.Int64}, {Name: "value", Type: arrow.BinaryTypes.BinaryView, Nullable: true}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{offs, joined}, 30)
	offs.Release()
	joined.Release()
	defer rec.Release()
	require.Len(t, rec.Column(1).Data().Buffers(), 2+3)

	for _, r := range [][2]int64{{23, 30}, {13, 27}, {0, 30}, {5, 9}, {29, 30}} {
		got := trimmedSlice(rec, r[0], r[1], mem)
		want := rec.NewSlice(r[0], r[1])
		require.Equal(t, want.NumRows(), got.NumRows())
		require.True(t, array.Equal(want.Column(0), got.Column(0)))
		gv, wv := got.Column(1).(*array.BinaryView), want.Column(1).(*array.BinaryView)
		require.Equal(t, wv.NullN(), gv.NullN())
		for i := range wv.Len() {
			require.Equal(t, wv.IsNull(i), gv.IsNull(i), "row %d", i)
			require.True(t, bytes.Equal(wv.Value(i), gv.Value(i)), "row %d", i)
		}
		used := map[int64]bool{} // chunks holding a long (even-numbered) value of the rows
		for i := r[0]; i < r[1]; i++ {
			if i%2 == 0 {
				used[i/10] = true
			}
		}
		require.Len(t, gv.Data().Buffers(), 2+len(used), "rows %v point into %d chunks", r, len(used))
		got.Release()
		want.Release()
	}
}
