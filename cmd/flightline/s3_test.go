package main

import (
	"testing"

	"github.com/stretchr/testify/require"

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
	s, closeFn, err := openSink(testEnv, "s3:my-bucket/events?AWS_REGION=eu-west-1&AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true&part_size=5242880", endpoint.ClientConfig{})
	require.NoError(t, err, "opening contacts nothing")
	closeFn()
	require.NotNil(t, s)
}
