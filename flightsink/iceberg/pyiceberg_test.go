package iceberg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	icesink "github.com/flightline/flightline/flightsink/iceberg"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// richSchema has a column of every primitive type the sink maps, all but
// id nullable.
var richSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
	{Name: "n32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
}, nil)

// richBatch builds the rows of ids in richSchema, every value a function
// of the id, with nulls in every nullable column.
func richBatch(mem memory.Allocator, ids []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, richSchema)
	defer b.Release()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		nullOr(b.Field(1), id%7 == 3, func() { b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n-%d", id)) })
		nullOr(b.Field(2), id%5 == 0, func() { b.Field(2).(*array.Float64Builder).Append(float64(id) / 4) })
		nullOr(b.Field(3), id%11 == 0, func() { b.Field(3).(*array.BooleanBuilder).Append(id%2 == 0) })
		nullOr(b.Field(4), id%13 == 0, func() { b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(base + id*1_000_001)) })
		nullOr(b.Field(5), id%17 == 0, func() { b.Field(5).(*array.Date32Builder).Append(arrow.Date32(id % 20000)) })
		nullOr(b.Field(6), id%19 == 0, func() { b.Field(6).(*array.BinaryBuilder).Append([]byte{byte(id), byte(id >> 8), 0}) })
		nullOr(b.Field(7), id%23 == 0, func() { b.Field(7).(*array.Decimal128Builder).Append(decimal128.FromI64(id*3 - 500)) })
		nullOr(b.Field(8), id%29 == 0, func() { b.Field(8).(*array.Int32Builder).Append(int32(id)) })
	}
	return b.NewRecordBatch()
}

func nullOr(b array.Builder, null bool, appendValue func()) {
	if null {
		b.AppendNull()
	} else {
		appendValue()
	}
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// pyiceberg 0.12's SqlCatalog, over the same SQLite file, reads back every
// committed row exactly once with the types and nulls written, although
// the writers replayed batches, committed groups, and a zombie tried to
// write after a newer claim; it also sees each pipeline's checkpoint in
// the current snapshot's summary.
func TestIntegrationPyicebergReadsExactlyOnce(t *testing.T) {
	py := servicetest.Need(t, "FLIGHTLINE_PYICEBERG_PYTHON", "python with pyiceberg 0.12")
	// Partitioned, so the reader also resolves day and bucket partitions
	// (iceberg-go's writer splits the batches); unpartitioned, the sink
	// writes its data files with internal/parquetw (datafile.go).
	for name, partition := range map[string]string{"partitioned": "day(ts), bucket(4, id)", "unpartitioned": ""} {
		t.Run(name, func(t *testing.T) { pyicebergReadsExactlyOnce(t, py, partition) })
	}
}

func pyicebergReadsExactlyOnce(t *testing.T, py, partition string) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	db := filepath.Join(dir, "catalog.db")
	cfg := icesink.Config{Warehouse: wh, SQLite: db, Table: "lake.orders", Partition: partition}
	s := newSink(t, cfg, icesink.Allocator(mem))
	cp := func(k string, n int64) []byte { return checkpoint.Positions{k: n}.Encode() }
	write := func(w flightsink.Writer, k string, from, to int64) error {
		rec := richBatch(mem, span(from, to))
		defer rec.Release()
		return w.WriteBatch(ctx, rec, cp(k, to))
	}
	var want []int64

	a, _, err := s.Open(ctx, flightsink.Pipeline{ID: "a"})
	require.NoError(t, err)
	for i := int64(0); i < 5; i++ {
		require.NoError(t, write(a, "a/0", i*100, (i+1)*100))
	}
	require.NoError(t, write(a, "a/0", 200, 300)) // a replay: writes nothing
	want = append(want, span(0, 500)...)
	g1, g2 := richBatch(mem, span(500, 550)), richBatch(mem, span(550, 600))
	require.NoError(t, a.(flightsink.GroupWriter).WriteBatches(ctx, []flightsink.Batch{{Rec: g1, CP: cp("a/0", 550)}, {Rec: g2, CP: cp("a/0", 600)}}))
	g1.Release()
	g2.Release()
	want = append(want, span(500, 600)...)

	b, _, err := newSink(t, cfg, icesink.Allocator(mem)).Open(ctx, flightsink.Pipeline{ID: "b"})
	require.NoError(t, err)
	require.NoError(t, write(b, "b/0", 10_000, 10_250))
	want = append(want, span(10_000, 10_250)...)

	a2, got, err := newSink(t, cfg, icesink.Allocator(mem)).Open(ctx, flightsink.Pipeline{ID: "a"})
	require.NoError(t, err)
	require.Equal(t, string(cp("a/0", 600)), string(got))
	require.ErrorIs(t, write(a, "a/0", 600, 700), flightline.ErrFenced, "the zombie is fenced")
	require.NoError(t, write(a2, "a/0", 600, 700))
	want = append(want, span(600, 700)...)
	for _, w := range []flightsink.Writer{a, a2, b} {
		require.NoError(t, w.Close(ctx))
	}
	slices.Sort(want)

	out, outJSON := filepath.Join(dir, "out.arrow"), filepath.Join(dir, "out.json")
	cmd := exec.Command(py, "testdata/read_pyiceberg.py", db, "flightline", "file://"+wh, "lake.orders", out, outJSON)
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, string(msg))

	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, 1, r.NumRecords(), "one combined batch")
	rec, err := r.Record(0)
	require.NoError(t, err)
	require.Equal(t, richSchema.NumFields(), int(rec.NumCols()))
	for i, f := range richSchema.Fields() {
		g := rec.Schema().Field(i)
		require.Equal(t, f.Name, g.Name)
		require.Truef(t, arrow.TypeEqual(f.Type, g.Type), "column %s: wrote %s, pyiceberg read %s", f.Name, f.Type, g.Type)
		require.Equalf(t, f.Nullable, g.Nullable, "column %s nullability", f.Name)
	}
	ids := rec.Column(0).(*array.Int64).Int64Values()
	require.Equal(t, want, ids, "every id exactly once")
	exp := richBatch(mem, ids)
	defer exp.Release()
	for i := range exp.NumCols() {
		require.Truef(t, array.Equal(exp.Column(int(i)), rec.Column(int(i))), "column %s: values or nulls differ", richSchema.Field(int(i)).Name)
	}

	var meta struct {
		Snapshots int               `json:"snapshots"`
		Summary   map[string]string `json:"summary"`
	}
	b2, err := os.ReadFile(outJSON)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b2, &meta))
	for k, n := range map[string]int64{"a": 700, "b": 10_250} {
		var st struct {
			Checkpoint string `json:"checkpoint"`
		}
		require.NoError(t, json.Unmarshal([]byte(meta.Summary[icesink.Key(k)]), &st), "summary: %v", meta.Summary)
		require.Equal(t, string(cp(k+"/0", n)), st.Checkpoint)
	}
	parquetw, _ := filepath.Glob(filepath.Join(wh, "*", "*", "data", "*-flightline.parquet"))
	require.Equal(t, partition == "", len(parquetw) > 0, "data files written by internal/parquetw: %v", parquetw)
}
