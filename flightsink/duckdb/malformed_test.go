//go:build cgo

package duckdb_test

import (
	"path/filepath"
	"testing"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsink/duckdb"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md).
func TestIntegrationMalformedDoPut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "malformed.duckdb")
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink { return newSink(tb.(*testing.T), duckdb.Config{Path: path}) })
}
