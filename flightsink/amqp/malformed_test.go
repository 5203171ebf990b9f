package amqp_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/amqp"
	"github.com/flightline/flightline/flightsink/doputtest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
func TestIntegrationMalformedDoPut(t *testing.T) {
	u, exchange, _ := broker(t)
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		s, err := amqp.New(context.Background(), amqp.Config{URL: u, Exchange: exchange, RoutingKey: "default"})
		require.NoError(tb, err)
		return s
	})
}
