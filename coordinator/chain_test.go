package coordinator_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
	"github.com/flightline/flightline/transform"
	"github.com/flightline/flightline/transform/flighttransform"
)

// A chain of an in-process built-in and a remote DoExchange service that
// fails transiently now and then: the sink holds exactly the rows the
// chain keeps, each once, under the source's checkpoints.
func TestChainInProcessAndRemote(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	smem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0); smem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()

	// The remote service keeps even ids and fails every 7th batch it sees.
	var seen atomic.Int64
	remote := transform.Map(func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		if seen.Add(1)%7 == 0 {
			return nil, fmt.Errorf("%w: injected outage", flightline.ErrUnavailable)
		}
		return keepEven(smem, rec), nil
	})
	url := flighttest.Serve(t, flighttransform.NewServer(remote, flighttransform.WithServerAllocator(smem), flighttransform.WithLogger(quiet)), endpoint.ServerConfig{})
	cl, err := flighttransform.Dial(url, flightline.ClientConfig{}, flighttransform.WithAllocator(mem))
	require.NoError(t, err)
	defer cl.Close()
	sel, err := transform.Select("id", "amount")
	require.NoError(t, err)

	c, err := coordinator.New(newGen(t, mem, 5_000, 250), sink, "orders", flightsink.Pipeline{ID: "chain"},
		coordinator.WithLogger(quiet), coordinator.Backoff(time.Millisecond, 5*time.Millisecond),
		coordinator.WithChain(transform.Map(sel), cl), coordinator.ChainAllocator(mem))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, c.Run(ctx))
	require.Positive(t, c.Stats().Restarts, "the injected outages restarted the pipeline")

	bs := sink.Batches("")
	require.Equal(t, 2, int(bs[0].NumCols()))
	for _, b := range bs {
		b.Release()
	}
	got := ids(sink, "")
	require.Len(t, got, 2_500)
	seenIDs := map[int64]bool{}
	for _, id := range got {
		require.Zero(t, id%2, "only even ids")
		require.False(t, seenIDs[id], "id %d twice", id)
		seenIDs[id] = true
	}
	cp, err := sink.Checkpoint(ctx, flightsink.Pipeline{ID: "chain"})
	require.NoError(t, err)
	require.Equal(t, `{"positions":{"orders/0":5000}}`, string(cp))
}

// keepEven returns the rows of rec whose id is even, copied into mem.
func keepEven(mem memory.Allocator, rec arrow.RecordBatch) arrow.RecordBatch {
	ids := rec.Column(0).(*array.Int64)
	b := array.NewBooleanBuilder(mem)
	defer b.Release()
	for _, v := range ids.Int64Values() {
		b.Append(v%2 == 0)
	}
	mask := b.NewArray()
	defer mask.Release()
	out, err := compute.FilterRecordBatch(compute.WithAllocator(context.Background(), mem), rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		panic(err) // same lengths by construction
	}
	return out
}

// liar answers each input with the checkpoint of the one before it.
type liar struct{}

func (liar) Exchange(_ context.Context, in transform.Stream) (transform.Stream, error) {
	return &liarStream{in: in}, nil
}

type liarStream struct {
	in   transform.Stream
	prev []byte
}

func (l *liarStream) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	rec, cp, err := l.in.Next(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := l.prev
	if out == nil {
		out = []byte(`{"positions":{"orders/0":123456}}`)
	}
	l.prev = cp
	return rec, out, nil
}
func (l *liarStream) Close() error { return l.in.Close() }

// A stage that breaks the checkpoint contract stops the pipeline at once,
// with a non-retryable error that names it; nothing after it is committed.
func TestChainContractViolationStops(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := flightsink.NewMemory()
	defer sink.Release()
	c, err := coordinator.New(newGen(t, mem, 5_000, 250), sink, "orders", flightsink.Pipeline{ID: "liar"},
		coordinator.WithLogger(quiet), coordinator.Backoff(time.Millisecond, 5*time.Millisecond), coordinator.WithChain(liar{}))
	require.NoError(t, err)
	err = c.Run(context.Background())
	require.ErrorIs(t, err, transform.ErrContract)
	require.ErrorContains(t, err, "transform #1")
	require.Zero(t, c.Stats().Restarts, "not retried")
	require.Empty(t, ids(sink, ""))
}
