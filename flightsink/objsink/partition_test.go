package objsink_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
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

func writeOne(t *testing.T, root string, rec arrow.RecordBatch, cfg objsink.Config, opts ...objsink.Option) error {
	b, err := objsink.NewLocal(root)
	require.NoError(t, err)
	cfg.Backend, cfg.Name = b, "file sink"
	s, err := objsink.New(context.Background(), cfg, opts...)
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
	require.NoError(t, writeOne(t, root, rec, objsink.Config{PartitionBy: "kind", Format: objsink.JSONL}))
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
	require.NoError(t, writeOne(t, root, rec, objsink.Config{PartitionByDay: "ts"}))
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
	for _, cfg := range []objsink.Config{{PartitionBy: "colour"}, {PartitionByDay: "kind"}} {
		root := t.TempDir()
		err := writeOne(t, root, rec, cfg)
		require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
		require.Empty(t, layout(t, root))
		staged, _ := os.ReadDir(filepath.Join(root, "default", "_flightline", "staging"))
		require.Empty(t, staged)
	}
	_, err := objsink.New(context.Background(), objsink.Config{Name: "file sink", PartitionBy: "a", PartitionByDay: "b"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

// With DataDir the part files, and nothing else, are under
// <target>/<dir>/; a BeforeCommit hook sees each batch's partition
// directories before anything is written, not replays; its error fails
// the write with nothing staged or committed.
func TestDataDirAndBeforeCommit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := events(t, mem, eventsJSON)
	defer rec.Release()
	ctx := context.Background()

	root := t.TempDir()
	var seen []objsink.Commit
	hook := objsink.BeforeCommit(func(_ context.Context, c objsink.Commit) error {
		staged, _ := os.ReadDir(filepath.Join(root, c.Target, "_flightline", "staging"))
		require.Empty(t, staged, "the hook runs before the batch is staged")
		seen = append(seen, c)
		return nil
	})
	b, err := objsink.NewLocal(root)
	require.NoError(t, err)
	s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "file sink", PartitionByDay: "ts"}, objsink.DataDir("data"), hook)
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(1)))
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(1)), "a replay")
	require.Len(t, seen, 1, "the replay calls no hook")
	require.Equal(t, "default", seen[0].Target)
	require.True(t, seen[0].Schema.Equal(eventSchema))
	require.Equal(t, []string{"ts_day=2026-01-01", "ts_day=2026-01-02", "ts_day=__HIVE_DEFAULT_PARTITION__"}, seen[0].Dirs)

	var all []string
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "default", "data"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r, _ := filepath.Rel(filepath.Join(root, "default", "data"), p)
			all = append(all, filepath.ToSlash(r))
		}
		return err
	}))
	require.Equal(t, []string{
		"ts_day=2026-01-01/part-00000000000000000002-0000.parquet",
		"ts_day=2026-01-02/part-00000000000000000002-0001.parquet",
		"ts_day=__HIVE_DEFAULT_PARTITION__/part-00000000000000000002-0002.parquet",
	}, all, "every object under the data directory is a part file; the records are outside it")
	_, err = os.Stat(filepath.Join(root, "default", "_flightline", "commits", "00000000000000000002.json"))
	require.NoError(t, err)

	// Unpartitioned: one Dirs entry, "".
	seen = nil
	root = t.TempDir()
	require.NoError(t, writeOne(t, root, rec, objsink.Config{}, objsink.DataDir("data"), hook))
	require.Len(t, seen, 1)
	require.Equal(t, []string{""}, seen[0].Dirs)
	_, err = os.Stat(filepath.Join(root, "default", "data", "part-00000000000000000002.parquet"))
	require.NoError(t, err)

	// A failing hook: the write fails with its error, nothing is written.
	refused := errors.New("catalog says no")
	root = t.TempDir()
	b, err = objsink.NewLocal(root)
	require.NoError(t, err)
	s, err = objsink.New(context.Background(), objsink.Config{Backend: b, Name: "file sink"}, objsink.DataDir("data"), objsink.BeforeCommit(func(context.Context, objsink.Commit) error { return refused }))
	require.NoError(t, err)
	w, _, err = s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.ErrorIs(t, w.WriteBatch(ctx, rec, sinktest.CP(1)), refused)
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.Nil(t, cp, "nothing committed")
	staged, _ := os.ReadDir(filepath.Join(root, "default", "_flightline", "staging"))
	require.Empty(t, staged)
	_, err = os.Stat(filepath.Join(root, "default", "data"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	for _, bad := range []string{"", "_data", "a/.b", "k=v", "a//b"} {
		_, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "file sink"}, objsink.DataDir(bad))
		require.ErrorIs(t, err, flightline.ErrInvalidInput, bad)
	}
}

// SchemaEvolution: a batch adding a nullable column at the end is
// accepted, and so is one without it afterwards (in a group it gets the
// column as nulls); a type change or a new non-nullable column is still
// refused, and the widest schema survives a restart. Without the option
// the wider batch is refused.
func TestSchemaEvolution(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	wide := arrow.NewSchema(append(eventSchema.Fields(), arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	narrow := recOf(t, mem, eventSchema, `[{"id": 1, "kind": "a"}]`)
	defer narrow.Release()
	wider := recOf(t, mem, wide, `[{"id": 2, "kind": "b", "note": "n"}]`)
	defer wider.Release()
	retyped := recOf(t, mem, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil), `[{"id": 3}]`)
	defer retyped.Release()
	required := recOf(t, mem, arrow.NewSchema(append(eventSchema.Fields(), arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64}), nil), `[{"id": 4, "n": 1}]`)
	defer required.Release()

	root := t.TempDir()
	open := func(cfg objsink.Config) flightsink.Writer {
		b, err := objsink.NewLocal(root)
		require.NoError(t, err)
		cfg.Backend, cfg.Name = b, "file sink"
		s, err := objsink.New(context.Background(), cfg)
		require.NoError(t, err)
		w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "p"})
		require.NoError(t, err)
		return w
	}
	w := open(objsink.Config{SchemaEvolution: true})
	require.NoError(t, w.WriteBatch(ctx, narrow, sinktest.CP(1)))
	require.NoError(t, w.WriteBatch(ctx, wider, sinktest.CP(2)))
	require.NoError(t, w.WriteBatch(ctx, narrow, sinktest.CP(3)), "a batch without the added column")
	require.ErrorIs(t, w.WriteBatch(ctx, retyped, sinktest.CP(4)), flightline.ErrSchemaMismatch)
	require.ErrorIs(t, w.WriteBatch(ctx, required, sinktest.CP(4)), flightline.ErrSchemaMismatch)

	// A restarted writer knows the widest schema: a group of a narrow and
	// a wide batch is one part file of the wide schema.
	w = open(objsink.Config{SchemaEvolution: true})
	require.NoError(t, w.(flightsink.GroupWriter).WriteBatches(ctx, []flightsink.Batch{{Rec: narrow, CP: sinktest.CP(4)}, {Rec: wider, CP: sinktest.CP(5)}}))
	require.ErrorIs(t, open(objsink.Config{}).WriteBatch(ctx, required, sinktest.CP(6)), flightline.ErrSchemaMismatch, "without the option")
	require.ErrorIs(t, open(objsink.Config{}).WriteBatch(ctx, narrow, sinktest.CP(6)), flightline.ErrSchemaMismatch, "without the option the target's (wide) schema is required")

	data, err := os.ReadFile(filepath.Join(root, "default", "part-00000000000000000006.parquet"))
	require.NoError(t, err, "the group's part file (record 6: after the markers 1 and 5 and the batches 2-4)")
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	require.NoError(t, err)
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	require.NoError(t, err)
	tbl, err := fr.ReadTable(ctx)
	require.NoError(t, err)
	defer tbl.Release()
	require.Equal(t, int64(4), tbl.NumCols())
	require.Equal(t, "note", tbl.Schema().Field(3).Name)
	note := tbl.Column(3).Data().Chunk(0)
	require.True(t, note.IsNull(0), "the narrow batch's row: the added column null")
	require.Equal(t, "n", note.(*array.String).Value(1))
	require.ElementsMatch(t, []int64{1, 2, 1, 1, 2}, partIDs(t, root, objsink.Parquet, flightsink.Pipeline{ID: "p"}))
}

func recOf(t *testing.T, mem memory.Allocator, sc *arrow.Schema, js string) arrow.RecordBatch {
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(js))
	require.NoError(t, err)
	return rec
}
