package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestClickHouseSinkSpec(t *testing.T) {
	for raw, want := range map[string]string{
		"clickhouse:db": "want clickhouse://USER@HOST:PORT/DB",
		"clickhouse://u:secretvalue@127.0.0.1:1/db":     "password in the URL is refused",
		"clickhouse://u@127.0.0.1:1/db?colour=green":    "unknown option(s) colour",
		"clickhouse://u@127.0.0.1:1/db?dedup_window=0":  "dedup window 0",
		"clickhouse://u@127.0.0.1:1/db?dedup_window=x":  "dedup_window",
		"clickhouse://u@127.0.0.1:1/db?order_by=%20%20": "empty ORDER BY",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
		require.NotContains(t, err.Error(), "secretvalue")
	}
	s, closeFn, err := openSink(testEnv, "clickhouse://u@127.0.0.1:1/db?table=t&order_by=id&dedup_window=10&secure=true", endpoint.ClientConfig{})
	require.NoError(t, err, "opening contacts nothing")
	closeFn()
	require.Equal(t, flightsink.ExactlyOnce, flightsink.GuaranteeOf(s))
}
