package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A pipeline without sink: writes the embedded DuckDB table where the
// library is found, a local Delta table where it is not, and keeps a Delta
// table it already has when the library appears later.
func TestLocalSinkChoice(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DataDirEnv, "")
	t.Setenv("FLIGHTLINE_CACHE", t.TempDir())
	yml := []byte("sources:\n  gen:\n    generator: {rows: 10}\npipelines:\n  orders:\n    source: sources.gen\n")
	cfgPath := filepath.Join(dir, "flightline.yml")
	load := func() *pipelineConf {
		t.Helper()
		c, err := Parse(cfgPath, yml, envOf(nil))
		require.NoError(t, err)
		p := c.pipelines["orders"]
		require.True(t, p.local)
		return p
	}

	t.Setenv("FLIGHTLINE_DUCKDB_LIB", "")
	p := load()
	require.Equal(t, "delta", p.sink.kind)
	require.Equal(t, filepath.Join(dir, "flightline-data", "orders"), p.sink.loc)

	lib := filepath.Join(t.TempDir(), "libduckdb.so")
	require.NoError(t, os.WriteFile(lib, nil, 0o600))
	t.Setenv("FLIGHTLINE_DUCKDB_LIB", lib)
	p = load()
	require.Equal(t, "duckdb", p.sink.kind)
	require.Equal(t, filepath.Join(dir, "flightline-data", LocalDBName), p.sink.loc)
	require.Equal(t, "orders", p.sink.q.Get("table"))

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "flightline-data", "orders", "_delta_log"), 0o755))
	require.Equal(t, "delta", load().sink.kind, "a Delta table already there stays the destination")

	t.Setenv(DataDirEnv, filepath.Join(dir, "elsewhere"))
	require.Equal(t, filepath.Join(dir, "elsewhere", LocalDBName), load().sink.loc)
}
