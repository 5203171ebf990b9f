package transform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/transform"
)

// Flatten on sliced batches (non-zero offsets) with null structs: fields
// line up with their rows, a null struct is a row of nulls, every field is
// nullable, nothing leaks; a missing column, a non-struct and a colliding
// field are errors.
func TestFlatten(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vt := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true})
	sc := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: vt, Nullable: true}, {Name: "z", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(`[
		{"k":0,"s":{"a":0,"b":"x"},"z":9},
		{"k":1,"s":{"a":1,"b":null},"z":9},
		{"k":2,"s":null,"z":9},
		{"k":3,"s":{"a":3,"b":"y"},"z":9}]`))
	require.NoError(t, err)
	defer rec.Release()
	f := transform.Flatten("s", mem)
	for _, tc := range []struct {
		from, to int64
		want     string
	}{
		{0, 4, `[{"k":0,"a":0,"b":"x","z":9},{"k":1,"a":1,"b":null,"z":9},{"k":2,"a":null,"b":null,"z":9},{"k":3,"a":3,"b":"y","z":9}]`},
		{1, 3, `[{"k":1,"a":1,"b":null,"z":9},{"k":2,"a":null,"b":null,"z":9}]`},
		{3, 3, `[]`},
	} {
		in := rec.NewSlice(tc.from, tc.to)
		out, err := f(context.Background(), in)
		in.Release()
		require.NoError(t, err)
		require.Equal(t, "schema:\n  fields: 4\n    - k: type=int64\n    - a: type=int64, nullable\n    - b: type=utf8, nullable\n    - z: type=int64", out.Schema().String())
		js, err := out.MarshalJSON()
		require.NoError(t, err)
		require.JSONEq(t, tc.want, string(js))
		out.Release()
	}
	for _, f := range []transform.Func{transform.Flatten("nope", mem), transform.Flatten("k", mem)} {
		_, err := f(context.Background(), rec)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
	}
	clash := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: vt, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, clash)
	r := b.NewRecordBatch()
	b.Release()
	_, err = f(context.Background(), r)
	r.Release()
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}
