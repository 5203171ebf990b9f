//go:build cgo

package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

	u, q = c.sources["pg"].kindURL()
	ss, err := adbcSourceSpec.Parse(q)
	require.NoError(t, err)
	cfg, err = adbcConfig(u, ss.adbcDB)
	require.NoError(t, err)
	require.Equal(t, "flightsql", cfg.Driver)
	require.Equal(t, "updated", ss.Cursor)
	require.Equal(t, 2*time.Second, *ss.Poll)
}
