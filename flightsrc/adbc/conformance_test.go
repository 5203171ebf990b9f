//go:build cgo

package adbc_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/flightsrc"
	adbcsrc "github.com/flightline/flightline/flightsrc/adbc"
	"github.com/flightline/flightline/flightsrc/srctest"
	"github.com/flightline/flightline/internal/testkit/adbctest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

func records(t *testing.T, _ string, rec arrow.RecordBatch) []srctest.Record {
	col := rec.Column(0).(*array.Int64)
	out := make([]srctest.Record, rec.NumRows())
	for i := range out {
		out[i].ID = col.Value(i)
	}
	return out
}

func newSource(t *testing.T, cfg fadbc.Config, mem memory.Allocator, table string) flightsrc.Source {
	s, err := adbcsrc.New(context.Background(), adbcsrc.Config{Config: cfg, Tables: []adbcsrc.Table{{Name: table, Cursor: "wm", Tiebreak: "id"}},
		BatchRows: 7, PollInterval: 20 * time.Millisecond}, adbcsrc.Allocator(mem))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The ADBC source through the PostgreSQL driver: a watermark with ties
// (three rows share each value, inserted in random order), the id as the
// tiebreak, pages of 7 rows.
func TestIntegrationSourceConformancePostgres(t *testing.T) {
	cfg := adbctest.PostgresConfig(t)
	c := pgtest.Conn(t)
	srctest.Run(t, srctest.Harness{
		NewStream: func(t *testing.T) string {
			table := pgtest.Name("adbcsrc")
			pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, wm bigint NOT NULL, v text)`)
			t.Cleanup(func() { pgtest.Exec(t, c, `DROP TABLE `+table) })
			return table
		},
		Append: func(t *testing.T, table string, from, to int64) {
			pgtest.Exec(t, c, `INSERT INTO `+table+` SELECT i, i / 3, 'v' || i
				FROM generate_series($1::bigint, $2::bigint - 1) i ORDER BY random()`, from, to)
		},
		NewSource: func(t *testing.T, mem memory.Allocator, table string) flightsrc.Source {
			return newSource(t, cfg, mem, table)
		},
		Records:                 records,
		DeterministicBoundaries: true,
	})
}

// Timestamp cursors through the PostgreSQL driver, with and without a time
// zone: three rows share each microsecond, the id breaks the ties, pages of
// 7 rows end inside runs of ties, and a resume binds the checkpoint's
// timestamp with the column's type.
func TestIntegrationSourceConformancePostgresTimestamp(t *testing.T) {
	cfg := adbctest.PostgresConfig(t)
	c := pgtest.Conn(t)
	for _, typ := range []string{"timestamptz", "timestamp"} {
		t.Run(typ, func(t *testing.T) {
			srctest.Run(t, srctest.Harness{
				NewStream: func(t *testing.T) string {
					table := pgtest.Name("adbcsrc_ts")
					pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, wm `+typ+` NOT NULL, v text)`)
					t.Cleanup(func() { pgtest.Exec(t, c, `DROP TABLE `+table) })
					return table
				},
				Append: func(t *testing.T, table string, from, to int64) {
					pgtest.Exec(t, c, `INSERT INTO `+table+` SELECT i, '2026-01-02 03:04:05.5+00'::timestamptz + (i / 3) * interval '1 microsecond', 'v' || i
						FROM generate_series($1::bigint, $2::bigint - 1) i ORDER BY random()`, from, to)
				},
				NewSource: func(t *testing.T, mem memory.Allocator, table string) flightsrc.Source {
					return newSource(t, cfg, mem, table)
				},
				Records:                 records,
				DeterministicBoundaries: true,
			})
		})
	}
}

// The same through the SQLite driver on a file, written with the sqlite3
// shell.
func TestIntegrationSourceConformanceSQLite(t *testing.T) {
	cfg, path := adbctest.SQLiteConfig(t)
	sqlite3 := adbctest.SQLite3(t)
	run := func(t *testing.T, sql string) {
		t.Helper()
		out, err := exec.Command(sqlite3, "-bail", "-cmd", ".timeout 30000", path, sql).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	n := 0
	srctest.Run(t, srctest.Harness{
		NewStream: func(t *testing.T) string {
			n++
			table := fmt.Sprintf("adbcsrc_%d", n)
			run(t, `CREATE TABLE `+table+` (id INTEGER PRIMARY KEY, wm INTEGER NOT NULL, v TEXT)`)
			return table
		},
		Append: func(t *testing.T, table string, from, to int64) {
			var vals []string
			for i := to - 1; i >= from; i-- { // reverse order: the id breaks the ties
				vals = append(vals, fmt.Sprintf("(%d, %d, 'v%d')", i, i/3, i))
			}
			if len(vals) > 0 {
				run(t, `INSERT INTO `+table+` VALUES `+strings.Join(vals, ", "))
			}
		},
		NewSource: func(t *testing.T, mem memory.Allocator, table string) flightsrc.Source {
			return newSource(t, cfg, mem, table)
		},
		Records:                 records,
		DeterministicBoundaries: true,
	})
}

// The same through the Flight SQL driver, against arrow-go's example SQLite
// Flight SQL server (dialect sqlite: "?" placeholders).
func TestIntegrationSourceConformanceFlightSQL(t *testing.T) {
	uri, db := adbctest.FlightSQLServer(t)
	cfg := fadbc.Config{Driver: fadbc.FlightSQL, URI: uri, Dialect: fadbc.SQLite}
	n := 0
	srctest.Run(t, srctest.Harness{
		NewStream: func(t *testing.T) string {
			n++
			table := fmt.Sprintf("adbcsrc_%d", n)
			_, err := db.Exec(`CREATE TABLE ` + table + ` (id INTEGER PRIMARY KEY, wm INTEGER NOT NULL, v TEXT)`)
			require.NoError(t, err)
			return table
		},
		Append: func(t *testing.T, table string, from, to int64) {
			// One transaction: rows committed one by one in reverse order
			// would put cursors below one already read (the documented
			// pitfall), and the reader would rightly miss them.
			tx, err := db.Begin()
			require.NoError(t, err)
			for i := to - 1; i >= from; i-- { // reverse order: the id breaks the ties
				_, err := tx.Exec(`INSERT INTO `+table+` VALUES (?, ?, ?)`, i, i/3, fmt.Sprint("v", i))
				require.NoError(t, err)
			}
			require.NoError(t, tx.Commit())
		},
		NewSource: func(t *testing.T, mem memory.Allocator, table string) flightsrc.Source {
			return newSource(t, cfg, mem, table)
		},
		Records:                 records,
		DeterministicBoundaries: true,
	})
}
