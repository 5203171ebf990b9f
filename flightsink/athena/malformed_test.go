package athena_test

import (
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/athena"
	"github.com/flightline/flightline/flightsink/doputtest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md),
// on moto's S3 and Glue.
func TestIntegrationMalformedDoPut(t *testing.T) {
	moto(t)
	location, db := bucket+"/"+fresh("malformed"), fresh("mal")
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		return newSink(tb.(*testing.T), athena.Config{Location: location, Database: db})
	})
}
