package pipelines_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	srcdelta "github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/kafkadecode"
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
	r, err := pipelines.KafkaToDelta(context.Background(), pipelines.KafkaConfig{
		Topic:         "orders",
		Pipeline:      pl,
		Source:        kafka.Config{Brokers: c.ListenAddrs(), BatchRows: 100, BatchWait: 20 * time.Millisecond, SessionTimeout: time.Second},
		SourceOptions: []kafka.Option{kafka.Allocator(mem), kafka.Logger(quiet)},
		Coordinator:   []coordinator.Option{coordinator.WithLogger(quiet), coordinator.Backoff(10*time.Millisecond, 200*time.Millisecond)},
	}, dir, pipelines.DeltaOptions(delta.Allocator(mem), delta.Logger(quiet)))
	require.NoError(t, err)
	check, err := delta.New(context.Background(), delta.Config{URI: dir}, delta.Logger(quiet))
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

type order struct {
	ID    int64   `arrow:"id,required"`
	Item  string  `arrow:"item"`
	Price float64 `arrow:"price"`
}

// KafkaToDelta over loopback Flight with JSON values stored as typed
// columns: the table has one column per value field, a JSON null value is
// a row of nulls, and nothing leaks on either side of the Flight hops.
func TestKafkaToDeltaLoopbackValueColumns(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	const n = 300
	for i := range n {
		v := fmt.Appendf(nil, `{"id":%d,"item":"i%d","price":%d.5}`, i, i, i)
		if i == 7 {
			v = []byte("null")
		}
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}).FirstErr())
	}
	cl.Close()

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	quiet := slog.New(slog.DiscardHandler)
	sc, err := kafkadecode.SchemaOf[order]()
	require.NoError(t, err)
	dir := t.TempDir()
	pl := flightsink.Pipeline{ID: "orders-to-delta"}
	r, err := pipelines.KafkaToDelta(context.Background(), pipelines.KafkaConfig{
		Topic:    "orders",
		Pipeline: pl,
		Source:   kafka.Config{Brokers: c.ListenAddrs(), WithoutGroupMembership: true, BatchRows: 64, BatchWait: 20 * time.Millisecond},
		SourceOptions: []kafka.Option{kafka.Allocator(mem),
			kafka.Logger(quiet),
			kafka.ValueDecoder(func() (kafkadecode.ValueDecoder, error) { return kafkadecode.NewJSONDecoder(sc) })},
		Coordinator: []coordinator.Option{coordinator.WithLogger(quiet), coordinator.Backoff(10*time.Millisecond, 200*time.Millisecond)},
	}, dir, pipelines.DeltaOptions(delta.Allocator(mem), delta.Logger(quiet)), pipelines.ValueColumns(), pipelines.Allocator(mem),
		pipelines.Loopback([]flightsrc.ServerOption{flightsrc.WithAllocator(mem), flightsrc.WithLogger(quiet)},
			[]flightsink.ServerOption{flightsink.WithAllocator(mem), flightsink.WithLogger(quiet)}))
	require.NoError(t, err)
	require.NotEmpty(t, r.SourceURL)
	require.NotEmpty(t, r.SinkURL)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	want := checkpoint.Positions{"orders/0": n / 2, "orders/1": n / 2}
	require.Eventually(t, func() bool {
		cp, err := r.Checkpoint(ctx)
		if err != nil || cp == nil {
			return false
		}
		p, err := checkpoint.Parse(cp)
		return err == nil && checkpoint.Covers(p, want)
	}, 50*time.Second, 20*time.Millisecond)
	stop()
	require.NoError(t, <-done)

	// Read the table back with Flightline's own Delta source.
	src, err := srcdelta.New(ctx, srcdelta.Config{URI: dir, Once: true}, srcdelta.Allocator(mem))
	require.NoError(t, err)
	rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: filepath.Base(dir)})
	require.NoError(t, err)
	defer rd.Close()
	names := []string{}
	for _, f := range rd.Schema().Fields() {
		names = append(names, f.Name+":"+f.Type.String())
	}
	require.Equal(t, []string{"partition:int32", "offset:int64", "timestamp:timestamp[us, tz=UTC]", "key:binary",
		"id:int64", "item:utf8", "price:float64", "headers:list<element: struct<key: utf8, value: binary nullable>>"}, names)
	ids := map[int64]int{}
	nulls := 0
	for {
		rec, _, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		col := rec.Column(4).(*array.Int64)
		item := rec.Column(5).(*array.String)
		for i := range col.Len() {
			if col.IsNull(i) {
				require.True(t, item.IsNull(i))
				nulls++
				continue
			}
			ids[col.Value(i)]++
		}
		rec.Release()
	}
	require.Equal(t, 1, nulls, "the null value is a row of nulls")
	require.Len(t, ids, n-1)
	for id, k := range ids {
		require.Equalf(t, 1, k, "id %d", id)
	}
}

// Kafka into any sink (here the in-memory one): every record arrives once,
// and a config without a sink or a pipeline id is refused.
func TestKafkaToMemory(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "helper"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("helper"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	const n = 300
	for i := range n {
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Key: fmt.Appendf(nil, "k%d", i)}).FirstErr())
	}
	cl.Close()

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	quiet := slog.New(slog.DiscardHandler)
	sink := flightsink.NewMemory()
	defer sink.Release()
	cfg := pipelines.KafkaConfig{
		Topic:         "helper",
		Pipeline:      flightsink.Pipeline{ID: "helper-pipe", Target: "t"},
		Source:        kafka.Config{Brokers: c.ListenAddrs(), BatchWait: 10 * time.Millisecond, SessionTimeout: time.Second},
		SourceOptions: []kafka.Option{kafka.Allocator(mem), kafka.Logger(quiet)},
		Coordinator:   []coordinator.Option{coordinator.WithLogger(quiet), coordinator.Backoff(10*time.Millisecond, 100*time.Millisecond)},
	}
	r, err := pipelines.Kafka(cfg, sink)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	rows := func() int {
		total := 0
		for _, b := range sink.Batches("t") {
			total += int(b.NumRows())
			b.Release()
		}
		return total
	}
	require.Eventually(t, func() bool { return rows() >= n }, 20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	seen := map[string]int{}
	for _, b := range sink.Batches("t") {
		keys := b.Column(3).(*array.BinaryView)
		for i := range keys.Len() {
			seen[string(keys.Value(i))]++
		}
		b.Release()
	}
	require.Len(t, seen, n)
	for k, c := range seen {
		require.Equal(t, 1, c, k)
	}

	_, err = pipelines.Kafka(pipelines.KafkaConfig{Topic: "helper"}, sink)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = pipelines.Kafka(cfg, nil)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = pipelines.Kafka(cfg, sink, pipelines.DeltaOptions(delta.Logger(quiet)))
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}
