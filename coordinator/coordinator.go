package coordinator

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/metrics"
	"github.com/flightline/flightline/transform"
)

// Coordinator moves one stream of a source into one pipeline of a sink.
type Coordinator struct {
	src      flightsrc.Source
	sink     flightsink.Sink
	stream   string
	pipeline flightsink.Pipeline

	window         int
	chain          []transform.Transform // each Checked
	peers          []Reconnecter         // src, sink and transforms reached over a connection
	chainMem       memory.Allocator
	transform      transform.Func
	minBackoff     time.Duration
	maxBackoff     time.Duration
	commitInterval time.Duration
	maxAttempts    int
	stopTimeout    time.Duration
	log            *slog.Logger
	metrics        *metrics.Metrics
	// validate runs flightsink.ValidateBatch on every batch before the
	// sink's writer sees it: set when the batches were decoded from a
	// remote source and the sink is in-process, so that no Flight server
	// validates them on the way.
	validate bool

	// unacked holds, between attempts, the batches the failed attempt
	// submitted without receiving their acks, in order; the next Open's
	// checkpoint tells which of them the sink committed. Run's goroutine
	// only.
	unacked []sent

	// claimID names this Coordinator's claims of the pipeline (see
	// flightsink.Claim); claimed is set once the sink has acknowledged a
	// batch, i.e. once a claim of ours is known to have been made, after
	// which a retry rejoins it unless takeover. Run's goroutine only.
	claimID  string
	claimed  bool
	takeover bool

	mu    sync.Mutex
	stats Stats
}

// Stats counts what a Coordinator has done since it was created. Rows,
// Batches and Bytes count the batches the sink committed, over every
// attempt: those it acknowledged, and those of a failed attempt whose
// acknowledgement was lost but whose checkpoint the next attempt's Open
// shows committed (a commit call may fail after committing).
type Stats struct {
	Rows, Batches, Bytes int64
	Restarts             int
	LastCheckpoint       []byte
}

// Option configures a Coordinator.
type Option func(*Coordinator) error

// Window bounds the batches in flight between source and sink: read but
// not yet acknowledged. Default 4.
func Window(n int) Option {
	return func(c *Coordinator) error {
		if n < 1 {
			return fmt.Errorf("%w: window must be >= 1, got %d", flightline.ErrInvalidInput, n)
		}
		c.window = n
		return nil
	}
}

// WithTransform runs f over every batch between source and sink (see
// transform.Func for what f may and must do; transform.Chain runs several).
func WithTransform(f transform.Func) Option {
	return func(c *Coordinator) error { c.transform = f; return nil }
}

// WithChain runs the transforms ts, in order, between the source and the
// sink (and before WithTransform's Func): in-process ones (transform.Map
// of a Func, the built-ins) or remote ones (flighttransform.Client). Each
// is wrapped in transform.Checked, so a stage that breaks the checkpoint
// contract of docs/protocol.md stops the pipeline with
// transform.ErrContract. Every attempt starts a new exchange with each.
// A stage is named in errors by its String method when it has one.
func WithChain(ts ...transform.Transform) Option {
	return func(c *Coordinator) error {
		for i, t := range ts {
			if t == nil {
				return fmt.Errorf("%w: transform %d of the chain is nil", flightline.ErrInvalidInput, i)
			}
			c.chain = append(c.chain, t)
		}
		return nil
	}
}

// ChainAllocator sets the allocator that joins the split outputs of a
// chain's transforms (see transform.Checked); nil means
// memory.DefaultAllocator, the default.
func ChainAllocator(mem memory.Allocator) Option {
	return func(c *Coordinator) error { c.chainMem = mem; return nil }
}

// Backoff sets the bounds of the jittered exponential backoff between
// attempts. Defaults 200ms and 5s: the maximum is also how long a pipeline
// may take to resume once a long outage is over (issue 16: recovery within
// a few seconds; it was 30s), and one attempt every few seconds while a
// service is down costs little.
func Backoff(min, max time.Duration) Option {
	return func(c *Coordinator) error {
		if min <= 0 || max < min {
			return fmt.Errorf("%w: backoff bounds %v..%v", flightline.ErrInvalidInput, min, max)
		}
		c.minBackoff, c.maxBackoff = min, max
		return nil
	}
}

// CommitInterval is the least time between two advisory commits to the
// source. Default 1s. The last acknowledged checkpoint is always committed
// when a run ends.
func CommitInterval(d time.Duration) Option {
	return func(c *Coordinator) error { c.commitInterval = d; return nil }
}

// MaxAttempts stops Run after n consecutive failed attempts without
// progress; 0 (the default) retries forever.
func MaxAttempts(n int) Option {
	return func(c *Coordinator) error { c.maxAttempts = n; return nil }
}

// StopTimeout bounds how long a stop (the end of Run's context) or a failed
// read waits for the acknowledgements of the batches already handed to the
// sink, at most Window of them, before abandoning them. Default 10s.
func StopTimeout(d time.Duration) Option {
	return func(c *Coordinator) error {
		if d < 0 {
			return fmt.Errorf("%w: stop timeout must be >= 0, got %v", flightline.ErrInvalidInput, d)
		}
		c.stopTimeout = d
		return nil
	}
}

// Takeover makes every attempt claim the pipeline anew, as every attempt
// did before issue 41: a retry then fences a coordinator of the same
// pipeline started after this one. By default (false) only the first
// attempt claims; once the sink has acknowledged a batch, a retry rejoins
// this Coordinator's claim, and when a newer coordinator has claimed the
// pipeline since, Run stops with flightline.ErrReplaced instead (where the
// sink takes a claim: a flightsink.Claimer, i.e. a remote sink; an
// in-process sink is claimed anew by every attempt).
func Takeover(on bool) Option {
	return func(c *Coordinator) error { c.takeover = on; return nil }
}

// WithLogger sets the logger; nil means slog.Default(), the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *Coordinator) error {
		if l == nil {
			l = slog.Default()
		}
		c.log = l
		return nil
	}
}

// WithMetrics records progress in Flightline's metrics (rows, bytes,
// batches, commit latency, checkpoint age; role "coordinator") registered
// on reg. Components given the same reg share the collectors. nil records
// nothing, the default.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *Coordinator) error { c.metrics = metrics.For(reg); return nil }
}

// New returns a Coordinator that moves stream from src into pipeline p of
// sink.
func New(src flightsrc.Source, sink flightsink.Sink, stream string, p flightsink.Pipeline, opts ...Option) (*Coordinator, error) {
	c := &Coordinator{
		src: src, sink: sink, stream: stream, pipeline: p,
		window: 4, minBackoff: 200 * time.Millisecond, maxBackoff: 5 * time.Second,
		commitInterval: time.Second, stopTimeout: 10 * time.Second, log: slog.Default(),
	}
	if src == nil || sink == nil {
		return nil, fmt.Errorf("%w: coordinator needs a source and a sink", flightline.ErrInvalidInput)
	}
	if stream == "" || p.ID == "" {
		return nil, fmt.Errorf("%w: coordinator needs a stream and a pipeline id", flightline.ErrInvalidInput)
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	peers := []any{src, sink}
	for _, t := range c.chain {
		peers = append(peers, t)
	}
	for _, x := range peers {
		if r, ok := x.(Reconnecter); ok {
			c.peers = append(c.peers, r)
		}
	}
	for i, t := range c.chain {
		name := fmt.Sprintf("#%d", i+1)
		if s, ok := t.(fmt.Stringer); ok {
			name = fmt.Sprintf("#%d (%s)", i+1, s)
		}
		c.chain[i] = transform.Checked(name, t, c.chainMem)
	}
	_, remoteSrc := src.(*flightsrc.Client)
	_, remoteSink := sink.(*flightsink.Client)
	c.validate = remoteSrc && !remoteSink
	var id [16]byte
	_, _ = crand.Read(id[:]) // never fails (crypto/rand)
	c.claimID = hex.EncodeToString(id[:])
	return c, nil
}

// Stats returns a snapshot of the counters.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.LastCheckpoint = bytes.Clone(s.LastCheckpoint)
	return s
}

// Run moves batches until the source's stream ends (nil), ctx ends (nil: a
// clean stop), or an error that retrying cannot fix (returned). Transient
// failures restart the pipeline from the sink's checkpoint after a jittered
// backoff. A stop reads no further batch but waits, up to StopTimeout, for
// the sink to acknowledge those it was already given, then ends the sink's
// stream normally.
//
// Only Run's first attempt claims the pipeline anew (see Takeover): a
// retry after the sink has acknowledged a batch rejoins this run's claim,
// and Run returns an error wrapping flightline.ErrReplaced when a newer
// coordinator has claimed the pipeline since.
func (c *Coordinator) Run(ctx context.Context) error {
	c.claimed = false // a fresh run claims anew
	attempt := 0
	for {
		progressed, err := c.runOnce(ctx)
		if ctx.Err() != nil {
			c.log.Info("pipeline stopped", "pipeline", c.pipeline.ID)
			return nil
		}
		if err == nil {
			c.log.Info("stream ended; pipeline complete", "pipeline", c.pipeline.ID)
			return nil
		}
		if errors.Is(err, flightline.ErrReplaced) {
			c.log.Error("a newer coordinator has claimed the pipeline; this run stops (start it again to take the pipeline back)", "pipeline", c.pipeline.ID, "err", err)
			return err
		}
		if !flightline.IsRetryable(err) {
			c.log.Error("pipeline failed", "pipeline", c.pipeline.ID, "err", err)
			return err
		}
		if progressed {
			attempt = 0
		}
		attempt++
		if c.maxAttempts > 0 && attempt >= c.maxAttempts {
			return fmt.Errorf("coordinator: giving up after %d attempts: %w", attempt, err)
		}
		// A moved position (ErrConflict: a consumer-group rebalance, a
		// resume_after mismatch) is coordination, not an outage: retry
		// promptly instead of backing off as if a service were down, which
		// stalled pipelines for tens of seconds after source restarts.
		moved := errors.Is(err, flightline.ErrConflict)
		n := attempt
		if moved {
			n = min(n, conflictSteps)
		}
		d := c.backoff(n)
		if moved {
			c.log.Info("pipeline position moved; resuming from the sink's checkpoint", "pipeline", c.pipeline.ID, "err", err, "retry_in", d)
		} else {
			c.log.Warn("pipeline interrupted; resuming from the sink's checkpoint", "pipeline", c.pipeline.ID, "err", err, "retry_in", d)
		}
		c.mu.Lock()
		c.stats.Restarts++
		c.mu.Unlock()
		if !c.wait(ctx, d) {
			return nil
		}
	}
}

// Reconnecter is implemented by a source, sink or transform reached over a
// connection: the Flight clients of flightsrc, flightsink and
// flighttransform. WaitReconnected returns true once a connection that was
// down is ready again; false at once when it is up, or when ctx ends first.
type Reconnecter interface {
	WaitReconnected(ctx context.Context) bool
}

// wait sleeps d before a retry, or less when one of the pipeline's peers
// that was unreachable when the wait began is reachable again (a restarted
// serve-sink or serve-source listening): then the retry starts at once, but
// never sooner than reconnectFloor after the failure. Before, a peer
// down for a few seconds was retried with a doubling backoff and found up
// again up to one full wait (2.5–5 s) late. It returns false when ctx ended.
func (c *Coordinator) wait(ctx context.Context, d time.Duration) bool {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel() // ends the watches below
	back := make(chan struct{}, 1)
	for _, p := range c.peers {
		go func() {
			if p.WaitReconnected(wctx) {
				select {
				case back <- struct{}{}:
				default:
				}
			}
		}()
	}
	select {
	case <-wctx.Done():
		return ctx.Err() == nil
	case <-back:
	}
	if rest := min(d, reconnectFloor) - time.Since(start); rest > 0 {
		t := time.NewTimer(rest)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	c.log.Info("pipeline peer reachable again; retrying now", "pipeline", c.pipeline.ID, "waited", time.Since(start).Round(time.Millisecond), "backoff", d)
	return true
}

// reconnectFloor: the shortest wait before a retry cut short by a peer
// coming back, so that a peer which accepts connections and fails every
// call is not retried in a tight loop.
const reconnectFloor = 100 * time.Millisecond

// conflictSteps caps the backoff after ErrConflict at 4 times the minimum.
const conflictSteps = 3

func (c *Coordinator) backoff(attempt int) time.Duration {
	d := c.minBackoff << min(attempt-1, 20)
	if d > c.maxBackoff || d <= 0 {
		d = c.maxBackoff
	}
	return d/2 + rand.N(d/2+1) // jitter in [d/2, d]
}

// runOnce is one attempt: claim the sink, read after its checkpoint, pipe
// batches with at most window in flight, and match acks in order.
func (c *Coordinator) runOnce(ctx context.Context) (progressed bool, err error) {
	if p, ok := c.src.(flightsrc.Preparer); ok {
		// Before Sink.Open: whatever the source settles here (a consumer
		// group's assignment) precedes the checkpoint the sink returns.
		if err := p.Prepare(ctx, flightsrc.PrepareRequest{Stream: c.stream, Pipeline: c.pipeline.ID}); err != nil {
			return false, fmt.Errorf("preparing source: %w", err)
		}
	}
	w, cp, err := c.open(ctx)
	if err != nil {
		return false, fmt.Errorf("opening sink: %w", err)
	}
	c.settle(cp)
	pw := flightsink.Pipelined(w, c.window)
	defer pw.Close(context.WithoutCancel(ctx))
	c.log.Info("pipeline resuming", "pipeline", c.pipeline.ID, "stream", c.stream, "after", string(cp))

	src, err := c.src.Read(ctx, flightsrc.ReadRequest{Stream: c.stream, Pipeline: c.pipeline.ID, After: cp})
	if err != nil {
		return false, fmt.Errorf("opening source: %w", err)
	}

	// rctx is the producer's: a stop or a failure ends reading at once.
	// actx is the acker's and the commits': it outlives a stop by up to
	// stopTimeout, so the batches already submitted are committed and
	// counted, and the sink's stream ends normally rather than cancelled.
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// The chain's last stage owns the stages before it and the source's
	// reader: closing it closes them all. Its exchanges live in rctx.
	var rd transform.Stream = src
	defer func() { rd.Close() }()
	for i, t := range c.chain {
		out, err := t.Exchange(rctx, rd)
		if err != nil {
			return false, fmt.Errorf("starting transform %d of %d: %w", i+1, len(c.chain), err)
		}
		rd = out
	}
	actx, acancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer acancel(nil)
	stopDrain := context.AfterFunc(rctx, func() {
		t := time.AfterFunc(c.stopTimeout, func() { acancel(context.Cause(rctx)) })
		context.AfterFunc(actx, func() { t.Stop() })
	})
	defer stopDrain()

	// slots bounds the batches submitted but not yet acknowledged to the
	// window, so the producer blocks when the sink falls behind; inflight
	// carries their checkpoints, in order, to the acker.
	slots := make(chan struct{}, c.window)
	inflight := make(chan sent, c.window)
	var wg sync.WaitGroup
	wg.Add(2)
	var prodErr, ackErr error
	var failed *sent
	go func() {
		defer wg.Done()
		defer close(inflight)
		prodErr = c.produce(rctx, actx, rd, pw, slots, inflight, cp)
		if prodErr != nil {
			cancel(prodErr)
		}
	}()
	go func() {
		defer wg.Done()
		progressed, failed, ackErr = c.ack(actx, pw, slots, inflight)
		if ackErr != nil {
			cancel(ackErr)
			acancel(ackErr)
		}
	}()
	wg.Wait()
	if progressed {
		c.claimed = true
	}
	c.unacked = c.unacked[:0]
	if failed != nil {
		c.unacked = append(c.unacked, *failed)
	}
	for s := range inflight {
		c.unacked = append(c.unacked, s)
	}
	switch {
	case ackErr != nil && !errors.Is(ackErr, context.Canceled):
		return progressed, ackErr
	case prodErr != nil && !errors.Is(prodErr, context.Canceled):
		return progressed, prodErr
	case ackErr != nil:
		return progressed, ackErr
	case prodErr != nil:
		return progressed, prodErr
	}
	return progressed, nil
}

// open opens the sink's pipeline: with this Coordinator's claim where the
// sink takes one, as a rejoin once a claim of ours is known to have been
// made (and not Takeover).
func (c *Coordinator) open(ctx context.Context) (flightsink.Writer, []byte, error) {
	if cl, ok := c.sink.(flightsink.Claimer); ok {
		return cl.OpenClaim(ctx, c.pipeline, flightsink.Claim{ID: c.claimID, Rejoin: c.claimed && !c.takeover})
	}
	return c.sink.Open(ctx, c.pipeline)
}

type sent struct {
	cp         []byte
	rows, size int64
	at         time.Time
}

// settle counts the batches of the previous attempt that were submitted
// without an ack but that cp, the sink's checkpoint read by this attempt's
// Open, shows committed.
func (c *Coordinator) settle(cp []byte) {
	defer func() { c.unacked = c.unacked[:0] }()
	if cp == nil {
		return
	}
	n := -1
	for i, s := range c.unacked {
		if committedIn(cp, s.cp) {
			n = i
		}
	}
	if n < 0 {
		return
	}
	c.claimed = true // the sink committed a batch of ours: our claim was made
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.unacked[:n+1] {
		c.stats.Rows += s.rows
		c.stats.Bytes += s.size
		c.stats.Batches++
	}
	c.stats.LastCheckpoint = bytes.Clone(cp)
	c.log.Info("the previous attempt committed batches whose acks were lost", "pipeline", c.pipeline.ID, "batches", n+1, "checkpoint", string(cp))
}

// committedIn reports whether a batch sent with checkpoint batch is
// committed when the sink's checkpoint is stored: they are equal, or both
// are positions and stored covers batch.
func committedIn(stored, batch []byte) bool {
	if bytes.Equal(stored, batch) {
		return true
	}
	sp, err := checkpoint.Parse(stored)
	if err != nil {
		return false
	}
	bp, err := checkpoint.Parse(batch)
	return err == nil && checkpoint.Covers(sp, bp)
}

// produce reads batches and submits them until the stream ends or ctx
// does. A submitted batch commits under actx, which outlives a stop.
func (c *Coordinator) produce(ctx, actx context.Context, rd transform.Stream, pw flightsink.PipelinedWriter, slots chan struct{}, inflight chan<- sent, last []byte) error {
	for {
		rec, cp, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if len(c.chain) > 0 {
				return fmt.Errorf("reading source through %d transforms: %w", len(c.chain), err)
			}
			return fmt.Errorf("reading source: %w", err)
		}
		if len(cp) == 0 {
			rec.Release()
			return fmt.Errorf("%w: source sent a batch without a checkpoint", flightline.ErrInvalidInput)
		}
		if rec.NumRows() == 0 && bytes.Equal(cp, last) {
			rec.Release() // a heartbeat that moves nothing
			continue
		}
		if c.validate {
			if err := flightsink.ValidateBatch(rec); err != nil {
				rec.Release()
				return fmt.Errorf("batch from source: %w", err)
			}
		}
		if c.transform != nil {
			out, err := c.transform(ctx, rec)
			rec.Release()
			if err != nil {
				return fmt.Errorf("transform: %w", err)
			}
			rec = out
		}
		s := sent{cp: cp, rows: rec.NumRows(), size: int64(util.TotalRecordSize(rec)), at: time.Now()}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			rec.Release()
			return ctx.Err()
		}
		err = pw.Submit(actx, rec, cp)
		rec.Release()
		if err != nil && !errors.Is(err, flightsink.ErrWriterBroken) {
			<-slots
			return fmt.Errorf("writing to sink: %w", err)
		}
		inflight <- s // never blocks: slots holds it to the window
		if err != nil {
			return nil // the writer is broken: the acker learns why from Ack
		}
		last = cp
	}
}

// ack matches acks to the batches in inflight, in order, until the
// producer closes it. On an error it returns the batch whose ack failed.
func (c *Coordinator) ack(ctx context.Context, pw flightsink.PipelinedWriter, slots <-chan struct{}, inflight <-chan sent) (progressed bool, failed *sent, err error) {
	var pending []byte // acknowledged but not yet committed to the source
	lastCommit := time.Now()
	// flush fires when pending has waited CommitInterval with no newer
	// ack, so an idle stream still advises the source promptly.
	var flush <-chan time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if pending != nil {
			c.adviseSource(context.WithoutCancel(ctx), pending)
		}
	}()
	advise := func() {
		c.adviseSource(ctx, pending)
		pending, lastCommit = nil, time.Now()
		if timer != nil {
			timer.Stop()
		}
		timer, flush = nil, nil
	}
	for {
		var s sent
		var ok bool
		select {
		case <-ctx.Done():
			return progressed, nil, context.Cause(ctx)
		case <-flush:
			advise()
			continue
		case s, ok = <-inflight:
			if !ok {
				return progressed, nil, nil
			}
		}
		got, err := pw.Ack(ctx)
		if err != nil {
			return progressed, &s, fmt.Errorf("sink commit: %w", err)
		}
		<-slots
		if !bytes.Equal(got, s.cp) {
			return progressed, nil, fmt.Errorf("sink acknowledged checkpoint %q, expected %q: acks out of order", got, s.cp)
		}
		progressed = true
		c.metrics.Committed("coordinator", c.pipeline.ID, s.rows, s.size, time.Since(s.at))
		c.mu.Lock()
		c.stats.Rows += s.rows
		c.stats.Bytes += s.size
		c.stats.Batches++
		c.stats.LastCheckpoint = s.cp
		c.mu.Unlock()
		pending = s.cp
		if wait := c.commitInterval - time.Since(lastCommit); wait <= 0 {
			advise()
		} else if timer == nil {
			timer = time.NewTimer(wait)
			flush = timer.C
		}
	}
}

// adviseSource sends the advisory commit. Its failure costs nothing but lag
// accuracy, so it is logged, not returned.
func (c *Coordinator) adviseSource(ctx context.Context, cp []byte) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.src.Commit(ctx, flightsrc.CommitRequest{Stream: c.stream, Pipeline: c.pipeline.ID, Checkpoint: cp}); err != nil {
		c.log.Warn("advisory commit to source failed", "pipeline", c.pipeline.ID, "err", err)
	}
}
