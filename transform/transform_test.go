package transform_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/transform"
)

// addOne returns a copy of rec's int64 column plus one, from mem.
func addOne(mem memory.Allocator) transform.Func {
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		in := rec.Column(0).(*array.Int64)
		b := array.NewInt64Builder(mem)
		defer b.Release()
		for _, v := range in.Int64Values() {
			b.Append(v + 1)
		}
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(rec.Schema(), []arrow.Array{col}, rec.NumRows()), nil
	}
}

func passThrough(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	rec.Retain()
	return rec, nil
}

// Chain runs its steps in order, skips nil ones, releases every
// intermediate batch (on errors too) and leaves the caller's batch alone.
func TestChain(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(`[{"x":1},{"x":2}]`))
	require.NoError(t, err)
	defer rec.Release()

	require.Nil(t, transform.Chain(), "no steps: no transform")
	require.Nil(t, transform.Chain(nil, nil))

	f := transform.Chain(addOne(mem), nil, passThrough, addOne(mem))
	out, err := f(context.Background(), rec)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4}, out.Column(0).(*array.Int64).Int64Values())
	out.Release()
	require.Equal(t, []int64{1, 2}, rec.Column(0).(*array.Int64).Int64Values(), "input untouched")

	boom := errors.New("boom")
	fail := func(context.Context, arrow.RecordBatch) (arrow.RecordBatch, error) { return nil, boom }
	_, err = transform.Chain(addOne(mem), fail, addOne(mem))(context.Background(), rec)
	require.ErrorIs(t, err, boom)

	// A chain of pass-throughs hands back the caller's batch with one
	// more reference, which the caller releases.
	same, err := transform.Chain(passThrough, passThrough)(context.Background(), rec)
	require.NoError(t, err)
	require.Same(t, rec, same)
	same.Release()
}

// PlainViews copies top-level view columns into plain ones, shares the
// others, and passes batches without views through.
func TestPlainViews(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k", Type: arrow.BinaryTypes.BinaryView, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.StringView, Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(
		`[{"x":1,"k":"a2V5LW9uZS1sb25nZXItdGhhbi0xMg==","s":"short"},{"x":2,"k":null,"s":"a string longer than twelve"}]`))
	require.NoError(t, err)
	defer rec.Release()

	f := transform.PlainViews(mem)
	out, err := f(context.Background(), rec)
	require.NoError(t, err)
	defer out.Release()
	require.Equal(t, arrow.BINARY, out.Schema().Field(1).Type.ID())
	require.Equal(t, arrow.STRING, out.Schema().Field(2).Type.ID())
	require.Same(t, rec.Column(0), out.Column(0), "plain columns are shared")
	want, err := rec.MarshalJSON()
	require.NoError(t, err)
	got, err := out.MarshalJSON()
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))

	again, err := f(context.Background(), out)
	require.NoError(t, err)
	require.Same(t, out, again, "no views: the batch itself")
	again.Release()
}
