package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/flightline/flightline/internal/testkit/servicetest"
	"github.com/stretchr/testify/require"
)

// The YAML form against RabbitMQ, the password from the environment, a
// --once sync into the stream and check's line with the checkpoint; wrong
// credentials fail check without showing the password.
func TestIntegrationRabbitStreamSink(t *testing.T) {
	raw := servicetest.Need(t, "FLIGHTLINE_RABBITMQ_STREAM_URL", "RabbitMQ streams")
	u, err := url.Parse(raw)
	require.NoError(t, err)
	pass, _ := u.User.Password()
	name := fmt.Sprintf("fl_cmd_%d", rand.Int64())
	yml := writeConfig(t, `
sources:
  gen: 'generator:?rows=25&batch_rows=10'
sinks:
  rabbit:
    rabbitmq-stream: {url: 'rabbitmq-stream://`+u.User.Username()+`@`+u.Host+`', stream: `+name+`, password_env: FL_TEST_RMQS_PASSWORD}
pipelines:
  p:
    source: gen
    sink: rabbit
`)
	t.Setenv("FL_TEST_RMQS_PASSWORD", pass)
	ctx := context.Background()
	var out bytes.Buffer
	require.NoError(t, checkCommand(ctx, []string{"--config", yml}, &out), out.String())
	require.Contains(t, out.String(), "ok    sinks.rabbit")
	require.Contains(t, out.String(), "exactly-once (producer deduplication")
	require.Contains(t, out.String(), "p: no checkpoint yet")

	require.NoError(t, syncCommand(ctx, []string{"--config", yml, "--once"}))
	out.Reset()
	require.NoError(t, checkCommand(ctx, []string{"--config", yml}, &out), out.String())
	require.Contains(t, out.String(), `p: checkpoint {"positions":{"orders/0":25}}`, out.String())

	t.Setenv("FL_TEST_RMQS_PASSWORD", "wrong-secretvalue")
	out.Reset()
	require.Error(t, checkCommand(ctx, []string{"--config", yml}, &out))
	require.Contains(t, strings.ToLower(out.String()), "unauthenticated", out.String())
	require.NotContains(t, out.String(), "secretvalue")
}
