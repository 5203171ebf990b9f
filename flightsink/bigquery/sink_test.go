package bigquery

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/bqrest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// emu is the emulator `services.sh up bigquery` (then `wait bigquery`)
// started.
type emu struct{ endpoint, grpc, project, dataset string }

func needEmulator(t testing.TB) emu {
	t.Helper()
	return emu{
		endpoint: servicetest.Need(t, "FLIGHTLINE_BQ_ENDPOINT", "the BigQuery emulator"),
		grpc:     servicetest.Need(t, "FLIGHTLINE_BQ_GRPC", "the BigQuery emulator"),
		project:  servicetest.Need(t, "FLIGHTLINE_BQ_PROJECT", "the BigQuery emulator"),
		dataset:  servicetest.Need(t, "FLIGHTLINE_BQ_DATASET", "the BigQuery emulator"),
	}
}

func (e emu) sink(t testing.TB) *Sink {
	t.Helper()
	return e.sinkWith(t, Config{})
}

// config is the emulator's Config, keyed on id.
func (e emu) config() Config {
	return Config{Project: e.project, Dataset: e.dataset, EmulatorEndpoint: e.endpoint, EmulatorGRPC: e.grpc, Key: []string{"id"}}
}

// sinkWith returns a sink on the emulator with cfg's other fields (Key
// defaults to id).
func (e emu) sinkWith(t testing.TB, cfg Config, opts ...Option) *Sink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.config()
	if cfg.Key != nil {
		c.Key = cfg.Key
	}
	c.Table, c.CheckpointTable = cfg.Table, cfg.CheckpointTable
	s, err := New(ctx, c, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// query reads through the REST API with plain HTTP, not the sink's client.
func (e emu) query(t testing.TB, sql string) [][]*string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := bqrest.Query(ctx, e.endpoint, e.project, sql)
	if errors.Is(err, bqrest.ErrNoTable) {
		return nil
	}
	require.NoError(t, err)
	return rows
}

func (e emu) table(name string) string { return fmt.Sprintf("`%s.%s.%s`", e.project, e.dataset, name) }

func (e emu) ids(t testing.TB, table string) []int64 {
	var ids []int64
	for _, r := range e.query(t, "SELECT id FROM "+e.table(table)) {
		v, err := strconv.ParseInt(*r[0], 10, 64)
		require.NoError(t, err)
		ids = append(ids, v)
	}
	return ids
}

func TestIntegrationBigQueryConformance(t *testing.T) {
	e := needEmulator(t)
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.AtLeastOnce,
		NewSink:   func(t *testing.T) flightsink.Sink { return e.sink(t) },
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return e.ids(t, p.Target) },
	})
}

func name(prefix string) string { return fmt.Sprintf("%s_%06d", prefix, rand.IntN(1e6)) }

// kv builds a batch of (id, name) rows.
func kv(mem memory.Allocator, ids []int64, names []string) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, sinktest.Schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	b.Field(1).(*array.StringBuilder).AppendValues(names, nil)
	return b.NewRecordBatch()
}

func (e emu) names(t testing.TB, table string) map[int64]string {
	out := map[int64]string{}
	for _, r := range e.query(t, "SELECT id, name FROM "+e.table(table)) {
		id, err := strconv.ParseInt(*r[0], 10, 64)
		require.NoError(t, err)
		_, dup := out[id]
		require.False(t, dup, "key %d twice in %s", id, table)
		out[id] = *r[1]
	}
	return out
}

// TestIntegrationBigQueryDuplicateKeys: inside one batch the last row of a
// key (by position) wins; a later batch updates the key; a replay of an
// older batch after a restart is skipped (it would set the key back).
func TestIntegrationBigQueryDuplicateKeys(t *testing.T) {
	e := needEmulator(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := t.Context()
	s := e.sink(t)
	p := flightsink.Pipeline{ID: "dup", Target: name("dup")}
	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
	rec := kv(mem, []int64{1, 2, 1, 3, 1}, []string{"a", "b", "c", "d", "e"})
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(5)))
	rec.Release()
	require.Equal(t, map[int64]string{1: "e", 2: "b", 3: "d"}, e.names(t, p.Target))

	rec = kv(mem, []int64{2, 4, 2}, []string{"x", "y", "z"})
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(8)))
	rec.Release()
	require.NoError(t, w.Close(ctx))
	want := map[int64]string{1: "e", 2: "z", 3: "d", 4: "y"}
	require.Equal(t, want, e.names(t, p.Target))
	got, err := s.Committed(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(8)), string(got))

	w, _, err = e.sink(t).Open(ctx, p)
	require.NoError(t, err)
	rec = kv(mem, []int64{1, 2, 1, 3, 1}, []string{"a", "b", "c", "d", "e"})
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(5)), "a replay of the first batch")
	rec.Release()
	require.NoError(t, w.Close(ctx))
	require.Equal(t, want, e.names(t, p.Target), "the replay must not set key 2 back")
	require.Empty(t, e.query(t, fmt.Sprintf("SELECT table_name FROM `%s.%s`.INFORMATION_SCHEMA.TABLES WHERE STARTS_WITH(table_name, '_fl_stage_')", e.project, e.dataset)),
		"staging tables are dropped")
}

// TestIntegrationBigQueryTypes writes every mapped type and reads it back
// through the REST API.
func TestIntegrationBigQueryTypes(t *testing.T) {
	e := needEmulator(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := t.Context()
	p := flightsink.Pipeline{ID: "types", Target: name("types")}
	w, _, err := e.sink(t).Open(ctx, p)
	require.NoError(t, err)
	rec := typesBatch(mem)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	rec.Release()
	require.NoError(t, w.Close(ctx))

	rows := e.query(t, "SELECT id, i8, i32, u32, f32, f64, b, s, TO_BASE64(bin), CAST(d AS STRING), UNIX_MICROS(ts) FROM "+e.table(p.Target)+" ORDER BY id")
	str := func(r []*string) []string {
		out := make([]string, len(r))
		for i, v := range r {
			if v == nil {
				out[i] = "NULL"
			} else {
				out[i] = *v
			}
		}
		return out
	}
	require.Len(t, rows, 3)
	require.Equal(t, []string{"-9223372036854775808", "-128", "-2147483648", "4294967295", "1.5", "1e+308", "true", "héllo 'q' \\ \n", "AAH/", "0001-01-01", "-1000000"}, str(rows[0]))
	require.Equal(t, []string{"1", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"}, str(rows[1]))
	require.Equal(t, []string{"9223372036854775807", "127", "7", "7", "-0.25", "-2.5", "false", "", "", "2024-10-04", "1700000000123000"}, str(rows[2]))
}

// TestIntegrationBigQueryErrors: a missing dataset is named; a key column
// the target lacks, and a batch the target cannot hold, are refused naming
// the column.
func TestIntegrationBigQueryErrors(t *testing.T) {
	e := needEmulator(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := t.Context()

	_, err := New(ctx, Config{Project: e.project, Dataset: "no_such_dataset", EmulatorEndpoint: e.endpoint, EmulatorGRPC: e.grpc, Key: []string{"id"}}, Retry(1, time.Millisecond))
	require.True(t, errors.Is(err, flightline.ErrNotFound), "%v", err)
	require.Contains(t, err.Error(), "no_such_dataset")

	p := flightsink.Pipeline{ID: "errs", Target: name("errs")}
	w, _, err := e.sink(t).Open(ctx, p)
	require.NoError(t, err)
	rec := kv(mem, []int64{1}, []string{"a"})
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(1)))
	rec.Release()

	_, _, err = e.sinkWith(t, Config{Key: []string{"nope"}}).Open(ctx, p)
	require.True(t, errors.Is(err, flightline.ErrSchemaMismatch), "%v", err)
	require.Contains(t, err.Error(), `"nope"`)

	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, other)
	b.Field(0).(*array.Int64Builder).Append(2)
	b.Field(1).(*array.Float64Builder).Append(1)
	bad := b.NewRecordBatch()
	b.Release()
	err = w.WriteBatch(ctx, bad, sinktest.CP(2))
	bad.Release()
	require.True(t, errors.Is(err, flightline.ErrSchemaMismatch), "%v", err)
	require.Contains(t, err.Error(), `"name"`)

	nullKey := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b = array.NewRecordBuilder(mem, nullKey)
	b.Field(0).(*array.Int64Builder).AppendNull()
	b.Field(1).(*array.StringBuilder).Append("x")
	bad = b.NewRecordBatch()
	b.Release()
	w2, _, err := e.sink(t).Open(ctx, flightsink.Pipeline{ID: "errs", Target: name("nullkey")})
	require.NoError(t, err)
	err = w2.WriteBatch(ctx, bad, sinktest.CP(3))
	bad.Release()
	require.True(t, errors.Is(err, flightline.ErrInvalidInput), "%v", err)
	require.Contains(t, err.Error(), `"id"`)
	require.NoError(t, w.Close(ctx))
	require.NoError(t, w2.Close(ctx))
	require.Equal(t, []int64{1}, e.ids(t, p.Target))
}

// TestIntegrationBigQueryNested: the Kafka source's shape — binary_view
// key and value, a list<struct<key, value>> of headers (REPEATED RECORD) —
// lands and merges; a replaced row's headers are replaced.
func TestIntegrationBigQueryNested(t *testing.T) {
	e := needEmulator(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := t.Context()
	hdr := arrow.StructOf(arrow.Field{Name: "key", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true})
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k", Type: arrow.BinaryTypes.BinaryView, Nullable: true},
		{Name: "v", Type: arrow.BinaryTypes.StringView, Nullable: true},
		{Name: "headers", Type: arrow.ListOfNonNullable(hdr)},
		{Name: "pt", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64}), Nullable: true},
	}, nil)
	build := func(ids []int64, hv string) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		lb := b.Field(3).(*array.ListBuilder)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		pb := b.Field(4).(*array.StructBuilder)
		for i, id := range ids {
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.BinaryViewBuilder).Append([]byte(fmt.Sprintf("key-%d-long-enough-for-a-buffer", id)))
			b.Field(2).(*array.StringViewBuilder).Append(fmt.Sprintf("v%d", id))
			lb.Append(true)
			for j := range i % 3 {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("h%d", j))
				if j == 1 {
					sb.FieldBuilder(1).(*array.BinaryBuilder).AppendNull()
				} else {
					sb.FieldBuilder(1).(*array.BinaryBuilder).Append([]byte(hv))
				}
			}
			if i%2 == 1 {
				pb.AppendNull()
			} else {
				pb.Append(true)
				pb.FieldBuilder(0).(*array.Float64Builder).Append(float64(id) / 2)
			}
		}
		return b.NewRecordBatch()
	}
	p := flightsink.Pipeline{ID: "nested", Target: name("nested")}
	w, _, err := e.sink(t).Open(ctx, p)
	require.NoError(t, err)
	rec := build([]int64{1, 2, 3}, "a")
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	rec.Release()
	rec = build([]int64{4, 5, 3}, "b")
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(6)))
	rec.Release()
	require.NoError(t, w.Close(ctx))
	// BigQuery stores an empty ARRAY as NULL-equivalent (the emulator
	// answers NULL for its length): IFNULL.
	rows := e.query(t, "SELECT id, TO_BASE64(k), v, IFNULL(ARRAY_LENGTH(headers), 0), "+
		"(SELECT STRING_AGG(h.key || '=' || IFNULL(TO_BASE64(h.value), 'NULL'), ',') FROM UNNEST(headers) h), pt.x FROM "+e.table(p.Target)+" ORDER BY id")
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	var got []string
	for _, r := range rows {
		var parts []string
		for _, v := range r {
			if v == nil {
				parts = append(parts, "NULL")
			} else {
				parts = append(parts, *v)
			}
		}
		got = append(got, fmt.Sprint(parts))
	}
	require.Equal(t, []string{
		"[1 " + b64("key-1-long-enough-for-a-buffer") + " v1 0 NULL 0.5]",
		"[2 " + b64("key-2-long-enough-for-a-buffer") + " v2 1 h0=" + b64("a") + " NULL]",
		"[3 " + b64("key-3-long-enough-for-a-buffer") + " v3 2 h0=" + b64("b") + ",h1=NULL 1.5]",
		"[4 " + b64("key-4-long-enough-for-a-buffer") + " v4 0 NULL 2]",
		"[5 " + b64("key-5-long-enough-for-a-buffer") + " v5 1 h0=" + b64("b") + " NULL]",
	}, got)
}
