//go:build cgo

package config

import (
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
)

// The config file names the driver with the key driver.
func TestAdbcConfigFile(t *testing.T) {
	c, err := Parse("flightline.yml", []byte(`
sources:
  pg:
    adbc: {driver: flightsql, uri: "grpc://127.0.0.1:1", table: orders, cursor: updated, tiebreak: id, poll: 2s}
sinks:
  lite:
    adbc: {driver: /opt/adbc/libadbc_driver_sqlite.so, uri: "file:/data/orders.db", table: orders, at_least_once: false}
  changes:
    adbc: {driver: /opt/adbc/libadbc_driver_postgresql.so, uri: "postgresql://h/db", table: orders, mode: upsert, key: [id, region]}
pipelines:
  copy: {source: pg, sink: lite}
`), envOf(nil))
	require.NoError(t, err)
	u, q := c.sinks["lite"].kindURL()
	sc, err := adbcSinkSpec.Parse(q)
	require.NoError(t, err)
	cfg, err := adbcConfig(u, sc.adbcDB)
	require.NoError(t, err)
	require.Equal(t, "/opt/adbc/libadbc_driver_sqlite.so", cfg.Driver)
	require.Equal(t, "file:/data/orders.db", cfg.URI)
	require.Equal(t, "orders", *sc.Table)
	require.Nil(t, sc.Mode)

	_, q = c.sinks["changes"].kindURL()
	sc, err = adbcSinkSpec.Parse(q)
	require.NoError(t, err)
	require.Equal(t, "upsert", *sc.Mode)
	require.Equal(t, []string{"id", "region"}, sc.Key)

	u, q = c.sources["pg"].kindURL()
	ss, err := adbcSourceSpec.Parse(q)
	require.NoError(t, err)
	cfg, err = adbcConfig(u, ss.adbcDB)
	require.NoError(t, err)
	require.Equal(t, "flightsql", cfg.Driver)
	require.Equal(t, "updated", ss.Cursor)
	require.Equal(t, 2*time.Second, *ss.Poll)
}

// mode and key in the URL form, and their refusals before any connection.
func TestAdbcSinkModeURL(t *testing.T) {
	q, err := url.ParseQuery("uri=grpc://127.0.0.1:1&mode=upsert&key=id,region")
	require.NoError(t, err)
	sc, err := adbcSinkSpec.Parse(q)
	require.NoError(t, err)
	require.Equal(t, "upsert", *sc.Mode)
	require.Equal(t, []string{"id", "region"}, sc.Key)
	duck := "duckdb:" + filepath.Join(t.TempDir(), "x.duckdb")
	for _, c := range []struct{ url, want string }{
		{"adbc:flightsql?uri=grpc://127.0.0.1:1&table=t&mode=upsert", "mode upsert needs key columns"},
		{"adbc:flightsql?uri=grpc://127.0.0.1:1&table=t&key=id", "key is for mode upsert"},
		{"adbc:flightsql?uri=grpc://127.0.0.1:1&table=t&mode=merge&key=id", "merge"},
		{duck + "?table=t&mode=upsert", "mode upsert needs key columns"},
		{duck + "?table=t&key=id", "key is for mode upsert"},
	} {
		_, _, err := openSink(testEnv, c.url, endpoint.ClientConfig{})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, c.url)
		require.ErrorContains(t, err, c.want, c.url)
	}
}
