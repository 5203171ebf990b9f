package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The YAML form, and check's line for it: the guarantee, not a checkpoint.
func TestStdoutSinkCheck(t *testing.T) {
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=10'
sinks:
  screen:
    stdout: {format: csv}
pipelines:
  p:
    source: gen
    sink: screen
`)
	var out bytes.Buffer
	require.NoError(t, checkCommand(context.Background(), []string{"--config", path}, &out), out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, out.String()) // the file, the source, the sink, the pipeline
	require.Contains(t, lines[3], "ok    pipelines.p")
	require.Contains(t, lines[2], "ok    sinks.screen")
	require.Contains(t, lines[2], "no guarantee: prints csv to stdout, keeps no checkpoint across runs")
}
