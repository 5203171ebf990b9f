package gcs_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/gcs"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
func TestIntegrationGCSMalformedDoPut(t *testing.T) {
	endpoint := objsinktest.GCSEndpoint(t)
	bucket := objsinktest.NewBucket(t, endpoint)
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		b, err := gcs.New(context.Background(), gcs.Config{Bucket: bucket, Prefix: "lake", Endpoint: endpoint})
		require.NoError(tb, err)
		s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "gcs sink"})
		require.NoError(tb, err)
		return s
	})
}
