package kafka_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
)

// A broker that has just started answers OffsetFetch with
// COORDINATOR_NOT_AVAILABLE while it creates __consumer_offsets, for longer
// than kgo's request retries. A Read without a checkpoint must wait for the
// coordinator (within UnavailableAfter), not fail its first Next. Found by
// srctest (TestIntegrationKafkaConformance, first test on a fresh broker).
func TestKfakeReadWaitsForGroupCoordinator(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "fresh"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	produce(t, c.ListenAddrs(), "fresh", 0, 10, 0)

	var refused atomic.Int32
	c.ControlKey(int16(kmsg.OffsetFetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Load() >= 8 {
			return nil, nil, false // the cluster answers from now on
		}
		c.KeepControl()
		refused.Add(1)
		req := kr.(*kmsg.OffsetFetchRequest)
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Version = req.Version
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			rg.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src, err := kafka.New(context.Background(), kafka.Config{Brokers: c.ListenAddrs(), Topics: []string{"fresh"}, GroupID: "g", WithoutGroupMembership: true, AutoOffsetReset: kafka.Earliest, BatchWait: 20 * time.Millisecond},
		kafka.Allocator(mem), kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: "fresh"})
	require.NoError(t, err)
	defer rd.Close()
	rows := 0
	for rows < 10 {
		rec, _, err := rd.Next(ctx)
		require.NoError(t, err, "after %d refused OffsetFetch requests", refused.Load())
		rows += int(rec.NumRows())
		rec.Release()
	}
	require.EqualValues(t, 8, refused.Load())
}
