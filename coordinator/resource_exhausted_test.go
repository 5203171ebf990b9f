package coordinator_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
)

// A batch over the sink's message limit is refused with RESOURCE_EXHAUSTED
// before the sink sees it; sending it again cannot succeed, so the
// coordinator stops at once instead of retrying it forever
// (docs/protocol.md, "Errors").
func TestOversizedBatchIsNotRetried(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the server stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 10))
	flight.RegisterFlightServiceServer(gs, flightsink.NewServer(sink, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	rs, err := flightsink.Dial("grpc://"+lis.Addr().String(), flightsink.ClientConfig{})
	require.NoError(t, err)
	defer rs.Close()

	// 10k generated orders are well over 64 KiB.
	c, err := coordinator.New(newGen(t, mem, 20_000, 10_000), rs, "orders", flightsink.Pipeline{ID: "big", Target: "t"},
		coordinator.WithLogger(quiet), coordinator.Backoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = c.Run(ctx)
	require.NoError(t, ctx.Err(), "Run kept retrying an oversized batch until the test's deadline")
	require.Error(t, err)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Zero(t, c.Stats().Restarts)
	require.Empty(t, ids(sink, "t"))
}
