//go:build cgo

package adbc_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/testkit/adbctest"
)

func sqlIDs(t *testing.T, db *sql.DB, table string) []int64 {
	t.Helper()
	rows, err := db.Query(`SELECT id FROM "` + table + `"`)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return nil
	}
	require.NoError(t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// The Go-native Flight SQL driver against arrow-go's example SQLite Flight
// SQL server: transactions, but no bulk ingest, so batches go in through a
// prepared INSERT bound to the batch. The server reports no vendor the
// probe knows ("db_name"), so the dialect is given: sqlite.
func TestIntegrationConformanceFlightSQL(t *testing.T) {
	uri, db := adbctest.FlightSQLServer(t)
	cfg := fadbc.Config{Driver: fadbc.FlightSQL, URI: uri, Dialect: fadbc.SQLite}
	caps := newSink(t, cfg).Caps()
	require.True(t, caps.Transactions, "%+v", caps)
	require.False(t, caps.BulkIngest, "%+v", caps)
	sinktest.Run(t, sinktest.Harness{
		NewSink:   func(t *testing.T) flightsink.Sink { return newSink(t, cfg) },
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return sqlIDs(t, db, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
	})
}

// Without a dialect, the server's vendor ("db_name") gets the generic one.
func TestIntegrationFlightSQLProbe(t *testing.T) {
	uri, _ := adbctest.FlightSQLServer(t)
	d, err := fadbc.Open(context.Background(), fadbc.Config{Driver: fadbc.FlightSQL, URI: uri})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, fadbc.Generic, d.Caps().Dialect, "%+v", d.Caps())
	require.True(t, d.Caps().Transactions)
	require.False(t, d.Caps().BulkIngest)
}
