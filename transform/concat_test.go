package transform_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/transform"
)

func TestConcat(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "d", Type: dt}}, nil)
	batch := func(ids []int64, vals []string) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		for _, v := range vals {
			require.NoError(t, b.Field(1).(*array.BinaryDictionaryBuilder).AppendString(v))
		}
		return b.NewRecordBatch()
	}
	a, b := batch([]int64{1, 2}, []string{"x", "y"}), batch([]int64{3}, []string{"z"})
	defer a.Release()
	defer b.Release()
	out, err := transform.Concat(mem, []arrow.RecordBatch{a, b})
	require.NoError(t, err)
	defer out.Release()
	require.EqualValues(t, 3, out.NumRows())
	require.Equal(t, []int64{1, 2, 3}, out.Column(0).(*array.Int64).Int64Values())
	d := out.Column(1).(*array.Dictionary)
	var got []string
	for i := range d.Len() {
		got = append(got, d.Dictionary().(*array.String).Value(d.GetValueIndex(i)))
	}
	require.Equal(t, []string{"x", "y", "z"}, got, "the two dictionaries unified")

	_, err = transform.Concat(mem, nil)
	require.Error(t, err)
}
