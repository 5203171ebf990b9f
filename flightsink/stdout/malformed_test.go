package stdout_test

import (
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsink/stdout"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md),
// in each format.
func TestMalformedDoPut(t *testing.T) {
	for _, f := range []stdout.Format{stdout.JSONL, stdout.CSV} {
		t.Run(string(f), func(t *testing.T) {
			h := harness(f, nil)
			var unsupported []string
			if f == stdout.CSV {
				unsupported = []string{"structs", "dictionaries"} // CSV has no nested or dictionary columns
			}
			doputtest.Run(t, func(tb testing.TB) flightsink.Sink { return h.NewSink(tb.(*testing.T)) }, unsupported...)
		})
	}
}
