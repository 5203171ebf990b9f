//go:build cgo

package adbc_test

import (
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/internal/testkit/adbctest"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md),
// on the SQLite driver.
func TestIntegrationMalformedDoPut(t *testing.T) {
	cfg, _ := adbctest.SQLiteConfig(t)
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink { return newSink(tb.(*testing.T), cfg) })
}
