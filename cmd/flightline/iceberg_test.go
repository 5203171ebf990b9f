package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/stretchr/testify/require"
)

// The URL form opens a working sink, and check reaches the YAML form's
// catalog and reads the checkpoint the sink committed.
func TestIcebergSinkOpenAndCheck(t *testing.T) {
	ctx := context.Background()
	wh := filepath.Join(t.TempDir(), "wh")
	s, closeFn, err := config.OpenSink(context.Background(), testLog, nil, "iceberg:"+wh+"?table=lake.orders", endpoint.ClientConfig{})
	require.NoError(t, err)
	require.Equal(t, flightsink.ExactlyOnce, flightsink.GuaranteeOf(s))
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	rec := sinktest.Batch(memory.DefaultAllocator, 0, 3)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	rec.Release()
	require.NoError(t, w.Close(ctx))
	closeFn()

	path := writeConfig(t, "sinks:\n  lake:\n    iceberg: {warehouse: '"+wh+"', table: lake.orders}\n"+
		"sources:\n  gen:\n    generator: {}\n"+
		"pipelines:\n  p:\n    source: gen\n    sink: lake\n    id: p\n")
	var out bytes.Buffer
	err = checkCommand(ctx, []string{"--config", path}, &out)
	require.Regexp(t, `ok    sinks.lake +iceberg +checkpoint read; p: checkpoint `, out.String(), err)
}
