package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/testkit/heaptest"
	"github.com/flightline/flightline/kafkadecode"
)

// produceSized writes n records of about size value bytes (JSON objects
// with an incompressible pad, so compressed fetches stay large) round robin
// over topic's partitions.
func produceSized(t testing.TB, brokers []string, topic string, n, size, batchBytes int, codec kgo.CompressionCodec) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(int32(batchBytes)))
	require.NoError(t, err)
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const hex = "0123456789abcdef"
	noise := make([]byte, 1<<16+size)
	for j := range noise {
		noise[j] = hex[rng.IntN(16)]
	}
	for i := range n {
		at := rng.IntN(1 << 16)
		pad := noise[at : at+size]
		cl.Produce(context.Background(), &kgo.Record{
			Key:   fmt.Appendf(nil, "key-%08d", i),
			Value: fmt.Appendf(nil, `{"id":%d,"pad":"%s"}`, i, pad),
		}, func(_ *kgo.Record, err error) { require.NoError(t, err) })
	}
	require.NoError(t, cl.Flush(context.Background()))
}

// The source's live heap must not depend on the length of the stream: read
// a stream ~60× longer (16 MB) than the source's fetch buffers and check the live
// heap after a collection at several points against its value early on.
// Before the fix, every cut's carried rows kept every fetch buffer of their
// partition alive, so the heap grew by the whole stream.
func TestKfakeSourceMemoryFlat(t *testing.T) {
	const (
		partitions = 4
		batchRows  = 251                         // prime: a carry rarely comes out empty, which would break the chain
		records    = partitions * 16 * batchRows // whole batches only
		valueLen   = 1000
	)
	for _, tc := range []struct {
		name       string
		codec      kgo.CompressionCodec
		batchBytes int // producer batches; compressed batches are larger, compressing is slow under -race
		format     func() (kafkadecode.ValueDecoder, error)
	}{
		{"raw,uncompressed", kgo.NoCompression(), 16 << 10, nil},
		{"json,snappy", kgo.SnappyCompression(), 128 << 10, func() (kafkadecode.ValueDecoder, error) {
			// "pad" is not in the schema: skipped, it costs no decoding.
			sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
			return kafkadecode.NewJSONDecoder(sc)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := fakeCluster(t, partitions, "long")
			produceSized(t, brokers, "long", records, valueLen, tc.batchBytes, tc.codec)
			mem := checkedMem(t)
			cfg := kafka.Config{Brokers: brokers, Topics: []string{"long"}, GroupID: "mem",
				WithoutGroupMembership: true, BatchRows: batchRows, BatchWait: time.Hour,
				FetchMaxBytes: 256 << 10, PartitionMaxBytes: 64 << 10, MaxBufferedBytes: 256 << 10, MaxParkedBytes: 512 << 10}
			opts := []kafka.Option{kafka.Allocator(mem), kafka.Logger(quietLog())}
			if tc.format != nil {
				opts = append(opts, kafka.ValueDecoder(tc.format))
			}
			src, err := kafka.New(context.Background(), cfg, opts...)
			require.NoError(t, err)
			defer src.Close()
			start := checkpoint.Positions{}
			for p := range partitions {
				start[fmt.Sprintf("long/%d", p)] = 0
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: "long", After: start.Encode()})
			require.NoError(t, err)
			defer rd.Close()

			g := heaptest.New(t, 8<<20) // what is in flight varies by ~3 MiB
			rows, next := 0, 1
			for rows < records {
				rec, _, err := rd.Next(ctx)
				require.NoError(t, err)
				rows += int(rec.NumRows())
				rec.Release()
				if rows >= next*records/10 { // every 10%; the first is the baseline
					g.Sample(fmt.Sprintf("%d%%", 100*rows/records))
					next = 10*rows/records + 1
				}
			}
			require.Equal(t, records, rows)
			g.Check()
		})
	}
}
