package postgres_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/testkit/changetest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// The sink in upsert mode passes the conformance suite (its batches have
// no _op column: every row is an upsert by id).
func TestIntegrationConformanceUpsert(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	sinktest.Run(t, sinktest.Harness{
		NewSink: func(t *testing.T) flightsink.Sink {
			return newSink(t, postgres.Config{DSN: dsn, Mode: postgres.ModeUpsert, Key: []string{"id"}})
		},
		NewInstance: func(t *testing.T, name string) flightsink.Sink {
			return newSink(t, postgres.Config{DSN: dsn, Mode: postgres.ModeUpsert, Key: []string{"id"}, Instance: name})
		},
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return ids(t, c, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
	})
}

func contents(t *testing.T, c *pgx.Conn, table string) map[int64]string {
	rows, err := c.Query(context.Background(), "SELECT id, coalesce(v, '-') FROM "+pgx.Identifier{table}.Sanitize())
	require.NoError(t, err)
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var v string
		require.NoError(t, rows.Scan(&id, &v))
		out[id] = v
	}
	require.NoError(t, rows.Err())
	return out
}

// Upserts and deletes by key, the last change of a key in a batch winning
// (a key update is a delete then an update; a delete then a re-insert);
// the change columns are not written; a replayed batch changes nothing.
func TestIntegrationUpsertAppliesChanges(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := pgtest.Conn(t)
	table := pgtest.Name("upsert")
	t.Cleanup(func() { pgtest.Exec(t, c, "DROP TABLE IF EXISTS "+table) })
	s := newSink(t, postgres.Config{DSN: pgtest.DSN(t), Mode: postgres.ModeUpsert, Key: []string{"id"}, Table: table})
	ctx := context.Background()
	w, cp, err := s.Open(ctx, flightsink.Pipeline{ID: table})
	require.NoError(t, err)
	require.Nil(t, cp)
	write := func(cp string, rows ...string) error {
		rec := changetest.Batch(mem, rows...)
		defer rec.Release()
		return w.WriteBatch(ctx, rec, []byte(cp))
	}
	require.NoError(t, write(`{"lsn":"0/1"}`, "insert 1 a", "insert 2 b", "insert 3 c", "insert 4 d"))
	require.Equal(t, map[int64]string{1: "a", 2: "b", 3: "c", 4: "d"}, contents(t, c, table))
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, table).Scan(&n))
	require.Equal(t, 2, n, "only id and v are written")

	batch2 := []string{"update 1 a2", "delete 2 -", "update 20 b", "delete 3 -", "insert 3 c2", "insert 5 e", "delete 5 -", "update 4 d2", "update 4 d3"}
	require.NoError(t, write(`{"lsn":"0/2"}`, batch2...))
	want := map[int64]string{1: "a2", 20: "b", 3: "c2", 4: "d3"}
	require.Equal(t, want, contents(t, c, table))

	require.NoError(t, write(`{"lsn":"0/3"}`, "delete 1 -", "insert 2 back"))
	want = map[int64]string{20: "b", 3: "c2", 4: "d3", 2: "back"}
	require.Equal(t, want, contents(t, c, table))

	// A replay (what a restarted pipeline can resend: the batch of the
	// last committed checkpoint), with other values to show it is skipped.
	require.NoError(t, write(`{"lsn":"0/3"}`, "delete 20 -", "insert 7 x"))
	require.Equal(t, want, contents(t, c, table), "a replay changes nothing")

	// An existing table without a key on the key columns.
	other := pgtest.Name("upsertnokey")
	pgtest.Exec(t, c, "CREATE TABLE "+other+" (id bigint, v text)")
	t.Cleanup(func() { pgtest.Exec(t, c, "DROP TABLE IF EXISTS "+other) })
	w2, _, err := s.Open(ctx, flightsink.Pipeline{ID: other, Target: other})
	require.NoError(t, err)
	rec := changetest.Batch(mem, "insert 1 a")
	defer rec.Release()
	err = w2.WriteBatch(ctx, rec, []byte(`{"lsn":"0/1"}`))
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Contains(t, err.Error(), "unique index")
}

func TestUpsertOptions(t *testing.T) {
	_, err := postgres.New(context.Background(), postgres.Config{DSN: "postgres://h/db", Mode: postgres.ModeUpsert})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = postgres.New(context.Background(), postgres.Config{DSN: "postgres://h/db", Key: []string{"id"}})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = postgres.New(context.Background(), postgres.Config{DSN: "postgres://h/db", Mode: "merge"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}
