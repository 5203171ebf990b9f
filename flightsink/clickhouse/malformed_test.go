package clickhouse_test

import (
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/internal/testkit/chtest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
// The sink maps no Arrow list, struct or dictionary to a ClickHouse type: those
// streams are refused.
func TestIntegrationMalformedDoPut(t *testing.T) {
	f := chtest.Need(t)
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink { return newSink(tb.(*testing.T), f) }, "lists", "structs", "dictionaries")
}
