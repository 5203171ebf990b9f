package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
)

func TestDeltaOptimizeAndVacuumCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: dir, Compaction: "off"})
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "cli"})
	require.NoError(t, err)
	for i := range int64(6) {
		rec := sinktest.Batch(memory.DefaultAllocator, i*10, i*10+10)
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(i*10+10)))
		rec.Release()
	}
	require.NoError(t, w.Close(ctx))

	var out bytes.Buffer
	require.NoError(t, deltaCommand(ctx, []string{"optimize", "--json", dir}, &out))
	var opt sinkdelta.OptimizeResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &opt))
	require.Equal(t, 6, opt.FilesRemoved)
	require.Equal(t, 1, opt.FilesAdded)

	out.Reset()
	require.NoError(t, deltaCommand(ctx, []string{"vacuum", "--dry-run", dir}, &out))
	require.Contains(t, out.String(), "would delete 0 log files and 0 data files; oldest version kept 0")

	out.Reset()
	require.Error(t, deltaCommand(ctx, []string{"compact", dir}, &out))
	require.Contains(t, out.String(), "usage: flightline delta optimize|vacuum")
}
