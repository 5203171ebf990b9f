package objsink_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/sinktest"
)

var eventSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "kind", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func events(t *testing.T, mem memory.Allocator, js string) arrow.RecordBatch {
	rec, _, err := array.RecordFromJSON(mem, eventSchema, strings.NewReader(js))
	require.NoError(t, err)
	return rec
}

func layout(t *testing.T, root string) []string {
	var rel []string
	for _, p := range listParts(t, filepath.Join(root, "default")) {
		r, err := filepath.Rel(filepath.Join(root, "default"), p)
		require.NoError(t, err)
		rel = append(rel, filepath.ToSlash(r))
	}
	sort.Strings(rel)
	return rel
}

func writeOne(t *testing.T, root string, rec arrow.RecordBatch, opts ...objsink.Option) error {
	b, err := objsink.NewLocal(root)
	require.NoError(t, err)
	s, err := objsink.New(b, "file sink", opts...)
	require.NoError(t, err)
	w, _, err := s.Open(context.Background(), flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	return w.WriteBatch(context.Background(), rec, sinktest.CP(1))
}

const eventsJSON = `[
	{"id": 1, "ts": "2026-01-01T23:59:59Z", "kind": "a/b"},
	{"id": 2, "ts": "2026-01-02T00:00:00Z", "kind": ".hidden"},
	{"id": 3, "ts": null, "kind": null},
	{"id": 4, "ts": "2026-01-01T00:00:00Z", "kind": "a/b"}]`

func TestPartitionLayout(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := events(t, mem, eventsJSON)
	defer rec.Release()

	root := t.TempDir()
	require.NoError(t, writeOne(t, root, rec, objsink.PartitionBy("kind"), objsink.WithFormat(objsink.JSONL)))
	require.Equal(t, []string{
		"kind=%2Ehidden/part-00000000000000000002-0001.jsonl",
		"kind=__HIVE_DEFAULT_PARTITION__/part-00000000000000000002-0002.jsonl",
		"kind=a%2Fb/part-00000000000000000002-0000.jsonl",
	}, layout(t, root))
	got, err := os.ReadFile(filepath.Join(root, "default", "kind=a%2Fb", "part-00000000000000000002-0000.jsonl"))
	require.NoError(t, err)
	require.Equal(t, `{"id":1,"ts":"2026-01-01T23:59:59Z","kind":"a/b"}`+"\n"+`{"id":4,"ts":"2026-01-01T00:00:00Z","kind":"a/b"}`+"\n", string(got),
		"the rows of the partition, in order, the column kept")

	root = t.TempDir()
	require.NoError(t, writeOne(t, root, rec, objsink.PartitionByDay("ts")))
	require.Equal(t, []string{
		"ts_day=2026-01-01/part-00000000000000000002-0000.parquet",
		"ts_day=2026-01-02/part-00000000000000000002-0001.parquet",
		"ts_day=__HIVE_DEFAULT_PARTITION__/part-00000000000000000002-0002.parquet",
	}, layout(t, root))
	require.ElementsMatch(t, []int64{1, 4, 2, 3}, partIDs(t, root, objsink.Parquet, flightsink.Pipeline{ID: "p"}))
}

// A batch without the partition column, or by day on a column that is no
// date, is refused before anything is written.
func TestPartitionColumnChecked(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := events(t, mem, eventsJSON)
	defer rec.Release()
	for _, opt := range []objsink.Option{objsink.PartitionBy("colour"), objsink.PartitionByDay("kind")} {
		root := t.TempDir()
		err := writeOne(t, root, rec, opt)
		require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
		require.Empty(t, layout(t, root))
		staged, _ := os.ReadDir(filepath.Join(root, "default", "_flightline", "staging"))
		require.Empty(t, staged)
	}
	_, err := objsink.New(nil, "file sink", objsink.PartitionBy("a"), objsink.PartitionByDay("b"))
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}
