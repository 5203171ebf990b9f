package flightsink

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/flightline/flightline"
)

// Stager is implemented by GroupWriters whose commit splits into a slow
// part that no reader can see, the data of each batch encoded and written
// (a data file, a staged object), and the commit that makes it visible
// with the checkpoint. The DoPut server and Pipelined stage the batches
// queued behind a commit while it runs (bounded by a byte budget:
// WithPipelineBytes, PipelinedBudget), on up to GOMAXPROCS goroutines, and
// commit them in order with CommitStaged, so that encoding and writing are
// off the commit's critical path.
//
// Exactly-once is CommitStaged's: Stage commits nothing, and a crash
// after it leaves at most data that no commit references (which the
// sink's cleanup removes), never a commit without its checkpoint.
type Stager interface {
	GroupWriter

	// Stage encodes and writes the data of b without committing anything,
	// and returns what CommitStaged needs to commit it (nil when there is
	// nothing to stage, e.g. no rows). It runs on other goroutines than
	// the commits, while the Writer commits earlier batches, and several
	// Stage calls may run at once; it must not change what a commit
	// reads. It keeps neither b.Rec nor b.CP beyond what it returns
	// (Retaining what it keeps).
	//
	// An error from Stage is not the batch's: the caller commits the batch
	// unstaged (a nil Staged), and CommitStaged, which runs every check in
	// WriteBatches' order, returns the error that counts.
	Stage(ctx context.Context, b Batch) (Staged, error)

	// CommitStaged commits batches as WriteBatches does (the same checks,
	// replay rule and all-or-nothing; a group of one batch included),
	// using staged[i], Stage's result for batches[i] (nil: not staged;
	// the Writer does that batch's work itself). It owns the staged
	// values: whatever of them it does not commit (a replayed batch, a
	// group refused before its commit was attempted) it discards, and
	// what a failed commit attempt named it leaves for the cleanup (the
	// commit may have landed).
	CommitStaged(ctx context.Context, batches []Batch, staged []Staged) error
}

// Staged is the data Stager.Stage wrote for one batch, not committed.
type Staged interface {
	// Discard deletes the staged data (best effort) and releases what it
	// holds. The caller calls it for a staged batch it never hands to
	// CommitStaged; CommitStaged discards what it does not commit.
	Discard(ctx context.Context)
}

// DefaultPipelineBytes is the default byte budget of the batches a DoPut
// stream (or a Pipelined writer) holds between their receipt and their
// commit while earlier batches commit: their Arrow buffers
// (util.TotalRecordSize). A batch larger than the budget is taken alone.
const DefaultPipelineBytes = 64 << 20

// WithPipelineBytes sets the byte budget of the batches a DoPut stream
// holds received but not yet committed (default DefaultPipelineBytes):
// they are staged (Stager) while earlier ones commit. n < 0 turns staging
// off: every batch is encoded and written inside its commit, as with a
// Writer that is no Stager; decoding still runs beside the commit, within
// DefaultPipelineBytes.
func WithPipelineBytes(n int64) ServerOption {
	return func(s *Server) { s.budget = n }
}

// committed is what a pipe reports after each commit: the group, how many
// of its batches are committed (all of them when err is nil), and err.
// It returns false to stop the pipe (the rest is discarded).
// took is how long the commit took.
type committedFunc func(group []*item, done int, took time.Duration, err error) bool

// pipe commits submitted batches in order with w, staging those queued
// behind a commit on up to workers goroutines when w is a Stager, within
// budget bytes, and grouping what is staged when a commit returns
// (GroupLimits). Submit, Finish and Abort are for one goroutine; onCommit
// runs on the committing goroutine.
type pipe struct {
	w        Writer
	st       Stager // nil: nothing is staged
	lim      GroupLimits
	budget   int64
	onCommit committedFunc
	// panicked turns a panic of the sink in a commit into the group's
	// error (nil: flightline.ErrInternal naming the panic).
	panicked func(r any) error

	mu       sync.Mutex
	inflight int64
	freed    chan struct{} // closed and replaced when bytes are freed

	stageQ  chan *item
	commitQ chan *item
	stop    chan struct{} // closed by abort or by a stopping onCommit
	once    sync.Once
	wg      sync.WaitGroup // the stage workers and the committer
	closeIn sync.Once
}

// item is one batch in a pipe.
type item struct {
	ctx    context.Context
	b      Batch
	size   int64
	staged Staged
	ready  chan struct{} // closed when staged (or not to be staged)
}

// newPipe starts a pipe. budget < 0 stages nothing.
func newPipe(w Writer, lim GroupLimits, budget int64, onCommit committedFunc) *pipe {
	p := &pipe{w: w, lim: lim.Norm(), budget: budget, onCommit: onCommit, freed: make(chan struct{}),
		stageQ: make(chan *item, 1024), commitQ: make(chan *item, 1024), stop: make(chan struct{})}
	if st, ok := w.(Stager); ok && budget >= 0 {
		p.st = st
	}
	if p.budget <= 0 {
		p.budget = DefaultPipelineBytes
	}
	workers := 0
	if p.st != nil {
		workers = runtime.GOMAXPROCS(0)
	}
	for range workers {
		p.wg.Add(1)
		go p.stager()
	}
	p.wg.Add(1)
	go p.committer()
	return p
}

// Submit queues b (taking its own reference to b.Rec) once the budget
// allows: it waits while the batches in the pipe hold budget bytes or
// more (a batch alone always goes). It fails once the pipe has stopped.
func (p *pipe) Submit(ctx context.Context, b Batch) error {
	size := int64(util.TotalRecordSize(b.Rec))
	for {
		p.mu.Lock()
		if p.inflight == 0 || p.inflight+size <= p.budget {
			p.inflight += size
			p.mu.Unlock()
			break
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.stop:
			return errClosed
		}
	}
	b.Rec.Retain()
	it := &item{ctx: ctx, b: b, size: size, ready: make(chan struct{})}
	if p.st == nil {
		close(it.ready)
	} else {
		select {
		case p.stageQ <- it:
		case <-p.stop:
			p.free(it)
			return errClosed
		}
	}
	select {
	case p.commitQ <- it:
		return nil
	case <-p.stop:
		// The stage worker may still hold it: the committer's drain
		// does not see it, so wait for it here.
		<-it.ready
		p.free(it)
		return errClosed
	}
}

// free discards what it staged and releases it.
func (p *pipe) free(it *item) {
	if it.staged != nil {
		it.staged.Discard(context.WithoutCancel(it.ctx))
		it.staged = nil
	}
	it.b.Rec.Release()
	p.mu.Lock()
	p.inflight -= it.size
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}

// Finish ends the input and waits until everything submitted is
// committed, or the pipe has stopped and discarded the rest.
func (p *pipe) Finish() {
	p.closeIn.Do(func() {
		close(p.stageQ)
		close(p.commitQ)
	})
	p.wg.Wait()
}

// Abort stops the pipe after the commit under way, discards the rest and
// waits for its goroutines.
func (p *pipe) Abort() {
	p.halt()
	p.Finish()
}

// halt stops the pipe after the commit under way without waiting: a
// Submit waiting for the budget returns. Safe from any goroutine.
func (p *pipe) halt() { p.once.Do(func() { close(p.stop) }) }

func (p *pipe) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

func (p *pipe) stager() {
	defer p.wg.Done()
	for it := range p.stageQ {
		if !p.stopped() {
			it.staged = p.stage(it)
		}
		close(it.ready)
	}
}

// stage runs Stage, turning an error or a panic into nothing staged: the
// commit then does the work and meets the error itself.
func (p *pipe) stage(it *item) (s Staged) {
	defer func() {
		if recover() != nil {
			s = nil
		}
	}()
	s, err := p.st.Stage(it.ctx, it.b)
	if err != nil {
		if s != nil {
			s.Discard(context.WithoutCancel(it.ctx))
		}
		return nil
	}
	return s
}

func (p *pipe) committer() {
	defer p.wg.Done()
	var (
		carry  *item
		broken error
		group  []*item
	)
	defer func() {
		// Stopped: discard what is left once its stage is done.
		if carry != nil {
			<-carry.ready
			p.free(carry)
		}
		for it := range p.commitQ {
			<-it.ready
			p.free(it)
		}
	}()
	for {
		first := carry
		carry = nil
		if first == nil {
			var ok bool
			if first, ok = <-p.commitQ; !ok {
				return
			}
		}
		<-first.ready
		group = append(group[:0], first)
		size, rows := first.size, first.b.Rec.NumRows()
		// Take what is queued and staged, never waiting for more.
	more:
		for !p.lim.full(p.w, len(group), size, rows) {
			select {
			case it, ok := <-p.commitQ:
				if !ok {
					break more
				}
				select {
				case <-it.ready:
					group = append(group, it)
					size += it.size
					rows += it.b.Rec.NumRows()
				default:
					carry = it
					break more
				}
			default:
				break more
			}
		}
		done, err, start := 0, broken, time.Now()
		if broken == nil && !p.stopped() {
			done, err = p.commit(group)
			broken = err
		} else if err == nil {
			err = errClosed
		}
		goOn := p.onCommit(group, done, time.Since(start), err)
		for _, it := range group {
			p.free(it)
		}
		if !goOn {
			p.halt()
			return
		}
	}
}

// commit commits group: CommitStaged with a Stager, WriteGroup otherwise.
// A panic in the sink becomes flightline.ErrInternal (not retryable: the
// same batch would hit the same bug), not a crash of the process that
// hosts other pipelines.
func (p *pipe) commit(group []*item) (done int, err error) {
	defer func() {
		if r := recover(); r != nil {
			done, err = 0, fmt.Errorf("%w: sink panicked in WriteBatch: %v", flightline.ErrInternal, r)
			if p.panicked != nil {
				err = p.panicked(r)
			}
		}
	}()
	ctx := group[0].ctx
	batches := make([]Batch, len(group))
	for i, it := range group {
		batches[i] = it.b
	}
	if p.st == nil {
		return WriteGroup(ctx, p.w, batches)
	}
	staged := make([]Staged, len(group))
	for i, it := range group {
		staged[i], it.staged = it.staged, nil // CommitStaged owns them now
	}
	if err := p.st.CommitStaged(ctx, batches, staged); err != nil {
		return 0, err
	}
	return len(group), nil
}
