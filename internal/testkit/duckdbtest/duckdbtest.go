// Package duckdbtest reaches what `integration/services/services.sh up
// duckdb` installs: DuckDB's shared library (FLIGHTLINE_DUCKDB_LIB) and an
// independent reader, DuckDB's Python package in a venv of its own
// (FLIGHTLINE_DUCKDB_PYTHON).
package duckdbtest

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// Lib is the path of libduckdb.so; the test skips (or fails under
// FLIGHTLINE_REQUIRE_SERVICES=1) without it.
func Lib(tb testing.TB) string {
	return servicetest.Need(tb, "FLIGHTLINE_DUCKDB_LIB", "DuckDB library")
}

// Python is the Python interpreter that has the duckdb package.
func Python(tb testing.TB) string {
	return servicetest.Need(tb, "FLIGHTLINE_DUCKDB_PYTHON", "DuckDB Python package")
}

// readIDs prints one id a line; "missing" when the table does not exist.
const readIDs = `
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
if con.execute("select count(*) from information_schema.tables where table_name = ?", [sys.argv[2]]).fetchone()[0] == 0:
    print("missing"); sys.exit(0)
for (i,) in con.execute('select id from "' + sys.argv[2].replace('"', '""') + '"').fetchall():
    print(i)
`

// PyIDs reads the id column of table in the database file at path with
// DuckDB's Python package, in a process of its own (so no Flightline code
// is involved, and the file must not be held open by another process). A
// missing table reads as no ids.
func PyIDs(tb testing.TB, path, table string) []int64 {
	tb.Helper()
	out, err := exec.Command(Python(tb), "-c", readIDs, path, table).CombinedOutput()
	require.NoError(tb, err, "%s", out)
	var ids []int64
	for _, l := range strings.Fields(string(out)) {
		if l == "missing" {
			return nil
		}
		n, err := strconv.ParseInt(l, 10, 64)
		require.NoError(tb, err, "%s", out)
		ids = append(ids, n)
	}
	return ids
}

// PyQuery runs one query with DuckDB's Python package on the file at path
// (read only) and returns the first column of its first row as text.
func PyQuery(tb testing.TB, path, query string) string {
	tb.Helper()
	script := "import sys, duckdb\nprint(duckdb.connect(sys.argv[1], read_only=True).execute(sys.argv[2]).fetchone()[0])"
	out, err := exec.Command(Python(tb), "-c", script, path, query).CombinedOutput()
	require.NoError(tb, err, "%s", out)
	return strings.TrimSpace(string(out))
}
