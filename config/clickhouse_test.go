package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/chtest"
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

// The YAML form against the chdb front: check, a sync --once, a second
// sync that resumes and writes nothing again, and check with a wrong
// password.
func TestIntegrationClickHouseSinkCheckAndSync(t *testing.T) {
	f := chtest.Need(t)
	u, err := url.Parse(f.URL)
	require.NoError(t, err)
	table := fmt.Sprintf("cmd_sync_%06d", rand.IntN(1e6))
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=500&batch_rows=100'
sinks:
  ch:
    clickhouse: {url: 'clickhouse://`+f.User+`@`+u.Host+`/default', table: `+table+`, order_by: id, password_env: FL_TEST_CH_PASSWORD}
pipelines:
  p:
    source: gen
    sink: ch
    id: `+table+`
`)
	t.Setenv("FL_TEST_CH_PASSWORD", f.Password)
	var out bytes.Buffer
	require.NoError(t, checkCommand(context.Background(), []string{"--config", path}, &out), out.String())
	require.Contains(t, out.String(), "ok    sinks.ch")
	require.Contains(t, out.String(), table+": no checkpoint yet")
	require.Contains(t, out.String(), "exactly-once within the dedup window")

	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	require.Equal(t, []string{"500\t500"}, f.Query(t, "SELECT count(), uniqExact(id) FROM "+table))
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	require.Equal(t, []string{"500\t500"}, f.Query(t, "SELECT count(), uniqExact(id) FROM "+table))
	require.Contains(t, f.Query(t, "SELECT create_table_query FROM system.tables WHERE name = '"+table+"'")[0],
		"non_replicated_deduplication_window = 1000")

	t.Setenv("FL_TEST_CH_PASSWORD", "wrong-secretvalue")
	out.Reset()
	require.Error(t, checkCommand(context.Background(), []string{"--config", path}, &out))
	require.Contains(t, strings.ToLower(out.String()), "unauthenticated", out.String())
	require.NotContains(t, out.String(), "secretvalue")
}
