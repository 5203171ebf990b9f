package kafka_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc/kafka"
)

// ValueColumns on sliced batches (non-zero offsets, as carried batches
// are) with null values: fields line up with their rows, a null value is a
// row of nulls, every field is nullable, and nothing leaks.
func TestValueColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vt := arrow.StructOf(arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true})
	sc := arrow.NewSchema([]arrow.Field{{Name: "offset", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: vt, Nullable: true}}, nil)
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(`[
		{"offset":0,"value":{"id":0,"item":"a"}},
		{"offset":1,"value":{"id":1,"item":null}},
		{"offset":2,"value":null},
		{"offset":3,"value":{"id":3,"item":"d"}},
		{"offset":4,"value":{"id":4,"item":"e"}}]`))
	require.NoError(t, err)
	defer rec.Release()
	f := kafka.ValueColumns(mem)
	for _, tc := range []struct {
		from, to int64
		want     string
	}{
		{0, 5, `[{"id":0,"item":"a","offset":0},{"id":1,"item":null,"offset":1},{"id":null,"item":null,"offset":2},{"id":3,"item":"d","offset":3},{"id":4,"item":"e","offset":4}]`},
		{1, 4, `[{"id":1,"item":null,"offset":1},{"id":null,"item":null,"offset":2},{"id":3,"item":"d","offset":3}]`},
		{3, 5, `[{"id":3,"item":"d","offset":3},{"id":4,"item":"e","offset":4}]`},
		{2, 2, `[]`},
	} {
		in := rec.NewSlice(tc.from, tc.to)
		out, err := f(context.Background(), in)
		in.Release()
		require.NoError(t, err)
		require.Equal(t, "schema:\n  fields: 3\n    - offset: type=int64\n    - id: type=int64, nullable\n    - item: type=utf8, nullable", out.Schema().String())
		js, err := out.MarshalJSON()
		require.NoError(t, err)
		require.JSONEq(t, tc.want, string(js), "rows %d..%d", tc.from, tc.to)
		out.Release()
	}

	// A value field named like a Kafka column, and a raw value, are errors.
	bad := arrow.NewSchema([]arrow.Field{{Name: "offset", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.StructOf(arrow.Field{Name: "offset", Type: arrow.PrimitiveTypes.Int64}), Nullable: true}}, nil)
	raw := arrow.NewSchema([]arrow.Field{{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true}}, nil)
	for _, s := range []*arrow.Schema{bad, raw} {
		r := array.NewRecordBuilder(mem, s)
		b := r.NewRecordBatch()
		r.Release()
		_, err := f(context.Background(), b)
		b.Release()
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
	}
}
