//go:build cgo

package adbc_test

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/flightsink"
	adbcsink "github.com/flightline/flightline/flightsink/adbc"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/testkit/adbctest"
	"github.com/flightline/flightline/internal/testkit/changetest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

func upsertConfig(cfg fadbc.Config, table string) adbcsink.Config {
	return adbcsink.Config{Config: cfg, Table: table, Mode: adbcsink.ModeUpsert, Key: []string{"id"}}
}

// The sink in upsert mode passes the conformance suite (its batches have
// no _op column: every row is an upsert by id).
func TestIntegrationConformanceUpsertPostgres(t *testing.T) {
	cfg := adbctest.PostgresConfig(t)
	c := pgtest.Conn(t)
	sinktest.Run(t, sinktest.Harness{
		NewSink:   func(t *testing.T) flightsink.Sink { return newUpsertSink(t, upsertConfig(cfg, "")) },
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return pgIDs(t, c, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
	})
}

func TestIntegrationConformanceUpsertSQLite(t *testing.T) {
	cfg, path := adbctest.SQLiteConfig(t)
	sqlite3 := adbctest.SQLite3(t)
	sinktest.Run(t, sinktest.Harness{
		NewSink:   func(t *testing.T) flightsink.Sink { return newUpsertSink(t, upsertConfig(cfg, "")) },
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return SQLiteIDs(t, sqlite3, path, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
	})
}

func newUpsertSink(t *testing.T, cfg adbcsink.Config, opts ...adbcsink.Option) *adbcsink.Sink {
	t.Helper()
	s, err := adbcsink.New(context.Background(), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// upsertBackend reads a table back without ADBC.
type upsertBackend struct {
	cfg fadbc.Config
	// rows returns the table's "id v" rows sorted (v "-" for null), nil
	// when the table does not exist.
	rows func(t *testing.T, table string) []string
	// columns returns the table's column names sorted.
	columns func(t *testing.T, table string) []string
	// drop drops the table at the end of the test, where it outlives it.
	drop func(t *testing.T, table string)
}

func pgBackend(t *testing.T) upsertBackend {
	cfg := adbctest.PostgresConfig(t)
	c := pgtest.Conn(t)
	return upsertBackend{
		cfg: cfg,
		rows: func(t *testing.T, table string) []string {
			rows, err := c.Query(context.Background(), "SELECT id::text || ' ' || coalesce(v, '-') FROM "+pgx.Identifier{table}.Sanitize()+" ORDER BY 1")
			require.NoError(t, err)
			out, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			return out
		},
		columns: func(t *testing.T, table string) []string {
			rows, err := c.Query(context.Background(), "SELECT attname::text FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY 1",
				pgx.Identifier{table}.Sanitize())
			require.NoError(t, err)
			out, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			return out
		},
		drop: func(t *testing.T, table string) {
			t.Cleanup(func() { pgtest.Exec(t, c, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()) })
		},
	}
}

func sqliteBackend(t *testing.T) upsertBackend {
	cfg, path := adbctest.SQLiteConfig(t)
	sqlite3 := adbctest.SQLite3(t)
	q := func(t *testing.T, sql string) []string {
		out, err := exec.Command(sqlite3, path, sql).CombinedOutput()
		require.NoError(t, err, "%s", out)
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
		sort.Strings(lines)
		return lines
	}
	return upsertBackend{
		cfg: cfg,
		rows: func(t *testing.T, table string) []string {
			return q(t, `SELECT id || ' ' || coalesce(v, '-') FROM "`+table+`"`)
		},
		columns: func(t *testing.T, table string) []string {
			return q(t, `SELECT name FROM pragma_table_info('`+table+`')`)
		},
		drop: func(*testing.T, string) {}, // the file goes with the test's directory
	}
}

// flightSQLBackend is arrow-go's example SQLite Flight SQL server: no
// bulk ingest, so the stage is created with CREATE TEMPORARY TABLE and
// filled by a prepared INSERT.
func flightSQLBackend(t *testing.T) upsertBackend {
	uri, db := adbctest.FlightSQLServer(t)
	q := func(t *testing.T, query string) []string {
		rows, err := db.Query(query)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, rows.Err())
		sort.Strings(out)
		return out
	}
	return upsertBackend{
		cfg: fadbc.Config{Driver: fadbc.FlightSQL, URI: uri, Dialect: fadbc.SQLite},
		rows: func(t *testing.T, table string) []string {
			return q(t, `SELECT id || ' ' || coalesce(v, '-') FROM "`+table+`"`)
		},
		columns: func(t *testing.T, table string) []string {
			return q(t, `SELECT name FROM pragma_table_info('`+table+`')`)
		},
		drop: func(*testing.T, string) {},
	}
}

// Upserts and deletes by key through the stage, on PostgreSQL (the ADBC
// PostgreSQL driver), SQLite (its C driver) and a Flight SQL server (no
// bulk ingest), read back with pgx, the sqlite3 shell and database/sql.
func TestIntegrationUpsertAppliesChanges(t *testing.T) {
	for name, backend := range map[string]func(*testing.T) upsertBackend{"postgres": pgBackend, "sqlite": sqliteBackend, "flightsql": flightSQLBackend} {
		t.Run(name, func(t *testing.T) { testUpsertAppliesChanges(t, backend(t)) })
	}
}

func testUpsertAppliesChanges(t *testing.T, b upsertBackend) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := pgtest.Name("adbcupsert")
	b.drop(t, table)
	s := newUpsertSink(t, upsertConfig(b.cfg, table), adbcsink.Allocator(mem))
	ctx := context.Background()
	w, cp, err := s.Open(ctx, flightsink.Pipeline{ID: table})
	require.NoError(t, err)
	require.Nil(t, cp)
	defer w.Close(ctx)
	write := func(cp string, rows ...string) error {
		rec := changetest.Batch(mem, rows...)
		defer rec.Release()
		return w.WriteBatch(ctx, rec, []byte(cp))
	}
	checkpoint := func() string {
		cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: table})
		require.NoError(t, err)
		return string(cp)
	}

	// The first batch creates the table from the data columns only.
	require.NoError(t, write(`{"lsn":"0/1"}`, "insert 1 a", "insert 2 b", "insert 3 c", "insert 4 d", "- 6 f"))
	require.Equal(t, []string{"1 a", "2 b", "3 c", "4 d", "6 f"}, b.rows(t, table))
	require.Equal(t, []string{"id", "v"}, b.columns(t, table), "the change columns are not written")

	// An update; a delete; a key update (2 → 20: a delete of the old key,
	// an update of the new); a delete then a re-insert of one key; an
	// insert then a delete; two updates of one key.
	require.NoError(t, write(`{"lsn":"0/2"}`, "update 1 a2", "delete 2 -", "update 20 b", "delete 3 -", "insert 3 c2",
		"insert 5 e", "delete 5 -", "update 4 d2", "update 4 d3", "update 6 -"))
	want := []string{"1 a2", "20 b", "3 c2", "4 d3", "6 -"}
	require.Equal(t, want, b.rows(t, table))

	// A delete, then the re-insert of a key deleted in an earlier batch.
	require.NoError(t, write(`{"lsn":"0/3"}`, "delete 1 -", "insert 2 back"))
	want = []string{"2 back", "20 b", "3 c2", "4 d3", "6 -"}
	require.Equal(t, want, b.rows(t, table))
	require.Equal(t, `{"lsn":"0/3"}`, checkpoint())

	// A replay (a restarted pipeline resends the batch of the last
	// committed checkpoint), with other changes to show it is skipped.
	require.NoError(t, write(`{"lsn":"0/3"}`, "delete 20 -", "insert 7 x"))
	require.Equal(t, want, b.rows(t, table), "a replay changes nothing")

	// Refused before anything is written: a null key, an _op that is
	// none of the three, a batch without the key column.
	err = write(`{"lsn":"0/4"}`, "delete 2 -", "insert null x")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Contains(t, err.Error(), `key column "id" is null`)
	err = write(`{"lsn":"0/4"}`, "delete 2 -", "upsert 8 x")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Contains(t, err.Error(), `"upsert"`)
	vb := array.NewStringBuilder(mem)
	vb.Append("x")
	v := vb.NewArray()
	vb.Release()
	noKey := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{v}, 1)
	v.Release()
	err = w.WriteBatch(ctx, noKey, []byte(`{"lsn":"0/4"}`))
	noKey.Release()
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Equal(t, want, b.rows(t, table), "nothing of a refused batch is committed")
	require.Equal(t, `{"lsn":"0/3"}`, checkpoint())

	// The writer goes on after the refusals.
	require.NoError(t, write(`{"lsn":"0/4"}`, "delete 6 -", "update 3 c3"))
	require.Equal(t, []string{"2 back", "20 b", "3 c3", "4 d3"}, b.rows(t, table))
	require.Equal(t, `{"lsn":"0/4"}`, checkpoint())
}

// A composite key, on an existing schema-qualified table without any
// unique constraint.
func TestIntegrationUpsertCompositeKey(t *testing.T) {
	b := pgBackend(t)
	c := pgtest.Conn(t)
	table := pgtest.Name("adbcupsertkey")
	pgtest.Exec(t, c, "CREATE TABLE "+table+" (id bigint NOT NULL, v text NOT NULL, n bigint)")
	t.Cleanup(func() { pgtest.Exec(t, c, "DROP TABLE IF EXISTS "+table) })
	pgtest.Exec(t, c, "INSERT INTO "+table+" VALUES (1, 'a', 10), (1, 'b', 11), (2, 'a', 12)")
	// Named with its schema: the DELETE's subquery names it by its table
	// name alone.
	s := newUpsertSink(t, adbcsink.Config{Config: b.cfg, Table: "public." + table, Mode: adbcsink.ModeUpsert, Key: []string{"id", "v"}})
	ctx := context.Background()
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: table})
	require.NoError(t, err)
	defer w.Close(ctx)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "_op", Type: arrow.BinaryTypes.String},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer rb.Release()
	for _, r := range []struct {
		id int64
		v  string
		n  int64
		op string
	}{{1, "a", 0, "delete"}, {1, "b", 21, "update"}, {2, "b", 22, "insert"}} {
		rb.Field(0).(*array.Int64Builder).Append(r.id)
		rb.Field(1).(*array.StringBuilder).Append(r.v)
		rb.Field(2).(*array.Int64Builder).Append(r.n)
		rb.Field(3).(*array.StringBuilder).Append(r.op)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, []byte("1")))
	rows, err := c.Query(ctx, "SELECT format('%s %s %s', id, v, n) FROM "+table+" ORDER BY 1")
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"1 b 21", "2 a 12", "2 b 22"}, got)
}

func TestUpsertConfig(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []adbcsink.Config{
		{Mode: adbcsink.ModeUpsert},                              // no key
		{Key: []string{"id"}},                                    // key without upsert
		{Mode: "merge", Key: []string{"id"}},                     // unknown mode
		{Mode: adbcsink.ModeUpsert, Key: []string{""}},           // empty key column
		{Mode: adbcsink.ModeUpsert, Key: []string{"_op"}},        // a change column
		{Mode: adbcsink.ModeUpsert, Key: []string{"id", "_lsn"}}, // a change column
	} {
		cfg.Config = fadbc.Config{Driver: fadbc.FlightSQL, URI: "grpc://127.0.0.1:1"}
		_, err := adbcsink.New(ctx, cfg)
		require.ErrorIs(t, err, flightline.ErrInvalidInput, fmt.Sprintf("%+v", cfg))
	}
}
