//go:build cgo

package adbc_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/flightsink"
	adbcsink "github.com/flightline/flightline/flightsink/adbc"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/testkit/adbctest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

func newSink(t *testing.T, cfg fadbc.Config, opts ...adbcsink.Option) *adbcsink.Sink {
	t.Helper()
	s, err := adbcsink.New(context.Background(), adbcsink.Config{Config: cfg}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pgIDs reads the ids with pgx, not through ADBC.
func pgIDs(t *testing.T, c *pgx.Conn, table string) []int64 {
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

// SQLiteIDs reads the ids with the sqlite3 shell, not through ADBC.
func SQLiteIDs(t testing.TB, sqlite3, path, table string) []int64 {
	t.Helper()
	out, err := exec.Command(sqlite3, path, `SELECT id FROM "`+table+`"`).CombinedOutput()
	if err != nil && strings.Contains(string(out), "no such table") {
		return nil
	}
	require.NoError(t, err, "%s", out)
	var ids []int64
	for _, l := range strings.Fields(string(out)) {
		n, err := strconv.ParseInt(l, 10, 64)
		require.NoError(t, err)
		ids = append(ids, n)
	}
	return ids
}

func TestIntegrationConformancePostgres(t *testing.T) {
	cfg := adbctest.PostgresConfig(t)
	c := pgtest.Conn(t)
	sinktest.Run(t, sinktest.Harness{
		NewSink:   func(t *testing.T) flightsink.Sink { return newSink(t, cfg) },
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return pgIDs(t, c, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
	})
}

func TestIntegrationConformanceSQLite(t *testing.T) {
	cfg, path := adbctest.SQLiteConfig(t)
	sqlite3 := adbctest.SQLite3(t)
	sinktest.Run(t, sinktest.Harness{
		NewSink:   func(t *testing.T) flightsink.Sink { return newSink(t, cfg) },
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return SQLiteIDs(t, sqlite3, path, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
	})
}
