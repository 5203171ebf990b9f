package adbctest

import (
	"database/sql"
	"net"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/example"
	"github.com/stretchr/testify/require"
)

// FlightSQLServer starts arrow-go's example SQLite Flight SQL server on a
// SQLite file and returns its grpc:// URI and the database, for reading
// back without Flight SQL.
func FlightSQLServer(t testing.TB) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flightsql.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	srv, err := example.NewSQLiteFlightSQLServer(db)
	require.NoError(t, err)
	s := flight.NewServerWithMiddleware(nil)
	s.RegisterFlightService(flightsql.NewFlightServer(srv))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.InitListener(lis)
	go func() { _ = s.Serve() }()
	t.Cleanup(s.Shutdown)
	return "grpc://" + lis.Addr().String(), db
}
