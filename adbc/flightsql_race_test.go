package adbc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/internal/testkit/adbctest"
)

// TestFlightSQLResultAbandoned: Flight SQL queries, bound or not, whose
// context ends at any moment (before, during or after the call, while the
// result is read) or whose result is released before its end, are free of
// data races, and the connection stays usable. It fails under -race
// without Conn.driverCtx: the driver's result reader reads the stream's
// header and trailer variables while gRPC, finishing the stream whose
// context ended, writes them from its own goroutine (docs/sinks/adbc.md).
func TestFlightSQLResultAbandoned(t *testing.T) {
	uri, db := adbctest.FlightSQLServer(t)
	_, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`)
	require.NoError(t, err)
	var vals []string
	for i := range 5000 {
		vals = append(vals, fmt.Sprintf("(%d, 'value %d')", i, i))
	}
	_, err = db.Exec(`INSERT INTO t VALUES ` + strings.Join(vals, ", "))
	require.NoError(t, err)

	d := adbctest.Open(t, adbc.Config{Driver: adbc.FlightSQL, URI: uri, Dialect: adbc.SQLite})
	c, err := d.Conn(context.Background())
	require.NoError(t, err)
	defer c.Close()
	for i := range 30 {
		ctx, cancel := context.WithCancel(context.Background())
		if i%3 == 1 {
			ctx, cancel = context.WithTimeout(context.Background(), time.Duration(i)*100*time.Microsecond)
		}
		q, args := `SELECT id, v FROM t ORDER BY id`, []any(nil)
		if i%2 == 1 { // bound: the parameters go on a DoPut stream first
			q, args = `SELECT id, v FROM t WHERE id >= ? ORDER BY id`, []any{int64(0)}
		}
		r, err := c.Query(ctx, q, args...)
		if err == nil {
			if i%3 == 0 {
				r.Next()
			}
			cancel()
			for i%3 != 2 && r.Next() {
			}
			r.Release()
		}
		cancel()
		var n int64
		found, err := c.QueryRow(context.Background(), `SELECT count(*) FROM t`, []any{&n})
		require.NoError(t, err)
		require.True(t, found)
		require.EqualValues(t, 5000, n)
	}
}
