package main

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightline/flightline/internal/testkit/adbctest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
	"github.com/stretchr/testify/require"
)

// From the command line: generator → adbc: sink on SQLite (file), then
// that table → adbc: source → adbc: sink on PostgreSQL. Every row lands
// once, checked with the sqlite3 shell and pgx.
func TestIntegrationAdbcCommandLine(t *testing.T) {
	sqliteDrv, pgDrv := adbctest.SQLiteDriver(t), adbctest.PostgresDriver(t)
	sqlite3 := adbctest.SQLite3(t)
	dsn := pgtest.DSN(t)
	path := filepath.Join(t.TempDir(), "cli.db")
	sqliteSink := adbcSpec(sqliteDrv, url.Values{"uri": {"file:" + path}, "table": {"gen"}})
	require.NoError(t, runPipeline(context.Background(), []string{"--source", "generator:?rows=2500&batch_rows=500",
		"--sink", sqliteSink, "--pipeline", "to-sqlite", "--log-level", "warn"}))
	out, err := exec.Command(sqlite3, path, "SELECT count(*), count(DISTINCT id) FROM gen").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "2500|2500", strings.TrimSpace(string(out)))

	table := pgtest.Name("cli")
	src := adbcSpec(sqliteDrv, url.Values{"uri": {"file:" + path}, "table": {"gen"}, "cursor": {"id"}, "tiebreak": {"id"},
		"poll": {"50ms"}, "batch_rows": {"300"}})
	pgSink := adbcSpec(pgDrv, url.Values{"uri": {dsn}, "table": {table}})
	c := pgtest.Conn(t)
	for range 2 { // the second run resumes from the sink's checkpoint and adds nothing
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		err := runPipeline(ctx, []string{"--source", src, "--stream", "gen", "--sink", pgSink, "--pipeline", table, "--log-level", "warn"})
		cancel()
		require.NoError(t, err)
		var n, distinct int64
		require.NoError(t, c.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT id) FROM `+table).Scan(&n, &distinct))
		require.EqualValues(t, 2500, n)
		require.EqualValues(t, 2500, distinct)
	}
}

// The same with the Flight SQL driver, against arrow-go's example SQLite
// Flight SQL server: generator → adbc:flightsql sink (prepared INSERT), then
// that table → adbc:flightsql source → adbc: SQLite sink.
func TestIntegrationAdbcCommandLineFlightSQL(t *testing.T) {
	sqliteDrv := adbctest.SQLiteDriver(t)
	sqlite3 := adbctest.SQLite3(t)
	uri, db := adbctest.FlightSQLServer(t)
	fsql := func(q url.Values) string {
		q.Set("uri", uri)
		q.Set("dialect", "sqlite")
		return adbcSpec("flightsql", q)
	}
	require.NoError(t, runPipeline(context.Background(), []string{"--source", "generator:?rows=1200&batch_rows=400",
		"--sink", fsql(url.Values{"table": {"gen"}}), "--pipeline", "to-flightsql", "--log-level", "warn"}))
	var n, distinct int64
	require.NoError(t, db.QueryRow(`SELECT count(*), count(DISTINCT id) FROM gen`).Scan(&n, &distinct))
	require.EqualValues(t, 1200, n)
	require.EqualValues(t, 1200, distinct)

	path := filepath.Join(t.TempDir(), "from-flightsql.db")
	src := fsql(url.Values{"table": {"gen"}, "cursor": {"id"}, "tiebreak": {"id"}, "poll": {"50ms"}, "batch_rows": {"250"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	err := runPipeline(ctx, []string{"--source", src, "--stream", "gen",
		"--sink", adbcSpec(sqliteDrv, url.Values{"uri": {"file:" + path}, "table": {"copy"}}), "--pipeline", "from-flightsql", "--log-level", "warn"})
	cancel()
	require.NoError(t, err)
	out, err := exec.Command(sqlite3, path, "SELECT count(*), count(DISTINCT id) FROM copy").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "1200|1200", strings.TrimSpace(string(out)))
}

func adbcSpec(drv string, q url.Values) string { return "adbc:" + drv + "?" + q.Encode() }
