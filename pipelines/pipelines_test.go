package pipelines_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/pipelines"
)

// KafkaToDelta on an embedded kfake cluster into a local table: the
// table's checkpoint reaches the end of every partition.
func TestKafkaToDelta(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	for i := range 400 {
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr())
	}
	cl.Close()

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	quiet := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	pl := flightsink.Pipeline{ID: "orders-to-delta"}
	r, err := pipelines.KafkaToDelta(context.Background(), kafka.PipelineConfig{
		Topic:       "orders",
		Pipeline:    pl,
		Source:      []kafka.Option{kafka.Brokers(c.ListenAddrs()...), kafka.BatchRows(100), kafka.BatchWait(20 * time.Millisecond), kafka.Allocator(mem), kafka.Logger(quiet), kafka.SessionTimeout(time.Second)},
		Coordinator: []coordinator.Option{coordinator.WithLogger(quiet), coordinator.Backoff(10*time.Millisecond, 200*time.Millisecond)},
	}, dir, delta.Allocator(mem), delta.Logger(quiet))
	require.NoError(t, err)
	check, err := delta.New(context.Background(), dir, delta.Logger(quiet))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	want := checkpoint.Positions{"orders/0": 200, "orders/1": 200}
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			t.Fatalf("pipeline ended: %v", err)
		default:
		}
		cp, err := check.Checkpoint(ctx, pl)
		if err != nil || cp == nil {
			return false
		}
		p, err := checkpoint.Parse(cp)
		return err == nil && checkpoint.Covers(p, want)
	}, 50*time.Second, 50*time.Millisecond)
	stop()
	require.NoError(t, <-done)
}
