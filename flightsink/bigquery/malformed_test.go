package bigquery

import (
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
// The sink merges on a key column: only the stream with an id has one.
func TestIntegrationMalformedDoPut(t *testing.T) {
	e := needEmulator(t)
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink { return e.sink(tb) },
		"strings", "int64s", "lists", "structs", "dictionaries", "strings lz4", "strings zstd")
}
