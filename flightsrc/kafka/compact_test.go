package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/endpoint"
)

// The Kafka source served over Flight ships batches about their own size
// with plain binary keys and values (not the fetch buffers their views
// point into), and keeps exactly-once: flightsrc.Server honours its
// WireCompacter without being told.
func TestKfakeCompactedOverFlight(t *testing.T) {
	brokers := fakeCluster(t, 2, "orders")
	produce(t, brokers, "orders", 0, 2000, 0)
	mem := checkedMem(t)
	src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"orders"}, BatchRows: 100, WithoutGroupMembership: true, BatchWait: 20 * time.Millisecond},
		kafka.Allocator(mem), kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer src.Close()

	gs, _, err := endpoint.NewServer(endpoint.ServerConfig{})
	require.NoError(t, err)
	flight.RegisterFlightServiceServer(gs, flightsrc.NewServer(src, flightsrc.WithAllocator(mem),
		flightsrc.WithLogger(slog.New(slog.DiscardHandler))))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go gs.Serve(lis)
	defer gs.Stop()
	cl, err := flightsrc.DialWithAllocator("grpc://"+lis.Addr().String(), flightsrc.ClientConfig{}, mem)
	require.NoError(t, err)
	defer cl.Close()

	streams, err := cl.Streams(context.Background())
	require.NoError(t, err)
	require.Len(t, streams, 1)
	require.Equal(t, arrow.BINARY, streams[0].Schema.Field(3).Type.ID(), "key")
	require.Equal(t, arrow.BINARY, streams[0].Schema.Field(4).Type.ID(), "value")

	sink := flightsink.NewMemory()
	defer sink.Release()
	pl := flightsink.Pipeline{ID: "p", Target: "orders"}
	co, err := coordinator.New(cl, sink, "orders", pl, coordinator.WithLogger(quietLog()))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- co.Run(rctx) }()
	require.Eventually(t, func() bool { return countRows(sink, "orders") >= 2000 }, 25*time.Second, 10*time.Millisecond)
	stop()
	require.NoError(t, <-done)
	st := co.Stats()
	require.Less(t, st.Bytes/st.Rows, int64(200), "bytes per row moved: the batches carry only their own values")

	seen := map[string]int{}
	for _, b := range sink.Batches("orders") {
		keys := b.Column(3).(*array.Binary)
		for i := range keys.Len() {
			seen[string(keys.Value(i))]++
		}
		b.Release()
	}
	require.Len(t, seen, 2000)
	for i := range 2000 {
		require.Equalf(t, 1, seen[fmt.Sprintf("k%d", i)], "k%d", i)
	}
}
