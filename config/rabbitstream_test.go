package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestRabbitStreamSinkSpec(t *testing.T) {
	for raw, want := range map[string]string{
		"rabbitmq-stream:": "want rabbitmq-stream://USER@HOST:PORT/STREAM",
		"rabbitmq-stream://u:secretvalue@127.0.0.1:1/s":       "password in the URL is refused",
		"rabbitmq-stream://u@127.0.0.1:1/s?colour=green":      "unknown option(s) colour",
		"rabbitmq-stream://u@127.0.0.1:1/s?confirm_timeout=x": "confirm_timeout",
		"rabbitmq-stream://u@127.0.0.1:1/s?stream=t":          "named twice",
		"rabbitmq-stream://u@127.0.0.1:1/s?declare=sometimes": "declare",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
		require.NotContains(t, err.Error(), "secretvalue", raw)
	}
	s, closeFn, err := openSink(testEnv, "rabbitmq-stream://u@127.0.0.1:1/s?vhost=v&declare=false", endpoint.ClientConfig{})
	require.NoError(t, err, "opening contacts nothing")
	closeFn()
	require.Equal(t, flightsink.ExactlyOnce, flightsink.GuaranteeOf(s))
}
