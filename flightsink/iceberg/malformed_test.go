package iceberg_test

import (
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	icesink "github.com/flightline/flightline/flightsink/iceberg"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md),
// on a local warehouse. Iceberg has no dictionary type: that stream is refused.
func TestMalformedDoPut(t *testing.T) {
	wh := t.TempDir()
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink { return newSink(tb.(*testing.T), icesink.Config{Warehouse: wh}) }, "dictionaries")
}
