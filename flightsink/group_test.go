package flightsink_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// gateSink is a Dir sink whose writers record the size of every commit
// (1 for WriteBatch, len for WriteBatches) and hold their first commit
// until gate is closed.
type gateSink struct {
	*flightsink.Dir
	gate    chan struct{}
	open    sync.Once
	entered chan struct{} // closed when the first commit starts
	mu      sync.Mutex
	sizes   []int
	first   atomic.Bool
	rows    int64 // MaxGroupRows of its writers
}

type gateWriter struct {
	flightsink.GroupWriter
	s *gateSink
}

func (g *gateSink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	w, cp, err := g.Dir.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return &gateWriter{GroupWriter: w.(flightsink.GroupWriter), s: g}, cp, nil
}

func (g *gateSink) record(n int) {
	if g.first.CompareAndSwap(false, true) {
		close(g.entered)
		<-g.gate
	}
	g.mu.Lock()
	g.sizes = append(g.sizes, n)
	g.mu.Unlock()
}

// release lets the held commit go on.
func (g *gateSink) release() { g.open.Do(func() { close(g.gate) }) }

func (g *gateSink) Sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

func (w *gateWriter) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	w.s.record(1)
	return w.GroupWriter.WriteBatch(ctx, rec, cp)
}

func (w *gateWriter) MaxGroupRows() int64 { return w.s.rows }

func (w *gateWriter) WriteBatches(ctx context.Context, b []flightsink.Batch) error {
	w.s.record(len(b))
	return w.GroupWriter.WriteBatches(ctx, b)
}

func newGateSink(t *testing.T) *gateSink {
	d, err := flightsink.NewDir(t.TempDir(), nil)
	require.NoError(t, err)
	g := &gateSink{Dir: d, gate: make(chan struct{}), entered: make(chan struct{})}
	t.Cleanup(g.release) // a failed test must not leave a handler held
	return g
}

// TestServerGroupsWhatHasArrived: while the first commit of a DoPut stream
// is held, five more batches arrive; the server commits them as groups of
// at most MaxBatches (3), acks all six in order, and the checkpoint covers
// the last. Batches written one at a time are committed alone: the server
// never waits to fill a group.
func TestServerGroupsWhatHasArrived(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := newGateSink(t)
	srv := flightsink.NewServer(sink, flightsink.WithAllocator(mem), flightsink.WithGroupCommit(flightsink.GroupLimits{MaxBatches: 3}))
	var received atomic.Int64
	flightsink.OnReceive(srv, func() { received.Add(1) })
	url := flighttest.Serve(t, srv, endpoint.ServerConfig{})
	t.Cleanup(sink.release) // before the server's Stop, which waits for a held handler
	c, err := flightsink.Dial(url, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p := flightsink.Pipeline{ID: "g", Target: "t"}
	w, _, err := c.Open(ctx, p)
	require.NoError(t, err)
	pw := w.(flightsink.PipelinedWriter)
	cmem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer cmem.AssertSize(t, 0)
	submit := func(i int64) {
		rec := sinktest.Batch(cmem, i*10, i*10+10)
		defer rec.Release()
		require.NoError(t, pw.Submit(ctx, rec, sinktest.CP(i*10+10)))
	}
	submit(0)
	<-sink.entered
	for i := int64(1); i < 6; i++ {
		submit(i)
	}
	// Schema, batch 0, then batches 1-5 have reached the server.
	require.Eventually(t, func() bool { return received.Load() >= 7 }, time.Minute, time.Millisecond)
	sink.release()
	for i := int64(0); i < 6; i++ {
		cp, err := pw.Ack(ctx)
		require.NoError(t, err)
		require.Equal(t, string(sinktest.CP(i*10+10)), string(cp), "acks in order")
	}
	require.Equal(t, []int{1, 3, 2}, sink.Sizes())

	// One at a time: every commit is a batch alone.
	for i := int64(6); i < 9; i++ {
		rec := sinktest.Batch(cmem, i*10, i*10+10)
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(i*10+10)))
		rec.Release()
	}
	require.NoError(t, w.Close(ctx))
	require.Equal(t, []int{1, 3, 2, 1, 1, 1}, sink.Sizes())
	cp, err := sink.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(90)), string(cp))
}

// TestPipelinedGroupsWhatIsQueued: the in-process pipelined writer commits
// the batches queued behind a held commit as one group, bounded by
// MaxBatches and by the writer's MaxGroupRows, and acks each in order;
// MaxBatches 1 turns grouping off.
func TestPipelinedGroupsWhatIsQueued(t *testing.T) {
	for _, tc := range []struct {
		max   int
		rows  int64
		sizes []int
	}{{0, 0, []int{1, 5}}, {2, 0, []int{1, 2, 2, 1}}, {1, 0, []int{1, 1, 1, 1, 1, 1}}, {0, 30, []int{1, 3, 2}}} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		sink := newGateSink(t)
		sink.rows = tc.rows
		ctx := context.Background()
		w, _, err := sink.Open(ctx, flightsink.Pipeline{ID: "g"})
		require.NoError(t, err)
		pw := flightsink.PipelinedGroup(w, 8, flightsink.GroupLimits{MaxBatches: tc.max})
		for i := int64(0); i < 6; i++ {
			rec := sinktest.Batch(mem, i*10, i*10+10)
			require.NoError(t, pw.Submit(ctx, rec, sinktest.CP(i*10+10)))
			rec.Release()
			if i == 0 {
				<-sink.entered // the first commit holds; the rest queue
			}
		}
		sink.release()
		for i := int64(0); i < 6; i++ {
			cp, err := pw.Ack(ctx)
			require.NoError(t, err)
			require.Equal(t, string(sinktest.CP(i*10+10)), string(cp))
		}
		require.NoError(t, pw.Close(ctx))
		require.Equal(t, tc.sizes, sink.Sizes(), "max %d", tc.max)
		cp, err := sink.Checkpoint(ctx, flightsink.Pipeline{ID: "g"})
		require.NoError(t, err)
		require.Equal(t, string(sinktest.CP(60)), string(cp))
		mem.AssertSize(t, 0)
	}
}
