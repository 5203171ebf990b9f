package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestS3SinkSpec(t *testing.T) {
	_, _, err := openSink(testEnv, "s3://my-bucket/events", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "want s3:BUCKET/PREFIX (no //), e.g. s3:my-bucket/events")
	_, _, err = openSink(testEnv, "s3:", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "want s3:BUCKET/PREFIX")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?colour=blue", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "unknown option(s) colour")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?part_size=big", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "part_size")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?commit=sometimes", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "commit")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?commit=at-least-once&format=csv", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "commit=at-least-once writes Parquet objects without partitions")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?commit=at-least-once&partition_by=region", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "commit=at-least-once writes Parquet objects without partitions")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?partition_by=a&partition_by_day=b", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "partition_by and partition_by_day: give one")
	_, _, err = openSink(testEnv, "s3:x/events", endpoint.ClientConfig{})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "a bucket name too short")

	for raw, want := range map[string]flightsink.Guarantee{
		"s3:my-bucket/events?AWS_REGION=eu-west-1&AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true&part_size=5242880":                      flightsink.ExactlyOnce,
		"s3:my-bucket/events?format=jsonl&partition_by_day=ts&AWS_REGION=eu-west-1":                                                               flightsink.ExactlyOnce,
		"s3:my-bucket/events?commit=at-least-once&AWS_REGION=eu-west-1&AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true&part_size=5242880": flightsink.AtLeastOnce,
	} {
		s, closeFn, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.NoError(t, err, "opening contacts nothing: %s", raw)
		require.Equal(t, want, flightsink.GuaranteeOf(s), raw)
		if o, ok := s.(s3ObjSink); ok && strings.Contains(raw, "format=jsonl") {
			require.Equal(t, objsink.JSONL, o.Format())
		}
		closeFn()
	}
}
