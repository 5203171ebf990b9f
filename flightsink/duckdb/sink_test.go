//go:build cgo

package duckdb_test

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/duckdb"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/duckdbtest"
)

func newSink(t *testing.T, cfg duckdb.Config, opts ...duckdb.Option) *duckdb.Sink {
	t.Helper()
	cfg.Library = duckdbtest.Lib(t)
	s, err := duckdb.New(context.Background(), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// ids reads the ids through this process's database (the file is locked
// to other processes while a Sink has it open), with a plain SELECT.
func ids(t *testing.T, path, table string) []int64 {
	t.Helper()
	ctx := context.Background()
	db, err := duckdb.Open(ctx, path, duckdbtest.Lib(t))
	require.NoError(t, err)
	defer db.Close()
	c, unlock, err := db.Conn(ctx)
	require.NoError(t, err)
	defer unlock()
	defer c.Close()
	var n int64
	_, err = c.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", []any{&n}, table)
	require.NoError(t, err)
	if n == 0 {
		return nil
	}
	r, err := c.Query(ctx, `SELECT id FROM "`+table+`"`)
	require.NoError(t, err)
	defer r.Release()
	var out []int64
	for r.Next() {
		col := r.RecordBatch().Column(0).(*array.Int64)
		out = append(out, col.Int64Values()...)
	}
	require.NoError(t, r.Err())
	return out
}

func TestIntegrationConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.duckdb")
	sinktest.Run(t, sinktest.Harness{
		NewSink:   func(t *testing.T) flightsink.Sink { return newSink(t, duckdb.Config{Path: path}) },
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return ids(t, path, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
	})
	// Every Sink closed: the file is free, and DuckDB's Python package
	// reads what the suite left (one table per check).
	require.NotEmpty(t, duckdbtest.PyQuery(t, path, "select count(*) from __flightline_checkpoints"))
}

// TestIntegrationSecondProcessRefused holds the file open in a Python
// process: New must fail with ErrLocked, which is FailedPrecondition on
// the wire.
func TestIntegrationSecondProcessRefused(t *testing.T) {
	lib, py := duckdbtest.Lib(t), duckdbtest.Python(t)
	path := filepath.Join(t.TempDir(), "locked.duckdb")
	cmd := exec.Command(py, "-c", "import sys, duckdb\ncon = duckdb.connect(sys.argv[1])\nprint('ready', flush=True)\nsys.stdin.read()", path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)

	_, err = duckdb.New(context.Background(), duckdb.Config{Path: path, Library: lib})
	require.Error(t, err)
	require.ErrorIs(t, err, duckdb.ErrLocked)
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.Contains(t, err.Error(), "PID")
	require.Equal(t, codes.FailedPrecondition, flighterr.Code(err))

	// Once that process ends, the file opens.
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	newSink(t, duckdb.Config{Path: path})
}

func TestIntegrationNewColumnsAdded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evolve.duckdb")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	s := newSink(t, duckdb.Config{Path: path, Table: "evolve"})
	p := flightsink.Pipeline{ID: "evolve"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	defer w.Close(ctx)

	rec := sinktest.Batch(mem, 0, 3)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	rec.Release()

	// id, name and a new nullable column: added to the table.
	wide := arrow.NewSchema(append(sinktest.Schema.Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	b := array.NewRecordBuilder(mem, wide)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{3, 4}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"c", "d"}, nil)
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{1.5, 2.5}, nil)
	rec = b.NewRecordBatch()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(5)))
	rec.Release()

	// A new NOT NULL column cannot be added to a table with rows.
	strict := arrow.NewSchema(append(sinktest.Schema.Fields(), arrow.Field{Name: "must", Type: arrow.PrimitiveTypes.Int64}), nil)
	b2 := array.NewRecordBuilder(mem, strict)
	b2.Field(0).(*array.Int64Builder).AppendValues([]int64{5}, nil)
	b2.Field(1).(*array.StringBuilder).AppendValues([]string{"e"}, nil)
	b2.Field(2).(*array.Int64Builder).AppendValues([]int64{1}, nil)
	rec = b2.NewRecordBatch()
	err = w.WriteBatch(ctx, rec, sinktest.CP(6))
	rec.Release()
	b.Release()
	b2.Release()
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Equal(t, codes.InvalidArgument, flighterr.Code(err))

	got := ids(t, path, "evolve")
	slices.Sort(got)
	require.Equal(t, []int64{0, 1, 2, 3, 4}, got)
	require.NoError(t, w.Close(ctx))
	require.NoError(t, s.Close())
	require.Equal(t, "4.0", duckdbtest.PyQuery(t, path, "select sum(extra) from evolve"))
	require.Equal(t, "3", duckdbtest.PyQuery(t, path, "select count(*) from evolve where extra is null"))
}

func TestMotherDuckNeedsToken(t *testing.T) {
	t.Setenv(duckdb.TokenEnv, "")
	t.Setenv("MOTHERDUCK_TOKEN", "")
	_, err := duckdb.New(context.Background(), duckdb.Config{Path: "md:analytics"})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.Contains(t, err.Error(), duckdb.TokenEnv)
}

func TestNoLibrary(t *testing.T) {
	t.Setenv(duckdb.LibraryEnv, "")
	t.Setenv("FLIGHTLINE_CACHE", t.TempDir())
	_, err := duckdb.New(context.Background(), duckdb.Config{Path: filepath.Join(t.TempDir(), "x.duckdb")})
	require.ErrorIs(t, err, duckdb.ErrNoLibrary)
	require.Contains(t, err.Error(), duckdb.LibraryEnv)
	require.False(t, errors.Is(err, flightline.ErrInvalidInput))
}

// A column DuckDB has no type for (float16) is refused before any I/O:
// INVALID_ARGUMENT, no table, no checkpoint. Intervals, lists (as JSON
// text) and dictionaries land.
func TestIntegrationUnmappableTypeRefused(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	path := filepath.Join(t.TempDir(), "types.duckdb")
	s := newSink(t, duckdb.Config{Path: path})
	write := func(f arrow.Field, fill func(array.Builder)) error {
		sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, f}, nil)
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(1)
		fill(b.Field(1))
		rec := b.NewRecordBatch()
		defer rec.Release()
		p := flightsink.Pipeline{ID: f.Name, Target: "t_" + f.Name}
		w, _, err := s.Open(ctx, p)
		require.NoError(t, err)
		defer w.Close(ctx)
		return w.WriteBatch(ctx, rec, sinktest.CP(1))
	}
	err := write(arrow.Field{Name: "half", Type: arrow.FixedWidthTypes.Float16, Nullable: true}, func(b array.Builder) {
		b.(*array.Float16Builder).Append(float16.New(1.5))
	})
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Equal(t, codes.InvalidArgument, flighterr.Code(err))
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: "half", Target: "t_half"})
	require.NoError(t, err)
	require.Nil(t, cp, "nothing committed")
	require.Nil(t, ids(t, path, "t_half"), "no table")

	for _, f := range []arrow.Field{
		{Name: "iv", Type: arrow.FixedWidthTypes.MonthDayNanoInterval, Nullable: true},
		{Name: "li", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "di", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
	} {
		require.NoError(t, write(f, func(b array.Builder) { b.AppendNull() }), f.Name)
		require.Equal(t, []int64{1}, ids(t, path, "t_"+f.Name))
	}
}

// Mode upsert is the adbc sink's: changes by key through a temporary
// stage, read back with DuckDB's Python package once the file is free.
func TestIntegrationUpsert(t *testing.T) {
	path := filepath.Join(t.TempDir(), "upsert.duckdb")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	s := newSink(t, duckdb.Config{Path: path, Table: "ups", Mode: "upsert", Key: []string{"id"}}, duckdb.Allocator(mem))
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "ups"})
	require.NoError(t, err)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "_op", Type: arrow.BinaryTypes.String},
		{Name: "_lsn", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	write := func(cp string, ops []string, ids []int64, vs []string) error {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		b.Field(1).(*array.StringBuilder).AppendValues(vs, nil)
		b.Field(2).(*array.StringBuilder).AppendValues(ops, nil)
		for range ids {
			b.Field(3).(*array.Int64Builder).Append(1)
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		return w.WriteBatch(ctx, rec, []byte(cp))
	}
	require.NoError(t, write("1", []string{"insert", "insert", "insert"}, []int64{1, 2, 3}, []string{"a", "b", "c"}))
	// An update, a key update (2 → 20), a delete then a re-insert.
	require.NoError(t, write("2", []string{"update", "delete", "update", "delete", "insert"}, []int64{1, 2, 20, 3, 3}, []string{"a2", "", "b", "", "c2"}))
	// A replay of the committed batch: nothing.
	require.NoError(t, write("2", []string{"delete"}, []int64{1}, []string{""}))
	err = write("3", []string{"insert"}, []int64{9}, []string{"x"})
	require.NoError(t, err)
	require.ErrorIs(t, write("4", []string{"merge"}, []int64{9}, []string{"y"}), flightline.ErrInvalidInput)
	require.NoError(t, w.Close(ctx))
	require.NoError(t, s.Close())
	require.Equal(t, "1 a2,20 b,3 c2,9 x", duckdbtest.PyQuery(t, path, "select string_agg(id || ' ' || v, ',' order by id::text) from ups"))
	require.Equal(t, "id,v", duckdbtest.PyQuery(t, path, "select string_agg(column_name, ',' order by column_name) from information_schema.columns where table_name = 'ups'"))
}
