package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestIcebergSinkSpec(t *testing.T) {
	require.Equal(t, icebergSinkConfig{Catalog: "sql", URI: "/c.db", CatalogName: "lake", Table: "a.b", SchemaEvolution: true, ExpireOlderThan: 72 * time.Hour, Partition: "day(ts),id",
		IO: map[string]string{"s3.endpoint": "http://127.0.0.1:7070", "s3.region": "eu-west-1"}},
		parseAs(t, icebergSinkSpec, "iceberg:s3://lake/wh?uri=/c.db&catalog_name=lake&table=a.b&schema_evolution=true&expire_snapshots_older_than=72h&partition=day(ts),id&s3.endpoint=http://127.0.0.1:7070&s3.region=eu-west-1"))
	require.Equal(t, icebergSinkConfig{Catalog: "sql", CatalogName: "flightline", Table: "flightline.events", IO: map[string]string{}},
		parseAs(t, icebergSinkSpec, "iceberg:/data/wh"), "defaults")
	for raw, want := range map[string]string{
		"iceberg:":                        "want iceberg:PATH",
		"iceberg:/x?catalog=rest":         "catalog",
		"iceberg:/x?table=plain":          "want namespace.table",
		"iceberg:s3://lake/wh":            "needs the SQLite catalog's path",
		"iceberg:/x?colour=green":         "unknown option(s) colour",
		"iceberg:ftp://host/x?uri=/tmp/c": "scheme",
		"iceberg:/x?partition=week(ts)":   "unknown transform week",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
	}
}

// The URL form opens a working sink, and check reaches the YAML form's
// catalog and reads the checkpoint the sink committed.
func TestIcebergSinkOpenAndCheck(t *testing.T) {
	ctx := context.Background()
	wh := filepath.Join(t.TempDir(), "wh")
	s, closeFn, err := openSink(testEnv, "iceberg:"+wh+"?table=lake.orders", endpoint.ClientConfig{})
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
