package rabbitstream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/rabbitstream"
	"github.com/flightline/flightline/flightsink/sinktest"
)

// The sink against a plain confirmed producer of the same client, with
// deduplication (a producer name, publishing ids), publishing the same
// JSON rows pre-encoded, in frames of the same size, and waiting for all
// confirms per batch: what the sink adds is the encoding, the message-id
// and batch properties, and the fence check per batch.
//
//	go test -run '^$' -bench . -benchtime 20x ./flightsink/rabbitstream/
//
// Measured (RabbitMQ 3.10.8 on loopback, 2 busy cores, 10k-row batches of
// the sinktest schema): the sink 156k rows/s, the plain producer 305k
// rows/s: 0.51x (JSON encoding of the Arrow rows, a message-id per row and
// a QuerySequence per batch are the difference; not tuned yet).

const benchRows = 10000

func BenchmarkSink(b *testing.B) {
	u, _ := benchEnv(b)
	s, err := rabbitstream.New(context.Background(), rabbitstream.Config{URL: u})
	require.NoError(b, err)
	p := flightsink.Pipeline{ID: "bench", Target: fmt.Sprintf("fl_bench_%d", rand.Int64())}
	ctx := context.Background()
	w, _, err := s.Open(ctx, p)
	require.NoError(b, err)
	defer w.Close(ctx)
	rec := sinktest.Batch(memory.DefaultAllocator, 0, benchRows)
	defer rec.Release()
	b.ResetTimer()
	for i := range b.N {
		require.NoError(b, w.WriteBatch(ctx, rec, sinktest.CP(int64(i+1)*benchRows)))
	}
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkPlainProducer(b *testing.B) {
	_, e := benchEnv(b)
	name := fmt.Sprintf("fl_bench_plain_%d", rand.Int64())
	require.NoError(b, e.DeclareStream(name, nil))
	prod, err := e.NewProducer(name, stream.NewProducerOptions().SetProducerName("plain"))
	require.NoError(b, err)
	defer prod.Close()
	confirms := prod.NotifyPublishConfirmation()
	rec := sinktest.Batch(memory.DefaultAllocator, 0, benchRows)
	defer rec.Release()
	bodies := make([][]byte, benchRows)
	for r := range benchRows {
		bodies[r] = []byte(fmt.Sprintf(`{"id":%d,"name":"name-%d"}`, r, r))
	}
	b.ResetTimer()
	id := int64(0)
	for range b.N {
		var frame []message.StreamMessage
		size := 0
		for _, body := range bodies {
			id++
			m := amqp.NewMessage(body)
			m.SetPublishingId(id)
			frame = append(frame, m)
			size += len(body) + 64
			if size > 512<<10 {
				require.NoError(b, prod.BatchSend(frame))
				frame, size = nil, 0
			}
		}
		if len(frame) > 0 {
			require.NoError(b, prod.BatchSend(frame))
		}
		for got := 0; got < benchRows; {
			got += len(<-confirms)
		}
	}
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
}

// benchEnv is env for benchmarks, with the sink's socket settings.
func benchEnv(b *testing.B) (string, *stream.Environment) {
	u := os.Getenv("FLIGHTLINE_RABBITMQ_STREAM_URL")
	if u == "" {
		b.Skip("FLIGHTLINE_RABBITMQ_STREAM_URL not set")
	}
	pu, err := url.Parse(u)
	require.NoError(b, err)
	pw, _ := pu.User.Password()
	port, err := strconv.Atoi(pu.Port())
	require.NoError(b, err)
	e, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(pu.Hostname()).SetPort(port).
		SetUser(pu.User.Username()).SetPassword(pw).SetReadBuffer(0).SetWriteBuffer(0))
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	return u, e
}
