//go:build cgo

package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/duckdbtest"
)

// From the command line: generator → duckdb: sink, twice (the second run
// resumes from the file's checkpoint and adds nothing); DuckDB's Python
// package counts the rows.
func TestIntegrationDuckDBCommandLine(t *testing.T) {
	lib := duckdbtest.Lib(t)
	path := filepath.Join(t.TempDir(), "cli.duckdb")
	for range 2 {
		require.NoError(t, runPipeline(context.Background(), []string{"--source", "generator:?rows=2500&batch_rows=500",
			"--sink", "duckdb:" + path + "?table=gen&library=" + lib, "--pipeline", "to-duckdb", "--log-level", "warn"}))
		require.Equal(t, "2500 2500", duckdbtest.PyQuery(t, path, "select count(*) || ' ' || count(distinct id) from gen"))
	}
}
