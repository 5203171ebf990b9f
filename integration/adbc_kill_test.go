package integration

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// The ADBC sink in the split-process kill tests (killSinks): the ADBC
// PostgreSQL driver against the test PostgreSQL, checked with psql, and the
// ADBC SQLite driver on a file, checked with the sqlite3 shell.

// adbcSinkSpec is the serve-sink spec of the ADBC sink with driver drv on
// the database at uri.
func adbcSinkSpec(drv, uri, table string) string {
	q := url.Values{}
	q.Set("uri", uri)
	q.Set("table", table)
	return "adbc:" + drv + "?" + q.Encode()
}

func adbcPostgresKillDest(t *testing.T, _ context.Context, name string) killDest {
	drv := Need(t, "FLIGHTLINE_ADBC_POSTGRESQL_DRIVER", "ADBC PostgreSQL driver")
	dsn := Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	psql, err := exec.LookPath("psql")
	require.NoError(t, err, "psql")
	table := strings.NewReplacer("-", "_").Replace(name)
	read := func(ctx context.Context) ([]string, error) {
		out, err := exec.CommandContext(ctx, psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn,
			"-c", `SELECT convert_from(key, 'UTF8') FROM `+pgx.Identifier{table}.Sanitize()).Output()
		if err != nil {
			return nil, psqlErr(err)
		}
		return lines(string(out)), nil
	}
	return killDest{spec: adbcSinkSpec(drv, dsn, table), read: read}
}

func adbcSQLiteKillDest(t *testing.T, _ context.Context, name string) killDest {
	drv := Need(t, "FLIGHTLINE_ADBC_SQLITE_DRIVER", "ADBC SQLite driver")
	sqlite3 := Need(t, "FLIGHTLINE_SQLITE3", "sqlite3 CLI")
	path := filepath.Join(t.TempDir(), "kill.db")
	table := strings.NewReplacer("-", "_").Replace(name)
	read := func(ctx context.Context) ([]string, error) {
		out, err := exec.CommandContext(ctx, sqlite3, "-bail", path, `SELECT CAST(key AS TEXT) FROM "`+table+`"`).Output()
		if err != nil {
			return nil, psqlErr(err)
		}
		return lines(string(out)), nil
	}
	return killDest{spec: adbcSinkSpec(drv, "file:"+path, table), read: read}
}

// psqlErr keeps a CLI's stderr in its error.
func psqlErr(err error) error {
	if ee, ok := err.(*exec.ExitError); ok {
		return &cliError{err: err, stderr: string(ee.Stderr)}
	}
	return err
}

type cliError struct {
	err    error
	stderr string
}

func (e *cliError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }
func (e *cliError) Unwrap() error { return e.err }

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
