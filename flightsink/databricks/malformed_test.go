package databricks_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/internal/testkit/uctest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md),
// on tables of the fake catalog.
func TestIntegrationMalformedDoPut(t *testing.T) {
	e := uctest.NewMotoEnv(t)
	e.AutoExternal("main.flightline", fmt.Sprintf("s3://%s/malformed-%d", uctest.Bucket, time.Now().UnixNano()))
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink { return newSink(tb.(*testing.T), e, "main.flightline.default") },
		"dictionaries") // as the Delta sink
}
