package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// gatedSource holds every Read after the first until gate is closed.
type gatedSource struct {
	flightsrc.Source
	mu    sync.Mutex
	reads int
	gate  chan struct{}
}

func (s *gatedSource) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	s.mu.Lock()
	s.reads++
	n := s.reads
	s.mu.Unlock()
	if n > 1 {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Source.Read(ctx, req)
}

// The failover of docs/chaining.md, in process over Flight: coordinator B
// writes until its stream breaks; while it waits to retry, coordinator D
// is started on the same pipeline and runs the stream to its end; then B
// retries. By default B rejoins its own claim, which the sink refuses
// because D claimed the pipeline since: B stops with ErrReplaced and
// claims nothing. With Takeover, B claims anew, as every retry did before.
func TestReplacedCoordinatorStops(t *testing.T) {
	for _, takeover := range []bool{false, true} {
		t.Run(fmt.Sprintf("takeover=%v", takeover), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
			sink := flightsink.NewMemory()
			defer sink.Release()
			broke := make(chan struct{})
			sink.FailCommit(func(_ flightsink.Pipeline, n int) error {
				if n == 3 { // B's fourth commit: its stream breaks
					close(broke)
					return fmt.Errorf("%w: injected outage", flightline.ErrUnavailable)
				}
				return nil
			})
			url := flighttest.Serve(t, flightsink.NewServer(sink, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)), endpoint.ServerConfig{})
			dial := func() *flightsink.Client {
				c, err := flightsink.Dial(url, flightsink.ClientConfig{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			p := flightsink.Pipeline{ID: "failover"}
			const rows = 20_000

			bsrc := &gatedSource{Source: newGen(t, mem, rows, 500), gate: make(chan struct{})}
			b, err := coordinator.New(bsrc, dial(), "orders", p, coordinator.WithLogger(quiet),
				coordinator.Backoff(time.Millisecond, time.Millisecond), coordinator.Window(1), coordinator.Takeover(takeover))
			require.NoError(t, err)
			bdone := make(chan error, 1)
			go func() { bdone <- b.Run(context.Background()) }()
			<-broke

			d, err := coordinator.New(newGen(t, mem, rows, 500), dial(), "orders", p, coordinator.WithLogger(quiet))
			require.NoError(t, err)
			require.NoError(t, d.Run(context.Background()), "D, started later, runs to the end")
			close(bsrc.gate) // B's retry reads again and claims

			err = <-bdone
			if takeover {
				require.NoError(t, err, "with Takeover, B claims anew (and finds the stream done)")
			} else {
				require.ErrorIs(t, err, flightline.ErrReplaced)
				require.ErrorIs(t, err, flightline.ErrFenced, "a replaced coordinator is a fenced one")
				require.False(t, flightline.IsRetryable(err))
				require.Contains(t, err.Error(), `pipeline "failover" was claimed by a newer coordinator`)
				require.Contains(t, err.Error(), "start it again to take over")
			}
			requireExactlyOnce(t, ids(sink, ""), rows)
		})
	}
}

// failFirstRead fails its first Read as a transient outage.
type failFirstRead struct {
	flightsrc.Source
	failed bool
}

func (s *failFirstRead) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	if !s.failed {
		s.failed = true
		return nil, fmt.Errorf("%w: injected outage before the first batch", flightline.ErrUnavailable)
	}
	return s.Source.Read(ctx, req)
}

// A retry before the first acknowledgement claims anew: nothing shows that
// the first attempt's claim was made (here it failed before its stream
// started, so the sink's newest claim is still an older coordinator's),
// and a rejoin would stop the newest coordinator behind an older one.
func TestRetryBeforeFirstAckClaimsAnew(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := flightsink.NewMemory()
	defer sink.Release()
	url := flighttest.Serve(t, flightsink.NewServer(sink, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)), endpoint.ServerConfig{})
	dial := func() *flightsink.Client {
		c, err := flightsink.Dial(url, flightsink.ClientConfig{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	p := flightsink.Pipeline{ID: "p"}
	old, err := coordinator.New(newGen(t, mem, 1_000, 500), dial(), "orders", p, coordinator.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, old.Run(context.Background()))

	c, err := coordinator.New(&failFirstRead{Source: newGen(t, mem, 3_000, 500)}, dial(), "orders", p, coordinator.WithLogger(quiet),
		coordinator.Backoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	err = c.Run(context.Background())
	require.False(t, errors.Is(err, flightline.ErrReplaced), "got %v", err)
	require.NoError(t, err)
	require.Equal(t, 1, c.Stats().Restarts)
	requireExactlyOnce(t, ids(sink, ""), 3_000)
}
