package adbc_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/adbc"
)

func TestNormalize(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	hdr := arrow.StructOf(arrow.Field{Name: "key", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true})
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "key", Type: arrow.BinaryTypes.BinaryView, Nullable: true},
		{Name: "headers", Type: arrow.ListOfNonNullable(hdr)},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	kb := b.Field(1).(*array.BinaryViewBuilder)
	kb.Append([]byte("k1"))
	kb.AppendNull()
	lb := b.Field(2).(*array.ListBuilder)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	lb.Append(true)
	sb.Append(true)
	sb.FieldBuilder(0).(*array.StringBuilder).Append("h")
	sb.FieldBuilder(1).(*array.BinaryBuilder).Append([]byte("v"))
	lb.Append(true)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()

	out, err := adbc.Normalize(rec, mem)
	require.NoError(t, err)
	defer out.Release()
	require.Equal(t, arrow.BinaryTypes.Binary, out.Schema().Field(1).Type)
	require.Equal(t, arrow.BinaryTypes.String, out.Schema().Field(2).Type)
	require.Equal(t, "k1", string(out.Column(1).(*array.Binary).Value(0)))
	require.True(t, out.Column(1).IsNull(1))
	require.Equal(t, `[{"key":"h","value":"dg=="}]`, out.Column(2).(*array.String).Value(0))
	require.Equal(t, `[]`, out.Column(2).(*array.String).Value(1))

	plain, err := adbc.Normalize(out, mem) // nothing left to convert: the same batch
	require.NoError(t, err)
	require.True(t, plain == out)
	plain.Release()
}
