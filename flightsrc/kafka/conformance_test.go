package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/flightsrc/srctest"
	"github.com/flightline/flightline/kafkadecode"
)

// conformance is the Kafka source's srctest harness on brokers: a fresh
// topic of 3 partitions per stream, records appended in order (key
// "k<id>") round-robin over the partitions, so every batch, which holds
// one partition, covers a few ids and resumes are checked per partition.
//
// The source runs without group membership: with it a Read's assignment
// arrives through a rebalance that ends the first Reader with
// ErrRebalanced (retried by the coordinator, not by the suite); membership
// has its own tests. The group is configured: the ticket of GetFlightInfo's
// endpoint names no pipeline, and without a group_id the source refuses a
// read without one (INVALID_ARGUMENT). Batches cut by BatchWait depend on timing, so the
// source does not declare deterministic boundaries (TestKfakeDeterministic
// Boundaries checks the row-cut ones).
func conformance(brokers []string) srctest.Harness {
	var topics atomic.Int64
	return srctest.Harness{
		NewStream: func(t *testing.T) string {
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
			require.NoError(t, err)
			defer cl.Close()
			name := fmt.Sprintf("srctest-%d-%d", time.Now().UnixNano(), topics.Add(1))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, name)
			require.NoError(t, err)
			require.NoError(t, resp.Err)
			return name
		},
		Append: func(t *testing.T, topic string, from, to int64) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			require.NoError(t, err)
			defer cl.Close()
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Partition: int32(i % 3), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
		},
		NewSource: func(t *testing.T, mem memory.Allocator, topic string) flightsrc.Source {
			s, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{topic}, GroupID: topic + "-g", WithoutGroupMembership: true, AutoOffsetReset: kafka.Earliest, BatchRows: 4, BatchWait: 30 * time.Millisecond},
				kafka.Allocator(mem), kafka.Logger(quietLog()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Records: func(t *testing.T, topic string, rec arrow.RecordBatch) []srctest.Record {
			idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
			parts := rec.Column(idx(kafkadecode.ColPartition)).(*array.Int32)
			offs := rec.Column(idx(kafkadecode.ColOffset)).(*array.Int64)
			// binary_view in-process; binary over Flight, where the server
			// compacts the views (flightsrc.WireCompacter).
			keys := rec.Column(idx(kafkadecode.ColKey)).(interface{ Value(int) []byte })
			out := make([]srctest.Record, rec.NumRows())
			for i := range out {
				k := string(keys.Value(i))
				id, err := strconv.ParseInt(k[1:], 10, 64)
				require.NoErrorf(t, err, "key %q", k)
				out[i] = srctest.Record{ID: id, Partition: fmt.Sprintf("%s/%d", topic, parts.Value(i)), Offset: offs.Value(i)}
			}
			return out
		},
	}
}

func TestKfakeConformance(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	srctest.Run(t, conformance(c.ListenAddrs()))
}

func TestIntegrationKafkaConformance(t *testing.T) {
	srctest.Run(t, conformance(realBroker(t)))
}
