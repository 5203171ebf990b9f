//go:build cgo

package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/internal/testkit/duckdbtest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// The README's pipeline without a sink, as written: sync --once into the
// embedded DuckDB table, then query; the count query answers what DuckDB's
// Python package, in a process of its own, counts in the file.
func TestIntegrationDocsQueryWithoutSink(t *testing.T) {
	duckdbtest.Lib(t) // found through FLIGHTLINE_DUCKDB_LIB
	yml := findBlock(t, "yaml", "# no sink:")
	cmds := docCommands(t, findBlock(t, "sh", "flightline query"))
	require.Len(t, cmds, 3, "sync --once, query, query --format csv")
	t.Chdir(t.TempDir())
	t.Setenv(config.DataDirEnv, "")
	require.NoError(t, os.WriteFile("flightline.yml", []byte(yml.text), 0o600))
	logs := captureLogs(t)
	outs := make([]string, len(cmds))
	for i, args := range cmds {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := runCommand(ctx, args[0], args[1:], &out)
		cancel()
		require.NoError(t, err, "flightline %s\n%s\n%s", strings.Join(args, " "), out.String(), logs.String())
		outs[i] = out.String()
	}
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=orders rows=100000 `)
	file := filepath.Join("flightline-data", config.LocalDBName)
	independent := duckdbtest.PyQuery(t, file, "select count(*) from orders")
	require.Equal(t, "100000", independent)
	lines := strings.Split(strings.TrimSpace(outs[1]), "\n")
	require.Equal(t, []string{"count_star()", "------------", independent, "(1 rows)"}, lines)
	recs, err := csv.NewReader(strings.NewReader(outs[2])).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 4)
	require.Equal(t, []string{"customer", "n"}, recs[0])

	// Again: nothing written twice; JSON answers the same count.
	require.NoError(t, runCommand(context.Background(), cmds[0][0], cmds[0][1:], &bytes.Buffer{}))
	var out bytes.Buffer
	require.NoError(t, runCommand(context.Background(), "query", []string{"--pipeline", "orders", "--format", "json",
		"select count(*) as n, count(distinct id) as d from orders"}, &out))
	var rows []map[string]int64
	require.NoError(t, json.Unmarshal(out.Bytes(), &rows), out.String())
	require.Equal(t, []map[string]int64{{"n": 100000, "d": 100000}}, rows)
	require.Equal(t, "100000", duckdbtest.PyQuery(t, file, "select count(distinct id) from orders"))

	// Bad input: a pipeline that is not there, a format that is not one.
	err = runCommand(context.Background(), "query", []string{"--pipeline", "nope", "select 1"}, &bytes.Buffer{})
	require.ErrorIs(t, err, config.ErrNoPipeline)
	err = runCommand(context.Background(), "query", []string{"--format", "xml", "select 1"}, &bytes.Buffer{})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

// Without DuckDB's library a pipeline without sink: writes a local Delta
// table; query (given the library) reads it, and a delta: sink on a local
// path named in the file, as views over their active Parquet files. The
// counts are deltalake's (Python, a process of its own).
func TestIntegrationQueryLocalDelta(t *testing.T) {
	lib := duckdbtest.Lib(t)
	py := servicetest.Need(t, "FLIGHTLINE_PYTHON", "Python with deltalake")
	t.Chdir(t.TempDir())
	t.Setenv(config.DataDirEnv, "")
	t.Setenv("FLIGHTLINE_DUCKDB_LIB", "")
	t.Setenv("FLIGHTLINE_CACHE", t.TempDir())
	yml := `sources:
  gen:
    generator: {rows: 3000, batch_rows: 1000}
sinks:
  lake:
    delta: {uri: lake/orders}
pipelines:
  explore:
    source: sources.gen
  to_lake:
    source: sources.gen
    sink: sinks.lake
`
	require.NoError(t, os.WriteFile("flightline.yml", []byte(yml), 0o600))
	require.NoError(t, runCommand(context.Background(), "sync", []string{"--once", "--log-level", "warn"}, &bytes.Buffer{}))
	_, err := os.Stat(filepath.Join("flightline-data", "explore", "_delta_log"))
	require.NoError(t, err, "without the library the local table is Delta")

	for _, c := range []struct{ pipeline, table, dir string }{{"explore", "explore", "flightline-data/explore"}, {"to_lake", "to_lake", "lake/orders"}} {
		var out bytes.Buffer
		require.NoError(t, runCommand(context.Background(), "query", []string{"--pipeline", c.pipeline, "--duckdb-lib", lib, "--format", "csv",
			"select count(*) as n, count(distinct id) as d from " + c.table}, &out))
		script := "import sys, deltalake\nt = deltalake.DeltaTable(sys.argv[1]).to_pyarrow_table()\nprint(f'{t.num_rows},{len(set(t.column(\"id\").to_pylist()))}', flush=True)\n" +
			"import os; os._exit(0)  # skip interpreter teardown: delta-rs' runtime aborts in it"
		want, err := exec.Command(py, "-c", script, c.dir).CombinedOutput()
		require.NoError(t, err, "%s", want)
		require.Equal(t, "n,d\n"+strings.TrimSpace(string(want))+"\n", out.String())
		require.Equal(t, "3000,3000", strings.TrimSpace(string(want)))
	}
}
