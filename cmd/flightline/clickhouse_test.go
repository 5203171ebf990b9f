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

	"github.com/flightline/flightline/internal/testkit/chtest"
	"github.com/stretchr/testify/require"
)

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
