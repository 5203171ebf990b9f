package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The YAML form, and check's line for it: the guarantee and the
// checkpoints.
func TestFileSinkCheck(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=10'
sinks:
  files:
    file: {path: `+dir+`, format: jsonl}
pipelines:
  p:
    source: gen
    sink: files
`)
	var out bytes.Buffer
	require.NoError(t, checkCommand(context.Background(), []string{"--config", path}, &out), out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, out.String()) // the file, the source, the sink, the pipeline
	require.Contains(t, lines[3], "ok    pipelines.p")
	require.Contains(t, lines[2], "ok    sinks.files")
	require.Contains(t, lines[2], "exactly-once (jsonl part files")
	require.Contains(t, lines[2], "p: no checkpoint yet")
}
