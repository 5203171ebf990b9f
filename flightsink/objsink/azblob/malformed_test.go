package azblob_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/azblob"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
func TestIntegrationAzblobMalformedDoPut(t *testing.T) {
	a := need(t)
	cont := a.newContainer(t)
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		b, err := azblob.New(context.Background(), a.config(cont, "lake"))
		require.NoError(tb, err)
		s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "azblob sink"})
		require.NoError(tb, err)
		return s
	})
}
