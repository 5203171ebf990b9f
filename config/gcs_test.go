package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestGCSSinkSpec(t *testing.T) {
	for raw, want := range map[string]string{
		"gcs://b/p?endpoint=http://127.0.0.1:1": "want gcs:BUCKET/PREFIX",
		"gcs:":                                  "want gcs:BUCKET/PREFIX",
		"gcs:b/p?endpoint=http://127.0.0.1:1&colour=green":                      "unknown option(s) colour",
		"gcs:b/p?endpoint=http://127.0.0.1:1&format=orc":                        "format",
		"gcs:b/p?endpoint=http://127.0.0.1:1&partition_by=a&partition_by_day=b": "give one",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
	}
	s, closeFn, err := openSink(testEnv, "gcs:b/p?endpoint=http://127.0.0.1:1&format=jsonl&partition_by_day=ts", endpoint.ClientConfig{})
	require.NoError(t, err, "opening contacts nothing")
	closeFn()
	require.Equal(t, objsink.JSONL, s.(objSink).Format())
	require.Equal(t, flightsink.ExactlyOnce, flightsink.GuaranteeOf(s))
}
