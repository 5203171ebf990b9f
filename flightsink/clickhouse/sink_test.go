package clickhouse_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/clickhouse"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/testkit/chtest"
)

func newSink(t *testing.T, f chtest.Front) *clickhouse.Sink {
	t.Helper()
	return newSinkWith(t, f, clickhouse.Config{})
}

// newSinkWith returns a sink on f with cfg's other fields.
func newSinkWith(t *testing.T, f chtest.Front, cfg clickhouse.Config) *clickhouse.Sink {
	t.Helper()
	cfg.Endpoint, cfg.User, cfg.Password = f.URL, f.User, f.Password
	s, err := clickhouse.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The suite reads back with plain SQL over HTTP (chtest, no sink code).
func TestIntegrationConformance(t *testing.T) {
	f := chtest.Need(t)
	sinktest.Run(t, sinktest.Harness{
		NewSink:   func(t *testing.T) flightsink.Sink { return newSink(t, f) },
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return f.IDs(t, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
		Parallel:  true,
	})
}
