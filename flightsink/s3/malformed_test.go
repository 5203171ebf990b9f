package s3

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
func TestIntegrationMalformedDoPut(t *testing.T) {
	loc, opts := testLocation(t)
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		s, err := New(context.Background(), Config{Location: loc, Storage: opts})
		require.NoError(tb, err)
		return s
	})
}
