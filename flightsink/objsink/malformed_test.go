package objsink_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsink/objsink"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md),
// on the local backend (the file: kind) in each format.
func TestMalformedDoPut(t *testing.T) {
	for _, f := range []objsink.Format{objsink.Parquet, objsink.JSONL, objsink.CSV} {
		t.Run(string(f), func(t *testing.T) {
			root := t.TempDir()
			var unsupported []string
			if f == objsink.CSV {
				unsupported = []string{"structs", "dictionaries"} // CSV has no nested or dictionary columns
			}
			doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
				b, err := objsink.NewLocal(root)
				require.NoError(tb, err)
				s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "file sink", Format: f})
				require.NoError(tb, err)
				return s
			}, unsupported...)
		})
	}
}
