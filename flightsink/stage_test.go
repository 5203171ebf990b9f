package flightsink_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// stageSink is a Dir sink whose writers are Stagers: Stage records the
// checkpoint of the batch it stages (and fails for failCP), CommitStaged
// records how many of its batches came staged and holds the first commit
// until gate is closed.
type stageSink struct {
	*flightsink.Dir
	failCP    string
	gate      chan struct{}
	open      sync.Once
	entered   chan struct{}
	first     atomic.Bool
	discarded atomic.Int32
	mu        sync.Mutex
	staged    []string // checkpoints, in the order Stage saw them
	commits   [][2]int // per commit: batches, of them staged
}

type stageWriter struct {
	flightsink.GroupWriter
	s *stageSink
}

type stagedMark struct {
	s  *stageSink
	cp string
}

func (m *stagedMark) Discard(context.Context) { m.s.discarded.Add(1) }

func newStageSink(t *testing.T) *stageSink {
	d, err := flightsink.NewDir(t.TempDir(), nil)
	require.NoError(t, err)
	s := &stageSink{Dir: d, gate: make(chan struct{}), entered: make(chan struct{})}
	t.Cleanup(s.release)
	return s
}

func (s *stageSink) release() { s.open.Do(func() { close(s.gate) }) }

func (s *stageSink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	w, cp, err := s.Dir.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return &stageWriter{GroupWriter: w.(flightsink.GroupWriter), s: s}, cp, nil
}

func (s *stageSink) Staged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.staged)
}

func (s *stageSink) Commits() [][2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commits)
}

func (w *stageWriter) Stage(_ context.Context, b flightsink.Batch) (flightsink.Staged, error) {
	w.s.mu.Lock()
	w.s.staged = append(w.s.staged, string(b.CP))
	w.s.mu.Unlock()
	if string(b.CP) == w.s.failCP {
		return nil, errors.New("stage failed")
	}
	return &stagedMark{s: w.s, cp: string(b.CP)}, nil
}

func (w *stageWriter) CommitStaged(ctx context.Context, batches []flightsink.Batch, staged []flightsink.Staged) error {
	if w.s.first.CompareAndSwap(false, true) {
		close(w.s.entered)
		<-w.s.gate
	}
	n := 0
	for i, st := range staged {
		if st != nil {
			n++
			if st.(*stagedMark).cp != string(batches[i].CP) {
				panic("staged out of order")
			}
		}
	}
	w.s.mu.Lock()
	w.s.commits = append(w.s.commits, [2]int{len(batches), n})
	w.s.mu.Unlock()
	if len(batches) == 1 {
		return w.GroupWriter.WriteBatch(ctx, batches[0].Rec, batches[0].CP)
	}
	return w.GroupWriter.WriteBatches(ctx, batches)
}

// TestStagedWhileCommitting: with a Stager, the batches queued behind a
// held commit are staged before it returns (in-process and over Flight);
// then they commit as one group with what was staged, in order, and are
// acked in order. A batch whose Stage fails commits unstaged.
func TestStagedWhileCommitting(t *testing.T) {
	for _, remote := range []bool{false, true} {
		t.Run(map[bool]string{false: "InProcess", true: "OverFlight"}[remote], func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			t.Cleanup(func() { mem.AssertSize(t, 0) })
			sink := newStageSink(t)
			sink.failCP = string(sinktest.CP(40))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := flightsink.Pipeline{ID: "s"}
			var pw flightsink.PipelinedWriter
			if remote {
				srv := flightsink.NewServer(sink, flightsink.WithAllocator(mem))
				url := flighttest.Serve(t, srv, endpoint.ServerConfig{})
				t.Cleanup(sink.release)
				c, err := flightsink.Dial(url, flightsink.ClientConfig{})
				require.NoError(t, err)
				defer c.Close()
				w, _, err := c.Open(ctx, p)
				require.NoError(t, err)
				pw = w.(flightsink.PipelinedWriter)
			} else {
				w, _, err := sink.Open(ctx, p)
				require.NoError(t, err)
				pw = flightsink.Pipelined(w, 8)
			}
			for i := int64(0); i < 6; i++ {
				rec := sinktest.Batch(mem, i*10, i*10+10)
				require.NoError(t, pw.Submit(ctx, rec, sinktest.CP(i*10+10)))
				rec.Release()
				if i == 0 {
					<-sink.entered // the first commit holds
				}
			}
			// Batches 1-5 are staged while commit 0 is held.
			require.Eventually(t, func() bool { return len(sink.Staged()) == 6 }, time.Minute, time.Millisecond)
			require.Len(t, sink.Commits(), 0, "the first commit is still held")
			sink.release()
			for i := int64(0); i < 6; i++ {
				cp, err := pw.Ack(ctx)
				require.NoError(t, err)
				require.Equal(t, string(sinktest.CP(i*10+10)), string(cp), "acks in order")
			}
			require.NoError(t, pw.Close(ctx))
			require.Equal(t, [][2]int{{1, 1}, {5, 4}}, sink.Commits(), "one group of the five staged behind the held commit; batch 3 failed to stage")
			require.EqualValues(t, 0, sink.discarded.Load(), "everything staged was committed")
			cp, err := sink.Checkpoint(ctx, p)
			require.NoError(t, err)
			require.Equal(t, string(sinktest.CP(60)), string(cp))
		})
	}
}

// TestPipelineBudgetBoundsStaging: with a budget of one byte a batch
// waits in Submit until the batch before it is committed, so nothing is
// staged behind a held commit; what is queued when a pipe is closed is
// discarded, not committed.
func TestPipelineBudgetBoundsStaging(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sink := newStageSink(t)
	ctx := context.Background()
	w, _, err := sink.Open(ctx, flightsink.Pipeline{ID: "b"})
	require.NoError(t, err)
	pw := flightsink.PipelinedBudget(w, 8, flightsink.GroupLimits{}, 1)
	rec := sinktest.Batch(mem, 0, 10)
	require.NoError(t, pw.Submit(ctx, rec, sinktest.CP(10)))
	rec.Release()
	<-sink.entered
	submitted := make(chan error, 1)
	go func() {
		rec := sinktest.Batch(mem, 10, 20)
		defer rec.Release()
		submitted <- pw.Submit(ctx, rec, sinktest.CP(20))
	}()
	select {
	case err := <-submitted:
		t.Fatalf("Submit returned (%v) with the budget held by a batch under commit", err)
	case <-time.After(50 * time.Millisecond):
	}
	require.Equal(t, []string{string(sinktest.CP(10))}, sink.Staged())
	sink.release()
	require.NoError(t, <-submitted)
	for _, want := range []int64{10, 20} {
		cp, err := pw.Ack(ctx)
		require.NoError(t, err)
		require.Equal(t, string(sinktest.CP(want)), string(cp))
	}
	require.NoError(t, pw.Close(ctx))
}
