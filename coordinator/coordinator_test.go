package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

var quiet = slog.New(slog.DiscardHandler)

func ids(m *flightsink.Memory, target string) []int64 {
	var out []int64
	for _, b := range m.Batches(target) {
		out = append(out, b.Column(0).(*array.Int64).Int64Values()...)
		b.Release()
	}
	return out
}

func requireExactlyOnce(t *testing.T, got []int64, n int64) {
	t.Helper()
	got = slices.Clone(got)
	slices.Sort(got)
	require.Len(t, got, int(n), "row count")
	for i, v := range got {
		if v != int64(i) {
			require.Failf(t, "not exactly once", "position %d holds id %d", i, v)
		}
	}
}

func newGen(t *testing.T, mem memory.Allocator, rows int64, batch int) *flightsrc.Generator {
	g, err := flightsrc.NewGenerator(flightsrc.GenRows(rows), flightsrc.GenBatchRows(batch), flightsrc.GenAllocator(mem))
	require.NoError(t, err)
	return g
}

func TestInProcessPipeline(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	p := flightsink.Pipeline{ID: "p1", Target: "orders"}
	c, err := coordinator.New(newGen(t, mem, 10_000, 700), sink, "orders", p, coordinator.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	requireExactlyOnce(t, ids(sink, "orders"), 10_000)
	st := c.Stats()
	require.EqualValues(t, 10_000, st.Rows)
	require.Equal(t, string(checkpoint.Positions{"orders/0": 10_000}.Encode()), string(st.LastCheckpoint))
}

// A sink that fails transiently mid-stream: the coordinator restarts from the
// sink's checkpoint and the result is still exactly once.
func TestTransientFailuresResume(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	sink.FailCommit(func(_ flightsink.Pipeline, n int) error {
		if n%5 == 3 {
			return fmt.Errorf("%w: injected outage at commit %d", flightline.ErrUnavailable, n)
		}
		return nil
	})
	p := flightsink.Pipeline{ID: "p1"}
	c, err := coordinator.New(newGen(t, mem, 5_000, 300), sink, "orders", p,
		coordinator.WithLogger(quiet), coordinator.Backoff(time.Millisecond, 5*time.Millisecond), coordinator.Window(3))
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	requireExactlyOnce(t, ids(sink, ""), 5_000)
	require.Positive(t, c.Stats().Restarts)
}

func TestNonRetryableErrorStops(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	sink.FailCommit(func(_ flightsink.Pipeline, n int) error {
		if n == 2 {
			return fmt.Errorf("%w: injected bad record", flightline.ErrInvalidInput)
		}
		return nil
	})
	c, err := coordinator.New(newGen(t, mem, 5_000, 300), sink, "orders", flightsink.Pipeline{ID: "p"},
		coordinator.WithLogger(quiet))
	require.NoError(t, err)
	err = c.Run(context.Background())
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Len(t, ids(sink, ""), 600, "the two batches before the failure stay committed")
	cp, _ := sink.Checkpoint(context.Background(), flightsink.Pipeline{ID: "p"})
	require.Equal(t, string(checkpoint.Positions{"orders/0": 600}.Encode()), string(cp))
}

func TestTransform(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	// Keep only id and amount.
	proj := func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		sc := arrow.NewSchema([]arrow.Field{rec.Schema().Field(0), rec.Schema().Field(2)}, nil)
		return array.NewRecordBatch(sc, []arrow.Array{rec.Column(0), rec.Column(2)}, rec.NumRows()), nil
	}
	c, err := coordinator.New(newGen(t, mem, 1_000, 128), sink, "orders", flightsink.Pipeline{ID: "p"},
		coordinator.WithLogger(quiet), coordinator.WithTransform(proj))
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	bs := sink.Batches("")
	require.Equal(t, 2, int(bs[0].NumCols()))
	for _, b := range bs {
		b.Release()
	}
	requireExactlyOnce(t, ids(sink, ""), 1_000)
}

func TestStopsCleanlyOnCancel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	g, err := flightsrc.NewGenerator(flightsrc.GenBatchRows(100), flightsrc.GenAllocator(mem)) // unbounded
	require.NoError(t, err)
	c, err := coordinator.New(g, sink, "orders", flightsink.Pipeline{ID: "p"}, coordinator.WithLogger(quiet))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.NoError(t, c.Run(ctx))
	got := ids(sink, "")
	require.NotEmpty(t, got)
	requireExactlyOnce(t, got, int64(len(got)))
}

// The same pipeline over two Flight hops, with a sink that fails
// transiently: the remote path resumes exactly like the local one.
func TestRemotePipelineOverFlight(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	sink.FailCommit(func(_ flightsink.Pipeline, n int) error {
		if n == 4 || n == 9 {
			return fmt.Errorf("%w: injected outage", flightline.ErrUnavailable)
		}
		return nil
	})
	srcURL := flighttest.Serve(t, flightsrc.NewServer(newGen(t, mem, 20_000, 1000), flightsrc.WithLogger(quiet), flightsrc.WithAllocator(mem)), endpoint.ServerConfig{})
	sinkURL := flighttest.Serve(t, flightsink.NewServer(sink, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)), endpoint.ServerConfig{Token: "s3cret"})

	src, err := flightsrc.DialWithAllocator(srcURL, flightsrc.ClientConfig{}, mem)
	require.NoError(t, err)
	defer src.Close()
	rs, err := flightsink.Dial(sinkURL, flightsink.ClientConfig{Token: "s3cret"})
	require.NoError(t, err)
	defer rs.Close()

	c, err := coordinator.New(src, rs, "orders", flightsink.Pipeline{ID: "remote", Target: "t"},
		coordinator.WithLogger(quiet), coordinator.Backoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	requireExactlyOnce(t, ids(sink, "t"), 20_000)
	require.Equal(t, 2, c.Stats().Restarts)

	g, err := rs.Guarantee(context.Background())
	require.NoError(t, err)
	require.Equal(t, flightsink.ExactlyOnce, g)
}

func TestRemoteErrorsKeepTheirKind(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	sinkURL := flighttest.Serve(t, flightsink.NewServer(sink, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)), endpoint.ServerConfig{Token: "s3cret"})
	ctx := context.Background()

	// Wrong token: Unauthenticated, not retryable.
	bad, err := flightsink.Dial(sinkURL, flightsink.ClientConfig{Token: "nope"})
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.NotContains(t, err.Error(), "s3cret")
	require.False(t, flightline.IsRetryable(err))

	rs, err := flightsink.Dial(sinkURL, flightsink.ClientConfig{Token: "s3cret"})
	require.NoError(t, err)
	defer rs.Close()
	p := flightsink.Pipeline{ID: "p", Target: "t"}
	w, _, err := rs.Open(ctx, p)
	require.NoError(t, err)
	rec := flightsrc.GenerateOrders(mem, 0, 10)
	require.NoError(t, w.WriteBatch(ctx, rec, []byte("cp-1")))
	rec.Release()

	// A second writer fences the first; the zombie's next commit fails
	// with ErrFenced across the wire.
	w2, cp, err := rs.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, "cp-1", string(cp))
	rec = flightsrc.GenerateOrders(mem, 10, 20)
	require.NoError(t, w2.WriteBatch(ctx, rec, []byte("cp-2")))
	err = w.WriteBatch(ctx, rec, []byte("cp-zombie"))
	require.ErrorIs(t, err, flightline.ErrFenced)
	rec.Release()
	require.NoError(t, w2.Close(ctx))
	_ = w.Close(ctx)

	// A schema mismatch is InvalidArgument with its own reason.
	w3, _, err := rs.Open(ctx, p)
	require.NoError(t, err)
	b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int8}}, nil))
	b.Field(0).(*array.Int8Builder).Append(1)
	other := b.NewRecordBatch()
	b.Release()
	err = w3.WriteBatch(ctx, other, []byte("cp-3"))
	other.Release()
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	_ = w3.Close(ctx)
	cp, err = rs.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, "cp-2", string(cp))
	require.Len(t, ids(sink, "t"), 20)
}

func TestUnreachableSinkIsUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	rs, err := flightsink.Dial("grpc://"+addr, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = rs.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
	require.True(t, errors.Is(err, flightline.ErrUnavailable), "%v", err)
	require.True(t, flightline.IsRetryable(err))
}

// commitRecorder is a source that sends n batches, then idles (blocking
// until its context ends), and records advisory commits.
type commitRecorder struct {
	mem     memory.Allocator
	n       int
	commits chan []byte
}

func (s *commitRecorder) Streams(context.Context) ([]flightsrc.Stream, error) { return nil, nil }
func (s *commitRecorder) Read(_ context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	return &idleAfter{s: s}, nil
}
func (s *commitRecorder) Commit(_ context.Context, req flightsrc.CommitRequest) error {
	s.commits <- req.Checkpoint
	return nil
}

type idleAfter struct {
	s *commitRecorder
	i int
}

func (r *idleAfter) Schema() *arrow.Schema { return flightsrc.GeneratorSchema }
func (r *idleAfter) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	if r.i < r.s.n {
		r.i++
		return flightsrc.GenerateOrders(r.s.mem, int64(r.i-1)*10, int64(r.i)*10), checkpoint.Positions{"o/0": int64(r.i) * 10}.Encode(), nil
	}
	<-ctx.Done()
	return nil, nil, ctx.Err()
}
func (r *idleAfter) Close() error { return nil }

// The last acknowledged checkpoint reaches the source within about one
// CommitInterval even when no further batch arrives.
func TestAdvisoryCommitWhenIdle(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := flightsink.NewMemory()
	t.Cleanup(sink.Release)
	src := &commitRecorder{mem: mem, n: 5, commits: make(chan []byte, 100)}
	c, err := coordinator.New(src, sink, "orders", flightsink.Pipeline{ID: "p"},
		coordinator.WithLogger(quiet), coordinator.CommitInterval(100*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	want := string(checkpoint.Positions{"o/0": 50}.Encode())
	deadline := time.After(10 * time.Second)
	for got := ""; got != want; {
		select {
		case cp := <-src.commits:
			got = string(cp)
		case <-deadline:
			t.Fatal("the last checkpoint was not advised while the stream idled")
		}
	}
	cancel()
	require.NoError(t, <-done)
}

// order records the calls the coordinator makes, in order.
type order struct {
	mu    sync.Mutex
	calls []string
}

func (o *order) add(s string) {
	o.mu.Lock()
	o.calls = append(o.calls, s)
	o.mu.Unlock()
}

type preparingSource struct {
	flightsrc.Source
	o *order
}

func (s preparingSource) Prepare(_ context.Context, req flightsrc.PrepareRequest) error {
	s.o.add("prepare " + req.Stream + " " + req.Pipeline)
	return nil
}

func (s preparingSource) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	s.o.add("read")
	return s.Source.Read(ctx, req)
}

type orderedSink struct {
	flightsink.Sink
	o *order
}

func (s orderedSink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	s.o.add("open")
	return s.Sink.Open(ctx, p)
}

// A source's Prepare runs at the start of every attempt, before the sink
// is opened (and so before its checkpoint is read) and before Read.
func TestPrepareBeforeSinkOpen(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := flightsink.NewMemory()
	defer sink.Release()
	sink.FailCommit(func(_ flightsink.Pipeline, n int) error {
		if n == 2 {
			return fmt.Errorf("%w: injected outage at commit %d", flightline.ErrUnavailable, n)
		}
		return nil
	})
	o := &order{}
	src := preparingSource{Source: newGen(t, mem, 300, 50), o: o}
	c, err := coordinator.New(src, orderedSink{Sink: sink, o: o}, "orders", flightsink.Pipeline{ID: "p"},
		coordinator.WithLogger(quiet), coordinator.Backoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	requireExactlyOnce(t, ids(sink, ""), 300)
	attempt := []string{"prepare orders p", "open", "read"}
	require.GreaterOrEqual(t, c.Stats().Restarts, 1)
	require.Equal(t, slices.Repeat(attempt, c.Stats().Restarts+1), o.calls)
}

// retryLog records the retry_in of every retry the coordinator logs, with
// the level it logged it at.
type retryLog struct {
	mu    sync.Mutex
	waits []time.Duration
	warns int
}

func (h *retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *retryLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *retryLog) WithGroup(string) slog.Handler            { return h }
func (h *retryLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "retry_in" {
			h.mu.Lock()
			h.waits = append(h.waits, a.Value.Duration())
			if r.Level >= slog.LevelWarn {
				h.warns++
			}
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// TestConflictsRetryPromptly: a run of ErrConflict without progress (a
// source restarted into a consumer group that keeps rebalancing) retries
// after at most 4 times the minimum backoff and logs at INFO; before, the
// backoff doubled per attempt as for an outage (tens of seconds in the
// split-process kill test).
func TestConflictsRetryPromptly(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := flightsink.NewMemory()
	defer sink.Release()
	sink.FailCommit(func(_ flightsink.Pipeline, n int) error {
		if n < 8 {
			return fmt.Errorf("%w: injected rebalance %d", flightline.ErrConflict, n)
		}
		return nil
	})
	h := &retryLog{}
	c, err := coordinator.New(newGen(t, mem, 1_000, 100), sink, "orders", flightsink.Pipeline{ID: "p"},
		coordinator.WithLogger(slog.New(h)), coordinator.Backoff(time.Millisecond, 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, c.Run(context.Background()))
	requireExactlyOnce(t, ids(sink, ""), 1_000)
	require.Len(t, h.waits, 8)
	for i, d := range h.waits {
		require.LessOrEqualf(t, d, 4*time.Millisecond, "retry %d waited %v", i, d)
	}
	require.Zero(t, h.warns, "a moved position is routine: INFO, not WARN")
}

// msgLog records the messages logged and each one's "waited" attribute.
type msgLog struct {
	mu     sync.Mutex
	msgs   []string
	waited []time.Duration
}

func (h *msgLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *msgLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *msgLog) WithGroup(string) slog.Handler            { return h }
func (h *msgLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "waited" {
			h.waited = append(h.waited, a.Value.Duration())
		}
		return true
	})
	return nil
}

// TestRetriesWhenPeerIsBack: a sink endpoint that is down when the run
// starts (a serve-sink being restarted) is retried as soon as it listens,
// not at the end of the backoff: here every wait is 2–4 s, and the retry
// comes well before 2 s.
func TestRetriesWhenPeerIsBack(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the server stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close()) // the sink is down
	rs, err := flightsink.Dial("grpc://"+addr, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer rs.Close()

	h := &msgLog{}
	c, err := coordinator.New(newGen(t, mem, 1_000, 100), rs, "orders", flightsink.Pipeline{ID: "p", Target: "t"},
		coordinator.WithLogger(slog.New(h)), coordinator.Backoff(4*time.Second, 4*time.Second))
	require.NoError(t, err)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Run(context.Background()) }()
	time.Sleep(500 * time.Millisecond) // the first attempt fails: nobody listens
	flighttest.ServeAt(t, addr, flightsink.NewServer(sink, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)), endpoint.ServerConfig{})
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end")
	}
	requireExactlyOnce(t, ids(sink, "t"), 1_000)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Contains(t, h.msgs, "pipeline peer reachable again; retrying now")
	require.NotEmpty(t, h.waited)
	t.Logf("run ended %v after it started; retried %v into a backoff of 2-4 s", time.Since(start).Round(10*time.Millisecond), h.waited)
	for _, w := range h.waited {
		require.Less(t, w, 2*time.Second, "the retry waited out the backoff")
	}
}
