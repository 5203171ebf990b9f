package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/endpoint"
)

func TestPostgresSpecs(t *testing.T) {
	// New does not connect, so these need no server.
	s, closeSink, err := openSink(testEnv, "postgres://u@127.0.0.1:1/db?sslmode=disable&table=sales.orders&max_conns=2", endpoint.ClientConfig{})
	require.NoError(t, err)
	require.NotNil(t, s)
	closeSink()
	_, closeSink, err = openSink(testEnv, "postgresql://u@h/db?checkpoint_table=cps", endpoint.ClientConfig{})
	require.NoError(t, err)
	closeSink()

	_, closeSink, err = openSink(testEnv, "postgres://u@h/db?table=t&instance=host-1", endpoint.ClientConfig{})
	require.NoError(t, err)
	closeSink()
	_, _, err = openSink(testEnv, "postgres://u@h/db?table=t&instance=", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "empty instance name")
	// The Snowflake and ADBC sinks keep one checkpoint row per (pipeline,
	// target): they have no instances, and say so.
	_, _, err = openSink(testEnv, "snowflake://loader@acct/DB?table=t&instance=host-1", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "unknown option(s) instance")
	_, _, err = openSink(testEnv, "adbc:postgresql?uri=postgres://u@h/db&table=t&instance=host-1", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "unknown option(s) instance")

	_, _, err = openSink(testEnv, "postgres://u@h/db?table=t&colour=blue", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "unknown option(s) colour")
	_, _, err = openSink(testEnv, "postgres://u@h/db?max_conns=many", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "max_conns")
	_, _, err = openSink(testEnv, `postgres://u@h/db?table=a.b.c`, endpoint.ClientConfig{})
	require.ErrorContains(t, err, "schema.table")

	_, _, err = openSource(testEnv, "postgres://u@h/db?table=t&watermark=updated_at&key=id&poll=250ms&batch_rows=500", endpoint.ClientConfig{})
	require.NoError(t, err)
	_, _, err = openSource(testEnv, "postgres://u@h/db?table=t&watermark=updated_at", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "key")
	_, _, err = openSource(testEnv, "postgres://u@h/db?table=t&watermark=w&key=k&poll=soon", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "poll")
}
