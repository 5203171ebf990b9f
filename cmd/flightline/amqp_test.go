package main

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/flightline/flightline/internal/testkit/servicetest"
	"github.com/stretchr/testify/require"
)

// The YAML form against RabbitMQ, the password from the environment, and
// check's line; wrong credentials fail check without showing the password.
func TestIntegrationAMQPSinkCheck(t *testing.T) {
	raw := servicetest.Need(t, "FLIGHTLINE_AMQP_URL", "RabbitMQ")
	u, err := url.Parse(raw)
	require.NoError(t, err)
	pass, _ := u.User.Password()
	yml := func() string {
		return writeConfig(t, `
sources:
  gen: 'generator:?rows=10'
sinks:
  rabbit:
    amqp: {url: 'amqp://`+u.User.Username()+`@`+u.Host+`/', exchange: amq.topic, routing_key: k, password_env: FL_TEST_AMQP_PASSWORD}
pipelines:
  p:
    source: gen
    sink: rabbit
`)
	}
	t.Setenv("FL_TEST_AMQP_PASSWORD", pass)
	var out bytes.Buffer
	require.NoError(t, checkCommand(context.Background(), []string{"--config", yml()}, &out), out.String())
	require.Contains(t, out.String(), "ok    sinks.rabbit")
	require.Contains(t, out.String(), "at-least-once (publisher confirms")

	t.Setenv("FL_TEST_AMQP_PASSWORD", "wrong-secretvalue")
	out.Reset()
	require.Error(t, checkCommand(context.Background(), []string{"--config", yml()}, &out))
	require.Contains(t, strings.ToLower(out.String()), "unauthenticated", out.String())
	require.NotContains(t, out.String(), "secretvalue")
}
