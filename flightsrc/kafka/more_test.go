package kafka_test

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/viewcopy"
	"github.com/flightline/flightline/kafkadecode"
)

// The source served over Flight DoGet, read by the coordinator through
// flightsrc.Dial, with the advisory commit reaching the group and the lag
// gauges.
func TestKfakeOverFlightWithLagMetrics(t *testing.T) {
	brokers := fakeCluster(t, 2, "clicks")
	produce(t, brokers, "clicks", 0, 800, 0)
	mem := checkedMem(t)
	reg := prometheus.NewRegistry()
	src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"clicks"}, BatchRows: 100, BatchWait: 20 * time.Millisecond, SessionTimeout: time.Second},
		kafka.Allocator(mem), kafka.Logger(quietLog()), kafka.Registerer(reg))
	require.NoError(t, err)
	defer src.Close()

	gs, _, err := endpoint.NewServer(endpoint.ServerConfig{})
	require.NoError(t, err)
	flight.RegisterFlightServiceServer(gs, flightsrc.NewServer(src, flightsrc.WithAllocator(mem),
		flightsrc.WithLogger(slog.New(slog.DiscardHandler)), flightsrc.WithHeartbeat(50*time.Millisecond)))
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
	require.Equal(t, "clicks", streams[0].Name)
	// The server compacts the key and value views (the source is a
	// flightsrc.WireCompacter): the listed schema has them as binary.
	require.True(t, viewcopy.Schema(kafkadecode.Schema("clicks", nil)).Equal(streams[0].Schema), "%s", streams[0].Schema)

	sink := flightsink.NewMemory()
	defer sink.Release()
	pl := flightsink.Pipeline{ID: "clicks-pipe", Target: "clicks"}
	runUntil(t, cl, sink, "clicks", pl, 800)
	checkExactlyOnce(t, sinkRows(t, sink, "clicks"), 800)

	// Lag: all fetched; after the advisory commits, nothing unacknowledged.
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(gaugeOf(t, reg, "flightline_kafka_lag_fetched_records", "0")) == 0 &&
			testutil.ToFloat64(gaugeOf(t, reg, "flightline_kafka_lag_acknowledged_records", "0")) == 0
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, float64(400), testutil.ToFloat64(gaugeOf(t, reg, "flightline_kafka_high_watermark", "1")))
}

func gaugeOf(t *testing.T, reg *prometheus.Registry, name, partition string) prometheus.Collector {
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "partition" && l.GetValue() == partition {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
					g.Set(m.GetGauge().GetValue())
					return g
				}
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
	g.Set(-1)
	return g
}

// Undecodable JSON values go to the dead-letter handler, the rest arrive;
// without a handler the reader fails with ErrInvalidInput naming the
// offset, rather than dropping them.
func TestKfakeDeadLetters(t *testing.T) {
	brokers := fakeCluster(t, 1, "json")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("json"))
	require.NoError(t, err)
	for i, v := range []string{`{"id":1}`, `{"id":"x"}`, `{"id":3}`, `not json`, `{"id":5}`} {
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte{byte('a' + i)}, Value: []byte(v)}).FirstErr())
	}
	cl.Close()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	vd := func() (kafkadecode.ValueDecoder, error) { return kafkadecode.NewJSONDecoder(schema) }
	mem := checkedMem(t)

	var (
		mu   sync.Mutex
		dead []int64
	)
	src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"json"}, GroupID: "g", WithoutGroupMembership: true, BatchWait: 10 * time.Millisecond},
		kafka.ValueDecoder(vd), kafka.Allocator(mem), kafka.Logger(quietLog()), kafka.DeadLetters(func(_ context.Context, topic string, ls []kafkadecode.DeadLetter) error {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range ls {
				dead = append(dead, l.Offset)
			}
			return nil
		}))
	require.NoError(t, err)
	sink := flightsink.NewMemory()
	defer sink.Release()
	runUntil(t, src, sink, "json", flightsink.Pipeline{ID: "j", Target: "json"}, 3)
	src.Close()
	require.Equal(t, []int64{1, 3}, dead)
	require.Equal(t, 3, countRows(sink, "json"))

	strict, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"json"}, GroupID: "g2", WithoutGroupMembership: true},
		kafka.ValueDecoder(vd), kafka.Allocator(mem), kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer strict.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := coordinator.New(strict, flightsink.NewNull(), "json", flightsink.Pipeline{ID: "strict"}, coordinator.WithLogger(quietLog()))
	require.NoError(t, err)
	err = c.Run(ctx)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Contains(t, err.Error(), "offset 1")
}

// A broker that goes away mid-stream: the fetcher retries, then Next fails
// with ErrUnavailable (retryable), naming the brokers.
func TestKfakeBrokerLostMidStream(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "gone"))
	require.NoError(t, err)
	brokers := c.ListenAddrs()
	produce(t, brokers, "gone", 0, 50, 0)
	mem := checkedMem(t)
	src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"gone"}, GroupID: "g", WithoutGroupMembership: true, BatchWait: 10 * time.Millisecond, UnavailableAfter: time.Second},
		kafka.Allocator(mem), kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: "gone"})
	require.NoError(t, err)
	defer rd.Close()
	rows := 0
	for rows < 50 {
		rec, _, err := rd.Next(ctx)
		require.NoError(t, err)
		rows += int(rec.NumRows())
		rec.Release()
	}
	c.Close()
	for {
		rec, _, err := rd.Next(ctx)
		if err != nil {
			require.ErrorIs(t, err, flightline.ErrUnavailable)
			require.True(t, flightline.IsRetryable(err))
			require.Contains(t, err.Error(), brokers[0])
			break
		}
		rec.Release()
	}
}

// Heartbeats of a schema whose empty columns allocate (list<struct>) are
// released: served over Flight with a tiny heartbeat interval while idle.
func TestKfakeHeartbeatsReleased(t *testing.T) {
	brokers := fakeCluster(t, 1, "idle")
	produce(t, brokers, "idle", 0, 10, 0)
	mem := checkedMem(t)
	src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"idle"}, GroupID: "g", WithoutGroupMembership: true, BatchWait: 5 * time.Millisecond},
		kafka.Allocator(mem), kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer src.Close()
	gs, _, err := endpoint.NewServer(endpoint.ServerConfig{})
	require.NoError(t, err)
	flight.RegisterFlightServiceServer(gs, flightsrc.NewServer(src, flightsrc.WithAllocator(mem),
		flightsrc.WithLogger(slog.New(slog.DiscardHandler)), flightsrc.WithHeartbeat(5*time.Millisecond)))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go gs.Serve(lis)
	defer gs.Stop()
	cl, err := flightsrc.DialWithAllocator("grpc://"+lis.Addr().String(), flightsrc.ClientConfig{}, mem)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rd, err := cl.Read(ctx, flightsrc.ReadRequest{Stream: "idle"})
	require.NoError(t, err)
	defer rd.Close()
	rows, heartbeats := 0, 0
	for heartbeats < 20 {
		rec, _, err := rd.Next(ctx)
		require.NoError(t, err)
		if rec.NumRows() == 0 && rows == 10 {
			heartbeats++
		}
		rows += int(rec.NumRows())
		rec.Release()
	}
}
