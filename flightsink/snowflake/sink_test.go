package snowflake_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/flightsink/snowflake"
	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// emulatorOpts are the options every test against fakesnow needs.
// MatchCaseInsensitive works around the emulator: its COPY … MATCH_BY_COLUMN_NAME
// = CASE_SENSITIVE compares the Parquet names with upper-cased table column
// names, so lower-case quoted columns (sinktest's "id", "name") load as NULL.
// Snowflake matches them exactly, and CASE_SENSITIVE stays the default.
// The stage is one per test process: the emulator has no REMOVE, and the
// orphan clean-up at Open lists the stage.
func emulatorOpts(extra ...snowflake.Option) []snowflake.Option {
	return append([]snowflake.Option{snowflake.MatchByColumnName(snowflake.MatchCaseInsensitive), snowflake.Stage(snowtest.Stage)}, extra...)
}

func newSink(t *testing.T, opts ...snowflake.Option) *snowflake.Sink {
	t.Helper()
	s, err := snowflake.New(context.Background(), snowtest.Config(t), emulatorOpts(opts...)...)
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
	})
}
