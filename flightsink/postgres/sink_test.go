package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

func newSink(t *testing.T, cfg postgres.Config, opts ...postgres.Option) *postgres.Sink {
	t.Helper()
	s, err := postgres.New(context.Background(), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// ids reads the id column of a table with plain SQL, independently of the
// sink. A missing table has no ids.
func ids(t *testing.T, c *pgx.Conn, table string) []int64 {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT id FROM "+pgx.Identifier{table}.Sanitize())
	if err != nil && strings.Contains(err.Error(), "42P01") {
		return nil
	}
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil && strings.Contains(err.Error(), "42P01") {
		return nil
	}
	require.NoError(t, err)
	return out
}

func TestIntegrationConformance(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	sinktest.Run(t, sinktest.Harness{
		NewSink: func(t *testing.T) flightsink.Sink { return newSink(t, postgres.Config{DSN: dsn}) },
		NewInstance: func(t *testing.T, name string) flightsink.Sink {
			return newSink(t, postgres.Config{DSN: dsn, Instance: name})
		},
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return ids(t, c, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
	})
}

func TestIntegrationZombieWritesNothing(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := pgtest.Name("zombie")
	p := flightsink.Pipeline{ID: table, Target: table}

	old, _, err := newSink(t, postgres.Config{DSN: dsn}).Open(ctx, p)
	require.NoError(t, err)
	newer, _, err := newSink(t, postgres.Config{DSN: dsn}).Open(ctx, p)
	require.NoError(t, err)

	rec := sinktest.Batch(mem, 0, 5)
	defer rec.Release()
	err = old.WriteBatch(ctx, rec, sinktest.CP(5))
	require.ErrorIs(t, err, flightline.ErrFenced)
	require.Equal(t, codes.FailedPrecondition, status.Code(flighterr.ToStatus(err)), "at the Flight boundary")
	require.Empty(t, ids(t, c, table), "the zombie wrote rows")
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM __flightline_checkpoints WHERE pipeline_id = $1 AND checkpoint IS NOT NULL`, p.ID).Scan(&n))
	require.Zero(t, n, "the zombie moved the checkpoint")

	require.NoError(t, newer.WriteBatch(ctx, rec, sinktest.CP(5)))
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4}, ids(t, c, table))
	// Fencing is permanent: the zombie keeps failing.
	require.ErrorIs(t, old.WriteBatch(ctx, rec, sinktest.CP(10)), flightline.ErrFenced)
}

// A zombie racing the new writer: whichever order the transactions reach
// the checkpoint row in, no batch of the zombie commits after Open returned.
func TestIntegrationZombieConcurrent(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := pgtest.Name("zombie_race")
	p := flightsink.Pipeline{ID: table, Target: table}
	old, _, err := newSink(t, postgres.Config{DSN: dsn}).Open(ctx, p)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		var err error
		for i := int64(0); err == nil; i += 10 {
			rec := sinktest.Batch(mem, i, i+10)
			err = old.WriteBatch(ctx, rec, sinktest.CP(i+10))
			rec.Release()
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_, cp, err := newSink(t, postgres.Config{DSN: dsn}).Open(ctx, p)
	require.NoError(t, err)
	require.ErrorIs(t, <-done, flightline.ErrFenced)
	// Everything committed is covered by the checkpoint Open returned.
	var next int64
	_, err = fmt.Sscanf(string(cp), `{"positions":{"sinktest/0":%d}}`, &next)
	require.NoError(t, err)
	got := ids(t, c, table)
	require.Len(t, got, int(next))
}

func TestIntegrationUnsupportedTypeWritesNothing(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := pgtest.Name("unsupported")
	p := flightsink.Pipeline{ID: table, Target: table}
	w, _, err := newSink(t, postgres.Config{DSN: dsn}).Open(ctx, p)
	require.NoError(t, err)

	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "d", Type: arrow.FixedWidthTypes.Duration_s},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).(*array.DurationBuilder).Append(5)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	err = w.WriteBatch(ctx, rec, sinktest.CP(1))
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Equal(t, codes.InvalidArgument, status.Code(flighterr.ToStatus(err)), "at the Flight boundary")
	require.Contains(t, err.Error(), `"d"`)
	require.Empty(t, ids(t, c, table))
	var exists bool
	require.NoError(t, c.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists))
	require.False(t, exists, "no table may be created for a refused batch")
	cp, err := newSink(t, postgres.Config{DSN: dsn}).Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
}

func TestIntegrationSchemaMismatchNamesColumnAndTypes(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := pgtest.Name("mismatch")
	pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint NOT NULL, name integer)`)
	w, _, err := newSink(t, postgres.Config{DSN: dsn}).Open(ctx, flightsink.Pipeline{ID: table, Target: table})
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 3)
	defer rec.Release()
	err = w.WriteBatch(ctx, rec, sinktest.CP(3))
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Contains(t, err.Error(), `"name"`)
	require.Contains(t, err.Error(), "integer")
	require.Contains(t, err.Error(), "utf8")
	require.Empty(t, ids(t, c, table))

	// Missing column and NOT NULL violations are mismatches too.
	other := pgtest.Name("mismatch")
	pgtest.Exec(t, c, `CREATE TABLE `+other+` (id bigint NOT NULL, name text NOT NULL)`)
	w, _, err = newSink(t, postgres.Config{DSN: dsn}).Open(ctx, flightsink.Pipeline{ID: other, Target: other})
	require.NoError(t, err)
	err = w.WriteBatch(ctx, rec, sinktest.CP(3)) // row 3 has a null name? ids 0..2: none
	require.NoError(t, err)
	rec2 := sinktest.Batch(mem, 3, 5) // id 3 has a null name
	defer rec2.Release()
	err = w.WriteBatch(ctx, rec2, sinktest.CP(5))
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Contains(t, err.Error(), `"name"`)
	require.Len(t, ids(t, c, other), 3)
}

func TestIntegrationQualifiedAndQuotedNames(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	schema := "Sch " + pgtest.Name("q")
	pgtest.Exec(t, c, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	target := `"` + schema + `"."Odd ""Tab"".le; DROP TABLE x"`
	s := newSink(t, postgres.Config{DSN: dsn, Table: target, CheckpointTable: `"` + schema + `".cps`})
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 4)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(4)))
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, `Odd "Tab".le; DROP TABLE x`}.Sanitize()).Scan(&n))
	require.Equal(t, 4, n)
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(4), cp)
}

func TestIntegrationBadCredentials(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	ctx := context.Background()
	role := pgtest.Name("norights")
	const password = "Sup3r-S3cret-pw"
	pgtest.Exec(t, c, `CREATE ROLE `+role+` LOGIN PASSWORD '`+password+`'`)
	pgtest.Exec(t, c, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
	t.Cleanup(func() { pgtest.Exec(t, c, `GRANT CREATE ON SCHEMA public TO PUBLIC`) })

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	withUser := func(user, pw string) string {
		v := *u
		v.User = url.UserPassword(user, pw)
		return v.String()
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := flightsink.Pipeline{ID: "bad", Target: "bad_target"}

	t.Run("WrongPassword", func(t *testing.T) {
		wrong := "wrong-" + password
		s := newSink(t, postgres.Config{DSN: withUser(role, wrong)}, postgres.Logger(log))
		_, _, err := s.Open(ctx, p)
		require.ErrorIs(t, err, flightline.ErrUnauthenticated)
		require.Equal(t, codes.Unauthenticated, status.Code(flighterr.ToStatus(err)))
		require.NotContains(t, status.Convert(flighterr.ToStatus(err)).Message(), wrong)
		require.NotContains(t, err.Error(), wrong)
		require.Contains(t, err.Error(), role)
		_, err = s.Checkpoint(ctx, p)
		require.ErrorIs(t, err, flightline.ErrUnauthenticated)
		require.NotContains(t, err.Error(), wrong)
	})
	t.Run("Unreachable", func(t *testing.T) {
		v := *u
		v.Host = "127.0.0.1:1"
		v.User = url.UserPassword(role, password)
		s := newSink(t, postgres.Config{DSN: v.String()}, postgres.Logger(log))
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, _, err := s.Open(cctx, p)
		require.ErrorIs(t, err, flightline.ErrUnavailable)
		require.NotContains(t, err.Error(), password)
		require.True(t, flightline.IsRetryable(err))
	})
	t.Run("MalformedDSN", func(t *testing.T) {
		for _, dsn := range []string{
			"postgres://u:" + password + "@host:notaport/db",
			"host=h port=notaport password=" + password,
			"postgres://u:" + password + "@host/db?sslmode=bogus",
		} {
			_, err := postgres.New(context.Background(), postgres.Config{DSN: dsn})
			require.ErrorIs(t, err, flightline.ErrInvalidInput)
			require.NotContains(t, err.Error(), password)
			require.Contains(t, err.Error(), "invalid DSN")
		}
	})
	t.Run("MissingPermission", func(t *testing.T) {
		// The role may log in but not create the checkpoint table.
		s := newSink(t, postgres.Config{DSN: withUser(role, password)}, postgres.Logger(log))
		_, _, err := s.Open(ctx, p)
		require.ErrorIs(t, err, flightline.ErrPermissionDenied)
		require.Contains(t, err.Error(), "permission denied")
		require.NotContains(t, err.Error(), password)

		// With a checkpoint table it can use but a target it cannot write.
		cps := pgtest.Name("cps")
		tgt := pgtest.Name("ro")
		pgtest.Exec(t, c, `CREATE TABLE `+tgt+` (id bigint NOT NULL, name text)`)
		pgtest.Exec(t, c, `CREATE TABLE `+cps+` (pipeline_id text NOT NULL, target text NOT NULL DEFAULT '', instance text NOT NULL DEFAULT '', checkpoint bytea, epoch bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (pipeline_id, target, instance))`)
		pgtest.Exec(t, c, `GRANT SELECT, INSERT, UPDATE ON `+cps+` TO `+role)
		pgtest.Exec(t, c, `GRANT SELECT ON `+tgt+` TO `+role)
		s = newSink(t, postgres.Config{DSN: withUser(role, password), CheckpointTable: cps}, postgres.Logger(log))
		w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "ro", Target: tgt})
		require.NoError(t, err)
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		rec := sinktest.Batch(mem, 0, 3)
		defer rec.Release()
		err = w.WriteBatch(ctx, rec, sinktest.CP(3))
		require.ErrorIs(t, err, flightline.ErrPermissionDenied)
		require.Empty(t, ids(t, c, tgt))
	})
	t.Run("MigrationNeedsOwner", func(t *testing.T) {
		// A checkpoint table from before instances, which the role may use
		// but not alter: Open says who must migrate it, and changes nothing.
		cps := pgtest.Name("precps")
		pgtest.Exec(t, c, `CREATE TABLE `+cps+` (pipeline_id text NOT NULL, target text NOT NULL DEFAULT '', checkpoint bytea, epoch bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (pipeline_id, target))`)
		pgtest.Exec(t, c, `GRANT SELECT, INSERT, UPDATE ON `+cps+` TO `+role)
		pgtest.Exec(t, c, `INSERT INTO `+cps+` (pipeline_id, checkpoint, epoch) VALUES ('pre', 'x', 2)`)
		s := newSink(t, postgres.Config{DSN: withUser(role, password), CheckpointTable: cps, Table: pgtest.Name("pre")}, postgres.Logger(log))
		_, _, err := s.Open(ctx, flightsink.Pipeline{ID: "pre"})
		require.ErrorIs(t, err, flightline.ErrPermissionDenied)
		require.Contains(t, err.Error(), "run as its owner once")
		cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: "pre"})
		require.NoError(t, err, "an unmigrated table is read as it is")
		require.Equal(t, "x", string(cp))
		var epoch int64
		require.NoError(t, c.QueryRow(ctx, `SELECT epoch FROM `+cps+` WHERE pipeline_id = 'pre'`).Scan(&epoch))
		require.Equal(t, int64(2), epoch)
	})
	require.NotContains(t, logs.String(), password)
}

// Several pipelines writing one new table at once: table creation races,
// losers get a retryable error, and every row lands exactly once.
func TestIntegrationConcurrentPipelinesOneTable(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := pgtest.Name("shared")
	s := newSink(t, postgres.Config{DSN: dsn})
	const pipes = 4
	errs := make(chan error, pipes)
	for i := range pipes {
		go func() {
			w, _, err := s.Open(ctx, flightsink.Pipeline{ID: fmt.Sprintf("%s_%d", table, i), Target: table})
			if err != nil {
				errs <- err
				return
			}
			rec := sinktest.Batch(mem, int64(i*100), int64(i*100+100))
			defer rec.Release()
			for {
				err = w.WriteBatch(ctx, rec, sinktest.CP(1))
				if err == nil || !flightline.IsRetryable(err) {
					break
				}
			}
			errs <- err
		}()
	}
	for range pipes {
		require.NoError(t, <-errs)
	}
	got := ids(t, c, table)
	require.Len(t, got, pipes*100)
}

// TestIntegrationCancelledCopyDoesNotReadReleasedBatch cancels WriteBatch
// while COPY streams a large batch and releases the batch the moment
// WriteBatch returns, as the Flight server does when its client is killed.
// pgconn's CopyFrom returns on cancellation without waiting for the
// goroutine that reads the COPY stream; before the sink closed that stream
// first, the goroutine went on encoding the released batch and the process
// died with a nil dereference (issue 12, bug 2).
func TestIntegrationCancelledCopyDoesNotReadReleasedBatch(t *testing.T) {
	dsn := pgtest.DSN(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := pgtest.Name("cancelcopy")
	s := newSink(t, postgres.Config{DSN: dsn})
	for i := range 8 {
		p := flightsink.Pipeline{ID: fmt.Sprintf("%s_%d", table, i), Target: table}
		w, _, err := s.Open(context.Background(), p)
		require.NoError(t, err)
		rec := sinktest.Batch(mem, 0, 200_000)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(3+i*5)*time.Millisecond)
		err = w.WriteBatch(ctx, rec, sinktest.CP(200_000))
		rec.Release() // nothing may read it any more
		cancel()
		require.NoError(t, w.Close(context.Background()))
		t.Logf("attempt %d: %v", i, err)
	}
	time.Sleep(200 * time.Millisecond) // let a stray reader goroutine, if any, run into the released batch
}

// TestIntegrationOldCheckpointTableMigrated: a checkpoint table from before
// checkpoints were kept per (pipeline, target) keeps its checkpoints: they
// become the default target's, readable before and after Open migrates it.
func TestIntegrationOldCheckpointTableMigrated(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	ctx := context.Background()
	cps := pgtest.Name("oldcps")
	tbl := pgtest.Name("migrated")
	pgtest.Exec(t, c, `CREATE TABLE `+cps+` (pipeline_id text PRIMARY KEY, checkpoint bytea, epoch bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now())`)
	_, err := c.Exec(ctx, `INSERT INTO `+cps+` (pipeline_id, checkpoint, epoch) VALUES ('old', $1, 3)`, sinktest.CP(7))
	require.NoError(t, err)
	s := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl})
	p := flightsink.Pipeline{ID: "old"}
	cp, err := s.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(7)), string(cp), "read before the migration")
	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(7)), string(cp), "read after the migration")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := sinktest.Batch(mem, 7, 9)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(9)))
	require.NoError(t, w.Close(ctx))
	cp, err = s.Checkpoint(ctx, flightsink.Pipeline{ID: "old"})
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(9)), string(cp))
}

// TestIntegrationDefaultTableNamedIsOneKey: a pipeline written with an empty
// target (the sink's default table) and read with that table's name is one
// checkpoint, not two.
func TestIntegrationDefaultTableNamedIsOneKey(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	tbl := pgtest.Name("deftable")
	s := newSink(t, postgres.Config{DSN: dsn, Table: tbl})
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "def"})
	require.NoError(t, err)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := sinktest.Batch(mem, 0, 3)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	require.NoError(t, w.Close(ctx))
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: "def", Target: tbl})
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(3)), string(cp))
}
