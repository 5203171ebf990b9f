package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
)

func quietLog() *slog.Logger {
	if os.Getenv("FLIGHTLINE_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func fakeCluster(t *testing.T, partitions int, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// produce writes n records to topic, spread round-robin over its
// partitions, with value "v<i>" and key "k<i>". If aborted > 0 it first
// writes that many records in a transaction it aborts, which read_committed
// must not return.
func produce(t testing.TB, brokers []string, topic string, from, n, aborted int, opts ...kgo.Opt) {
	t.Helper()
	ctx := context.Background()
	if aborted > 0 {
		tx, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
			kgo.TransactionalID(fmt.Sprintf("aborter-%d", time.Now().UnixNano())), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, opts...)...)
		require.NoError(t, err)
		require.NoError(t, tx.BeginTransaction())
		for i := range aborted {
			tx.Produce(ctx, &kgo.Record{Key: []byte("aborted"), Value: fmt.Appendf(nil, "aborted-%d", i)}, nil)
		}
		require.NoError(t, tx.Flush(ctx))
		require.NoError(t, tx.EndTransaction(ctx, kgo.TryAbort))
		tx.Close()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	defer cl.Close()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		perr error
	)
	for i := from; i < from+n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d-%s", i, strings.Repeat("x", i%40))},
			func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
				wg.Done()
			})
	}
	wg.Wait()
	require.NoError(t, perr)
}

// rowsOf collects (partition, offset, key) of batches, checking that every
// batch holds one partition.
type row struct {
	p   int32
	off int64
	key string
}

func rowsOf(t testing.TB, batches []arrow.RecordBatch) []row {
	var out []row
	for _, b := range batches {
		ps := b.Column(0).(*array.Int32)
		offs := b.Column(1).(*array.Int64)
		// binary_view in process, binary through a flightsrc.Server
		// (which compacts the views).
		keys := b.Column(3).(interface{ Value(int) []byte })
		for i := 0; i < int(b.NumRows()); i++ {
			require.Equal(t, ps.Value(0), ps.Value(i), "a batch holds one partition")
			out = append(out, row{ps.Value(i), offs.Value(i), string(keys.Value(i))})
		}
	}
	return out
}

// checkExactlyOnce asserts keys k[from, from+n) each appear once, and rows
// are in offset order per partition.
func checkExactlyOnce(t testing.TB, rows []row, n int) {
	t.Helper()
	seen := map[string]int{}
	last := map[int32]int64{}
	for _, r := range rows {
		require.NotEqual(t, "aborted", r.key, "read_committed returned an aborted record")
		seen[r.key]++
		if l, ok := last[r.p]; ok {
			require.Greater(t, r.off, l, "offsets in order within partition %d", r.p)
		}
		last[r.p] = r.off
	}
	var dup, missing []string
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		switch seen[k] {
		case 1:
		case 0:
			missing = append(missing, k)
		default:
			dup = append(dup, k)
		}
	}
	require.Empty(t, missing, "missing records")
	require.Empty(t, dup, "duplicated records")
	require.Len(t, rows, n)
}

func checkedMem(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// runUntil runs a coordinator until the sink target holds n rows.
func runUntil(t *testing.T, src flightsrc.Source, sink *flightsink.Memory, stream string, p flightsink.Pipeline, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := coordinator.New(src, sink, stream, p, coordinator.WithLogger(quietLog()),
		coordinator.Backoff(20*time.Millisecond, 500*time.Millisecond), coordinator.CommitInterval(50*time.Millisecond))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.Eventually(t, func() bool { return countRows(sink, p.Target) >= n }, 50*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

func countRows(sink *flightsink.Memory, target string) int {
	n := 0
	for _, b := range sink.Batches(target) {
		n += int(b.NumRows())
		b.Release()
	}
	return n
}

func sinkRows(t testing.TB, sink *flightsink.Memory, target string) []row {
	bs := sink.Batches(target)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	return rowsOf(t, bs)
}

func TestKfakeExactlyOnceAcrossRestarts(t *testing.T) {
	for _, membership := range []bool{false, true} {
		t.Run(fmt.Sprintf("membership=%v", membership), func(t *testing.T) {
			brokers := fakeCluster(t, 3, "orders")
			produce(t, brokers, "orders", 0, 1500, 7)
			mem := checkedMem(t)
			sink := flightsink.NewMemory()
			defer sink.Release()
			cfg := kafka.Config{Brokers: brokers, Topics: []string{"orders"}, GroupID: "g1",
				BatchRows: 100, BatchWait: 30 * time.Millisecond, SessionTimeout: 2 * time.Second,
				WithoutGroupMembership: !membership}
			opts := []kafka.Option{kafka.Allocator(mem), kafka.Logger(quietLog())}
			pl := flightsink.Pipeline{ID: "p1", Target: "orders"}
			src, err := kafka.New(context.Background(), cfg, opts...)
			require.NoError(t, err)
			runUntil(t, src, sink, "orders", pl, 1500)
			require.NoError(t, src.Close())

			// A second run, after more records, continues exactly after the
			// sink's checkpoint.
			produce(t, brokers, "orders", 1500, 900, 0, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
			src, err = kafka.New(context.Background(), cfg, opts...)
			require.NoError(t, err)
			runUntil(t, src, sink, "orders", pl, 2400)
			require.NoError(t, src.Close())
			checkExactlyOnce(t, sinkRows(t, sink, "orders"), 2400)

			cp, err := sink.Checkpoint(context.Background(), pl)
			require.NoError(t, err)
			pos, err := checkpoint.Parse(cp)
			require.NoError(t, err)
			require.Len(t, pos, 3, "checkpoint names every partition: %s", cp)
		})
	}
}

// One transactional producer alternating committed and aborted
// transactions, read with decode pieces smaller than a transaction: every
// committed record exactly once. A piece that began after an aborted
// transaction's abort marker used to restart that transaction and drop the
// producer's committed records up to its next abort marker.
func TestKfakeCommittedBetweenAbortedInPieces(t *testing.T) {
	brokers := fakeCluster(t, 1, "mixed")
	ctx := context.Background()
	tx, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("mixed"), kgo.TransactionalID("mixer"))
	require.NoError(t, err)
	n := 0
	for txn := range 40 {
		require.NoError(t, tx.BeginTransaction())
		abort := txn%3 == 1
		for range 5 + txn%4 {
			r := &kgo.Record{Key: []byte("aborted"), Value: []byte("aborted")}
			if !abort {
				r = &kgo.Record{Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, "v%d", n)}
				n++
			}
			require.NoError(t, tx.ProduceSync(ctx, r).FirstErr()) // a record batch per record
		}
		end := kgo.TryCommit
		if abort {
			end = kgo.TryAbort
		}
		require.NoError(t, tx.EndTransaction(ctx, end))
	}
	tx.Close()

	for _, piece := range []int{1, 300, 256 << 10} {
		t.Run(fmt.Sprintf("decode_bytes=%d", piece), func(t *testing.T) {
			mem := checkedMem(t)
			sink := flightsink.NewMemory()
			defer sink.Release()
			src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"mixed"}, WithoutGroupMembership: true,
				GroupID:   fmt.Sprintf("pieces-%d", piece), // each run from the start
				BatchRows: 7, BatchWait: 30 * time.Millisecond, DecodeBytes: piece},
				kafka.Allocator(mem), kafka.Logger(quietLog()))
			require.NoError(t, err)
			runUntil(t, src, sink, "mixed", flightsink.Pipeline{ID: "p", Target: "mixed"}, n)
			require.NoError(t, src.Close())
			checkExactlyOnce(t, sinkRows(t, sink, "mixed"), n)
		})
	}
}

// Batches cut by rows are the same whatever the fetch sizes and decode
// pieces, given the same start positions; a tiny MaxBufferedBytes only
// slows the fetcher.
func TestKfakeDeterministicBoundaries(t *testing.T) {
	brokers := fakeCluster(t, 2, "events")
	produce(t, brokers, "events", 0, 1000, 0)
	mem := checkedMem(t)
	bounds := func(partMax int32, buffered int64, decode int) map[int32][][2]int64 {
		src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"events"}, GroupID: "det", WithoutGroupMembership: true, BatchRows: 64, BatchWait: time.Hour, DecodeBytes: decode, FetchMaxBytes: 1 << 20, PartitionMaxBytes: partMax, MaxBufferedBytes: buffered},
			kafka.Allocator(mem), kafka.Logger(quietLog()))
		require.NoError(t, err)
		defer src.Close()
		start := checkpoint.Positions{"events/0": 3, "events/1": 0}.Encode()
		rd, err := src.Read(context.Background(), flightsrc.ReadRequest{Stream: "events", After: start})
		require.NoError(t, err)
		defer rd.Close()
		out := map[int32][][2]int64{}
		rows := 0
		for rows < 1000-3-2*64 { // every full batch
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			rec, cp, err := rd.Next(ctx)
			cancel()
			require.NoError(t, err)
			require.NotEmpty(t, cp)
			if n := int(rec.NumRows()); n > 0 {
				offs := rec.Column(1).(*array.Int64)
				p := rec.Column(0).(*array.Int32).Value(0)
				out[p] = append(out[p], [2]int64{offs.Value(0), offs.Value(n - 1)})
				rows += n
				pos, err := checkpoint.Parse(cp)
				require.NoError(t, err)
				require.Equal(t, offs.Value(n-1)+1, pos[fmt.Sprintf("events/%d", p)], "checkpoint = last offset + 1")
				require.Equal(t, 64, n)
			}
			rec.Release()
		}
		return out
	}
	a := bounds(8<<20, 64<<20, 8<<20)
	b := bounds(700, 2048, 8<<20) // many small fetches, tight back-pressure
	c := bounds(8<<20, 64<<20, 1) // big fetches decoded one record batch at a time
	require.Equal(t, a, b)
	require.Equal(t, a, c)
	require.Equal(t, int64(3), a[0][0][0])
}

func TestKfakeErrors(t *testing.T) {
	brokers := fakeCluster(t, 1, "present")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, TopicRegex: "pres.*|missing", GroupID: "g"}, kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer src.Close()
	streams, err := src.Streams(ctx)
	require.NoError(t, err)
	require.Len(t, streams, 1)
	require.Equal(t, "present", streams[0].Name)
	_, err = src.Read(ctx, flightsrc.ReadRequest{Stream: "missing", Pipeline: "p"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	require.Contains(t, err.Error(), `"missing" does not exist`)
	_, err = src.Read(ctx, flightsrc.ReadRequest{Stream: "other", Pipeline: "p"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	_, err = src.Read(ctx, flightsrc.ReadRequest{Stream: "present", Pipeline: "p", After: []byte("nope")})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)

	dead, err := kafka.New(context.Background(), kafka.Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"present"}, GroupID: "g"}, kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer dead.Close()
	_, err = dead.Read(ctx, flightsrc.ReadRequest{Stream: "present"})
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.Contains(t, err.Error(), "127.0.0.1:1")
	require.True(t, flightline.IsRetryable(err))

	_, err = kafka.New(context.Background(), kafka.Config{Topics: []string{"x"}})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = kafka.New(context.Background(), kafka.Config{Brokers: []string{"b:1"}})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

var _ = errors.Is
var _ = slices.Sort[[]int]
