// Package adbctest opens the real ADBC drivers that
// integration/services/services.sh installs (the adbc service), for tests.
package adbctest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/internal/testkit/pgtest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// PostgresDriver is the path of the PostgreSQL C driver; the test skips
// (or fails under FLIGHTLINE_REQUIRE_SERVICES=1) without it.
func PostgresDriver(tb testing.TB) string {
	return servicetest.Need(tb, "FLIGHTLINE_ADBC_POSTGRESQL_DRIVER", "ADBC PostgreSQL driver")
}

// SQLiteDriver is the path of the SQLite C driver.
func SQLiteDriver(tb testing.TB) string {
	return servicetest.Need(tb, "FLIGHTLINE_ADBC_SQLITE_DRIVER", "ADBC SQLite driver")
}

// SQLite3 is the path of the sqlite3 command-line shell.
func SQLite3(tb testing.TB) string {
	return servicetest.Need(tb, "FLIGHTLINE_SQLITE3", "sqlite3 CLI")
}

// PostgresConfig is the Config of the test PostgreSQL through ADBC.
func PostgresConfig(tb testing.TB) adbc.Config {
	drv := PostgresDriver(tb)
	return adbc.Config{Driver: drv, URI: pgtest.DSN(tb)}
}

// SQLiteConfig is the Config of a fresh SQLite file in a temporary
// directory; the file's path is returned too.
func SQLiteConfig(tb testing.TB) (adbc.Config, string) {
	drv := SQLiteDriver(tb)
	path := filepath.Join(tb.TempDir(), "test.db")
	return adbc.Config{Driver: drv, URI: "file:" + path}, path
}

// Open opens cfg and closes it at the end of the test.
func Open(tb testing.TB, cfg adbc.Config) *adbc.DB {
	tb.Helper()
	db, err := adbc.Open(context.Background(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	return db
}
