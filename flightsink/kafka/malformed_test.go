package kafka_test

import (
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
func TestIntegrationMalformedDoPut(t *testing.T) {
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		return newSinkWith(tb.(*testing.T), kafkasink.Config{CreateTopics: 1, CreateReplicationFactor: 1})
	},
		"strings", "int64s", "lists", "structs", "dictionaries", "strings lz4", "strings zstd") // no "value" column
}
