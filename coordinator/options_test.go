package coordinator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// A source server, a sink server and a coordinator given one
// prometheus.Registerer share one set of Flightline metrics on it; nil
// loggers mean slog.Default() on every path that logs (a failed commit
// makes the sink server and the coordinator warn).
func TestSharedRegistererAndNilLoggers(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	reg := prometheus.NewRegistry()
	sink := flightsink.NewMemory()
	defer sink.Release()
	sink.FailCommit(func(_ flightsink.Pipeline, n int) error {
		if n == 2 {
			return fmt.Errorf("%w: injected outage", flightline.ErrUnavailable)
		}
		return nil
	})
	srcURL := flighttest.Serve(t, flightsrc.NewServer(newGen(t, mem, 2000, 500), flightsrc.WithLogger(nil),
		flightsrc.WithAllocator(nil), flightsrc.WithMetrics(reg)), endpoint.ServerConfig{})
	sinkURL := flighttest.Serve(t, flightsink.NewServer(sink, flightsink.WithLogger(nil), flightsink.WithAllocator(nil),
		flightsink.WithMetrics(reg)), endpoint.ServerConfig{})
	src, err := flightsrc.DialWithAllocator(srcURL, flightsrc.ClientConfig{}, mem)
	require.NoError(t, err)
	defer src.Close()
	rs, err := flightsink.Dial(sinkURL, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer rs.Close()

	c, err := coordinator.New(src, rs, "orders", flightsink.Pipeline{ID: "m", Target: "t"},
		coordinator.WithLogger(nil), coordinator.WithMetrics(reg), coordinator.Backoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	requireExactlyOnce(t, ids(sink, "t"), 2000)
	require.Equal(t, 1, c.Stats().Restarts)

	rows, err := testutil.GatherAndCount(reg, "flightline_rows_total")
	require.NoError(t, err)
	require.Equal(t, 3, rows, "one series per role: source, sink, coordinator")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	byRole := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "flightline_rows_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "role" {
					byRole[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	require.Equal(t, 2000.0, byRole["coordinator"])
	require.Equal(t, 2000.0, byRole["sink"])
	require.GreaterOrEqual(t, byRole["source"], 2000.0, "the source also counts what it resent after the outage")
}

// The default backoff grows from 200 ms to at most 5 s, so a pipeline
// resumes within about 5 s of a long outage's end (with 30 s, as before
// issue 16, it could wait 30 s after the service was back).
func TestDefaultBackoffBound(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sink := flightsink.NewMemory()
	defer sink.Release()
	c, err := coordinator.New(newGen(t, mem, 10, 5), sink, "orders", flightsink.Pipeline{ID: "b"})
	require.NoError(t, err)
	var longest time.Duration
	for n := 1; n <= 40; n++ {
		d := coordinator.BackoffOf(c, n)
		require.LessOrEqual(t, d, 5*time.Second, "attempt %d", n)
		longest = max(longest, d)
	}
	require.GreaterOrEqual(t, longest, 2500*time.Millisecond, "the backoff grows to its bound")
	require.LessOrEqual(t, coordinator.BackoffOf(c, 1), 200*time.Millisecond)
}
