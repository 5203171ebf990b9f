package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestFileSinkSpec(t *testing.T) {
	dir := t.TempDir()
	for raw, want := range map[string]string{
		"file:":                         "want file:DIR",
		"file://host/x":                 "want file:DIR",
		"file:" + dir + "?format=avro":  "format",
		"file:" + dir + "?colour=green": "unknown option(s) colour",
		"file:" + dir + "?partition_by=a&partition_by_day=b": "give one",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
	}
	for raw, want := range map[string]objsink.Format{
		"file:" + dir:                                     objsink.Parquet,
		"file:" + dir + "?format=jsonl":                   objsink.JSONL,
		"file:" + dir + "?format=csv":                     objsink.CSV,
		"file:" + dir + "?format=parquet":                 objsink.Parquet,
		"file:" + dir + "?partition_by=customer":          objsink.Parquet,
		"file:" + dir + "?partition_by_day=ts&format=csv": objsink.CSV,
	} {
		s, closeFn, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.NoError(t, err, raw)
		closeFn()
		require.Equal(t, want, s.(objSink).Format(), raw)
		require.Equal(t, flightsink.ExactlyOnce, flightsink.GuaranteeOf(s))
	}
}
