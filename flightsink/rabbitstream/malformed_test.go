package rabbitstream_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsink/rabbitstream"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
func TestIntegrationMalformedDoPut(t *testing.T) {
	u, _ := env(t)
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		s, err := rabbitstream.New(context.Background(), rabbitstream.Config{URL: u + "default_stream_unused"})
		require.NoError(tb, err)
		return s
	})
}
