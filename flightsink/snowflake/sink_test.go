package snowflake_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/flightsink/snowflake"
	"github.com/flightline/flightline/internal/snowconn"
	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// emulatorConfig is cfg with the settings every test against fakesnow needs.
// MatchCaseInsensitive works around the emulator: its COPY … MATCH_BY_COLUMN_NAME
// = CASE_SENSITIVE compares the Parquet names with upper-cased table column
// names, so lower-case quoted columns (sinktest's "id", "name") load as NULL.
// Snowflake matches them exactly, and CASE_SENSITIVE stays the default.
// The stage is one per test process: the emulator has no REMOVE, and the
// orphan clean-up at Open lists the stage.
func emulatorConfig(cfg snowconn.Config) snowflake.Config {
	return snowflake.Config{Config: cfg, Match: snowflake.MatchCaseInsensitive, Stage: snowtest.Stage}
}

// retryFor sets the sink's RetryFor, for newSink.
func retryFor(d time.Duration) func(*snowflake.Config) {
	return func(c *snowflake.Config) { c.RetryFor = d }
}

func newSink(t *testing.T, edits ...func(*snowflake.Config)) *snowflake.Sink {
	t.Helper()
	cfg := emulatorConfig(snowtest.Config(t))
	for _, e := range edits {
		e(&cfg)
	}
	s, err := snowflake.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// The suite reads back with plain SQL (snowtest.SQLIDs, no sink code);
// the other tests of the package and the kill test read with
// snowflake-connector-python.
func TestIntegrationConformance(t *testing.T) {
	db := snowtest.DB(t)
	sinktest.Run(t, sinktest.Harness{
		NewSink: func(t *testing.T) flightsink.Sink { return newSink(t) },
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			return snowtest.SQLIDs(t, db, p.Target)
		},
		Guarantee: flightsink.ExactlyOnce,
		Parallel:  true,
	})
}
