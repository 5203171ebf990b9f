package flightsink

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// PipelinedWriter lets a caller keep several batches in flight: Submit hands
// a batch over and returns without waiting for its commit; Ack returns the
// commits, in Submit order. The remote Writer returned by Client.Open
// implements it natively; Pipelined adapts any Writer.
//
// One goroutine may call Submit while another calls Ack.
type PipelinedWriter interface {
	// Submit queues rec for commit with cp. It takes its own reference to
	// rec: the caller keeps and releases its own.
	Submit(ctx context.Context, rec arrow.RecordBatch, cp []byte) error
	// Ack blocks until the oldest unacknowledged batch is committed and
	// returns its checkpoint, or returns the error that failed it. After an
	// error the writer is broken: later batches are not committed.
	Ack(ctx context.Context) ([]byte, error)
	// Close abandons unacknowledged batches (they may or may not be
	// committed) and releases the writer.
	Close(ctx context.Context) error
}

// Pipelined returns w as a PipelinedWriter. If w implements it, w itself is
// returned. Otherwise a goroutine commits queued batches in order, holding
// at most window of them: with WriteBatch one at a time, or, when w is a
// GroupWriter and more than one batch is already queued as a commit
// returns, in one WriteBatches call (group commit, bounded by the
// GroupLimits defaults; see PipelinedGroup). It never waits for a group to
// fill.
func Pipelined(w Writer, window int) PipelinedWriter {
	return PipelinedGroup(w, window, GroupLimits{})
}

// PipelinedGroup is Pipelined with the group commit bounded by lim
// (lim.MaxBatches 1: no group commit).
func PipelinedGroup(w Writer, window int, lim GroupLimits) PipelinedWriter {
	return PipelinedBudget(w, window, lim, 0)
}

// PipelinedBudget is PipelinedGroup with the byte budget of the batches
// queued behind a commit (0: DefaultPipelineBytes; < 0: nothing staged).
// When w is a Stager, queued batches are staged (encoded and written) on
// up to GOMAXPROCS goroutines while earlier ones commit; commits and
// acks stay in Submit order.
func PipelinedBudget(w Writer, window int, lim GroupLimits, budget int64) PipelinedWriter {
	if pw, ok := w.(PipelinedWriter); ok {
		return pw
	}
	if window < 1 {
		window = 1
	}
	l := &localPipe{
		w:     w,
		slots: make(chan struct{}, window),
		out:   make(chan result, window),
		stop:  make(chan struct{}),
	}
	l.p = newPipe(w, lim, budget, func(group []*item, done int, _ time.Duration, err error) bool {
		for i, it := range group {
			r := result{cp: it.b.CP}
			if i >= done {
				r.err = err
			}
			l.out <- r // never blocks: slots bounds the batches to window
		}
		return true
	})
	return l
}

type result struct {
	cp  []byte
	err error
}

type localPipe struct {
	w        Writer
	p        *pipe
	slots    chan struct{} // a batch submitted and not yet acked holds one
	out      chan result
	stop     chan struct{}
	stopOnce sync.Once
	mu       sync.Mutex // Submit against Close
	closed   bool
}

var errClosed = errors.New("flightsink: pipelined writer closed")

func (l *localPipe) Submit(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-l.stop:
		return errClosed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		<-l.slots
		return errClosed
	}
	if err := l.p.Submit(ctx, Batch{Rec: rec, CP: cp}); err != nil {
		<-l.slots
		return err
	}
	return nil
}

func (l *localPipe) Ack(ctx context.Context) ([]byte, error) {
	select {
	case r := <-l.out:
		<-l.slots
		return r.cp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.stop:
		return nil, errClosed
	}
}

func (l *localPipe) Close(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	l.p.halt() // unblocks a Submit waiting for the budget
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	// Discard what was queued but never committed (the commit under way
	// ends first), and its acks.
	go func() {
		for range l.out {
		}
	}()
	l.p.Finish()
	close(l.out)
	return l.w.Close(ctx)
}
