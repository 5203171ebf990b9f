package transform_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/transform"
	tt "github.com/flightline/flightline/transform/transformtest"
)

func apply(t *testing.T, f transform.Func, rec arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	out, err := f(context.Background(), rec)
	require.NoError(t, err)
	t.Cleanup(out.Release)
	return out
}

func TestSelectAndRename(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the releases below
	rec := tt.Batch(mem, 0, 4)
	t.Cleanup(rec.Release)

	sel, err := transform.Select("name", "id")
	require.NoError(t, err)
	out := apply(t, sel, rec)
	require.Equal(t, "name,id", tt.FieldNames(out))
	require.Same(t, rec.Column(0), out.Column(1), "shared, not copied")

	ren, err := transform.Rename(map[string]string{"id": "order_id"})
	require.NoError(t, err)
	out = apply(t, ren, rec)
	require.Equal(t, "order_id,name", tt.FieldNames(out))
	require.Equal(t, "id,name", tt.FieldNames(rec), "input untouched")

	for _, f := range []func() (transform.Func, error){
		func() (transform.Func, error) { return transform.Select("nope") },
		func() (transform.Func, error) { return transform.Rename(map[string]string{"nope": "x"}) },
		func() (transform.Func, error) { return transform.Rename(map[string]string{"id": "name"}) },
	} {
		g, err := f()
		require.NoError(t, err)
		_, err = g(context.Background(), rec)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
	}
	_, err = transform.Select()
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = transform.Rename(nil)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

func TestFilter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the releases below
	rec := tt.Batch(mem, 0, 10)
	t.Cleanup(rec.Release)
	empty := tt.Batch(mem, 0, 0)
	t.Cleanup(empty.Release)

	ids := func(r arrow.RecordBatch) []int64 { return r.Column(0).(*array.Int64).Int64Values() }
	for _, c := range []struct {
		col   string
		op    transform.Op
		value string
		want  []int64
	}{
		{"id", transform.Gt, "6", []int64{7, 8, 9}},
		{"id", transform.Le, "1", []int64{0, 1}},
		{"id", transform.Ne, "3", []int64{0, 1, 2, 4, 5, 6, 7, 8, 9}},
		{"name", transform.Eq, "n3", []int64{3}},
		{"name", transform.Lt, "n2", []int64{0, 1}},
		{"id", transform.Ge, "0", []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"id", transform.IsNull, "", []int64{}},
		{"id", transform.NotNull, "", []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
	} {
		f, err := transform.Filter(c.col, c.op, c.value, mem)
		require.NoError(t, err)
		out := apply(t, f, rec)
		require.Equal(t, c.want, append([]int64{}, ids(out)...), "%s %s %s", c.col, c.op, c.value)
		require.Equal(t, "id,name", tt.FieldNames(out))
		require.Zero(t, apply(t, f, empty).NumRows(), "0-row batches pass")
	}
	all, _ := transform.Filter("id", transform.Ge, "0", mem)
	require.Same(t, rec, apply(t, all, rec), "all rows match: the batch itself")

	_, err := transform.Filter("id", "like", "x", mem)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = transform.Filter("id", transform.IsNull, "x", mem)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	for _, c := range [][2]string{{"id", "abc"}, {"nope", "1"}} {
		f, err := transform.Filter(c[0], transform.Eq, c[1], mem)
		require.NoError(t, err)
		_, err = f(context.Background(), rec)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
	}
}

// A filter on a column type it cannot compare lists the types it can.
func TestFilterTypeErrorListsTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	f, err := transform.Filter("ts", transform.Gt, "1", mem)
	require.NoError(t, err)
	b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "ts", Type: arrow.FixedWidthTypes.Date32}}, nil))
	defer b.Release()
	b.Field(0).(*array.Date32Builder).Append(1)
	rec := b.NewRecordBatch()
	defer rec.Release()
	_, err = f(context.Background(), rec)
	require.ErrorContains(t, err, "filter does not take a date32 column: it compares integer, unsigned, float, boolean and string")
}
