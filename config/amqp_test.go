package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestAMQPSinkSpec(t *testing.T) {
	for raw, want := range map[string]string{
		"amqp:":                                   "want amqp://USER@HOST:PORT/VHOST",
		"amqp://u:secretvalue@127.0.0.1:1/":       "password in the URL is refused",
		"amqp://u@127.0.0.1:1/?colour=green":      "unknown option(s) colour",
		"amqp://u@127.0.0.1:1/?confirm_timeout=x": "confirm_timeout",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
		require.NotContains(t, err.Error(), "secretvalue", raw)
	}
	s, closeFn, err := openSink(testEnv, "amqp://u@127.0.0.1:1/v?exchange=x&routing_key=k&headers=a,b", endpoint.ClientConfig{})
	require.NoError(t, err, "opening contacts nothing")
	closeFn()
	require.Equal(t, flightsink.AtLeastOnce, flightsink.GuaranteeOf(s))
}
