package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgres"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// newSource reads cfg (its DSN is set here) with mem.
func newSource(t *testing.T, mem memory.Allocator, cfg postgres.Config) *postgres.Source {
	t.Helper()
	cfg.DSN = pgtest.DSN(t)
	s, err := postgres.New(context.Background(), cfg, postgres.Allocator(mem))
	require.NoError(t, err)
	return s
}

// next reads one batch and returns its ids (column "id") and checkpoint.
func next(t *testing.T, r flightsrc.Reader) ([]int64, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec, cp, err := r.Next(ctx)
	require.NoError(t, err)
	defer rec.Release()
	require.NotEmpty(t, cp)
	col := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
	return append([]int64(nil), col.Int64Values()...), cp
}

func TestIntegrationSourceSnapshotPollResume(t *testing.T) {
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := pgtest.Name("events")
	pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, ts timestamptz NOT NULL, v text)`)
	// Three rows per timestamp, and ids not in timestamp order inside a
	// tie, so the key really breaks ties.
	insert := func(from, to int) {
		pgtest.Exec(t, c, `INSERT INTO `+table+` SELECT i, timestamptz '2026-01-01' + (i/3) * interval '1 second', 'v' || i
			FROM generate_series($1::int, $2::int - 1) i ORDER BY random()`, from, to)
	}
	insert(0, 25)
	s := newSource(t, mem, postgres.Config{Tables: []postgres.Table{{Name: table, Watermark: "ts", Key: "id"}}, BatchRows: 10, PollInterval: 50 * time.Millisecond})

	streams, err := s.Streams(context.Background())
	require.NoError(t, err)
	require.Len(t, streams, 1)
	require.Equal(t, table, streams[0].Name)
	require.Equal(t, "id", streams[0].Schema.Field(0).Name)
	require.Equal(t, arrow.INT64, streams[0].Schema.Field(0).Type.ID())
	require.False(t, streams[0].Schema.Field(0).Nullable)

	r, err := s.Read(context.Background(), flightsrc.ReadRequest{Stream: table})
	require.NoError(t, err)
	var got []int64
	ids, cp1 := next(t, r)
	require.Len(t, ids, 10)
	got = append(got, ids...)
	ids, _ = next(t, r)
	got = append(got, ids...)
	ids, cp3 := next(t, r)
	require.Len(t, ids, 5)
	got = append(got, ids...)
	require.Equal(t, seq(0, 25), got, "snapshot in (ts, id) order")

	// Idle: a heartbeat with the unchanged checkpoint.
	ids, hb := next(t, r)
	require.Empty(t, ids)
	require.Equal(t, string(cp3), string(hb))

	// Polling picks up new rows.
	insert(25, 32)
	var more []int64
	for len(more) < 7 {
		ids, _ := next(t, r)
		more = append(more, ids...)
	}
	require.Equal(t, seq(25, 32), more)
	require.NoError(t, r.Close())

	// Resume after the first batch: its checkpoint lies inside a tie group
	// (rows 9, 10, 11 share a timestamp); nothing lost, nothing repeated.
	cp, err := postgres.ParseCheckpoint(cp1)
	require.NoError(t, err)
	require.Equal(t, "9", *cp.Key)
	r, err = s.Read(context.Background(), flightsrc.ReadRequest{Stream: table, After: cp1})
	require.NoError(t, err)
	defer r.Close()
	got = nil
	for len(got) < 22 {
		ids, _ := next(t, r)
		got = append(got, ids...)
	}
	require.Equal(t, seq(10, 32), got)
}

func TestIntegrationSourceEmptyAndClose(t *testing.T) {
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := pgtest.Name("empty")
	pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint, k text)`)
	s := newSource(t, mem, postgres.Config{Tables: []postgres.Table{{Name: table, Watermark: "id", Key: "k"}}, PollInterval: time.Hour})
	r, err := s.Read(context.Background(), flightsrc.ReadRequest{Stream: table})
	require.NoError(t, err)
	ids, cp := next(t, r)
	require.Empty(t, ids)
	require.JSONEq(t, `{"watermark":null,"key":null}`, string(cp))

	// The next poll is an hour away: Close must interrupt it.
	done := make(chan error, 1)
	go func() {
		rec, _, err := r.Next(context.Background())
		if rec != nil {
			rec.Release()
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, r.Close())
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not interrupt Next")
	}
}

func TestIntegrationSourceBadInput(t *testing.T) {
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := pgtest.Name("bad")
	pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint, k text)`)

	s := newSource(t, mem, postgres.Config{Tables: []postgres.Table{{Name: table, Watermark: "nope", Key: "k"}, {Name: "missing_table_x", Watermark: "id", Key: "k"}}})
	_, err := s.Read(ctx, flightsrc.ReadRequest{Stream: table})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = s.Read(ctx, flightsrc.ReadRequest{Stream: "missing_table_x"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	_, err = s.Read(ctx, flightsrc.ReadRequest{Stream: "unknown"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	_, err = s.Read(ctx, flightsrc.ReadRequest{Stream: table, After: []byte(`{"positions":{}}`)})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = postgres.New(context.Background(), postgres.Config{DSN: pgtest.DSN(t)})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "a source needs a table")
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
