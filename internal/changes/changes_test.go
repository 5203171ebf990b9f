package changes_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/changes"
)

func batch(t *testing.T, mem memory.Allocator, js string) arrow.RecordBatch {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "k2", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "_lsn", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(js))
	require.NoError(t, err)
	return rec
}

func TestSplitKeysLast(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batch(t, mem, `[
		{"id": 1, "k2": "a", "v": "x", "_op": "insert", "_lsn": 1},
		{"id": 1, "k2": "b", "v": "y", "_op": "insert", "_lsn": 1},
		{"id": 1, "k2": "a", "v": null, "_op": "delete", "_lsn": 2},
		{"id": 2, "k2": "a", "v": "z", "_op": null, "_lsn": 2},
		{"id": 1, "k2": "b", "v": "w", "_op": "update", "_lsn": 3}
	]`)
	defer rec.Release()
	data, op, err := changes.Split(rec)
	require.NoError(t, err)
	defer data.Release()
	require.Equal(t, []string{"id", "k2", "v"}, names(data.Schema()))
	require.NoError(t, changes.Check(op))
	idx, err := changes.KeyColumns(data.Schema(), []string{"id", "k2"})
	require.NoError(t, err)
	keys, err := changes.Keys(data, idx)
	require.NoError(t, err)
	require.Equal(t, keys[0], keys[2])
	require.Equal(t, keys[1], keys[4])
	require.NotEqual(t, keys[0], keys[1])
	require.NotEqual(t, keys[0], keys[3])
	require.Equal(t, []int{2, 3, 4}, changes.Last(keys))
	require.True(t, changes.IsDelete(op, 2))
	require.False(t, changes.IsDelete(op, 3), "a null _op is an upsert")
	require.False(t, changes.IsDelete(nil, 0), "no _op column: every row an upsert")
}

// Two columns' values never run into each other: ("ab", "c") and
// ("a", "bc") are different keys.
func TestKeysDoNotRunTogether(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String}, {Name: "b", Type: arrow.BinaryTypes.String}}, nil)
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(`[{"a": "ab", "b": "c"}, {"a": "a", "b": "bc"}]`))
	require.NoError(t, err)
	defer rec.Release()
	keys, err := changes.Keys(rec, []int{0, 1})
	require.NoError(t, err)
	require.NotEqual(t, keys[0], keys[1])
}

func TestRefusals(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batch(t, mem, `[{"id": null, "k2": "a", "v": "x", "_op": "upsert", "_lsn": 1}]`)
	defer rec.Release()
	data, op, err := changes.Split(rec)
	require.NoError(t, err)
	defer data.Release()
	require.ErrorIs(t, changes.Check(op), flightline.ErrInvalidInput, "an unknown _op")
	_, err = changes.KeyColumns(data.Schema(), []string{"nope"})
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	_, err = changes.KeyColumns(data.Schema(), nil)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	idx, err := changes.KeyColumns(data.Schema(), []string{"id"})
	require.NoError(t, err)
	_, err = changes.Keys(data, idx)
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "a null key")
	require.ErrorContains(t, err, "row 0")

	sc := arrow.NewSchema([]arrow.Field{{Name: "f", Type: arrow.PrimitiveTypes.Float64}, {Name: "_op", Type: arrow.PrimitiveTypes.Int32}}, nil)
	bad, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(`[{"f": 1, "_op": 1}]`))
	require.NoError(t, err)
	defer bad.Release()
	_, _, err = changes.Split(bad)
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "_op not utf8")
	_, err = changes.KeyColumns(bad.Schema(), []string{"f"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "a float key")

	only := arrow.NewSchema([]arrow.Field{{Name: "_op", Type: arrow.BinaryTypes.String}}, nil)
	o, _, err := array.RecordFromJSON(mem, only, strings.NewReader(`[{"_op": "insert"}]`))
	require.NoError(t, err)
	defer o.Release()
	_, _, err = changes.Split(o)
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "no data columns")
}

func names(sc *arrow.Schema) []string {
	var out []string
	for _, f := range sc.Fields() {
		out = append(out, f.Name)
	}
	return out
}
