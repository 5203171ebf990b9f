package postgres_test

import (
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
func TestIntegrationMalformedDoPut(t *testing.T) {
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		return newSink(tb.(*testing.T), postgres.Config{DSN: pgtest.DSN(tb)})
	}, "dictionaries")
}
