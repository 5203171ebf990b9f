package flightsink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
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
// returned. Otherwise a goroutine commits queued batches with WriteBatch,
// one at a time in order, holding at most window of them.
func Pipelined(w Writer, window int) PipelinedWriter {
	if pw, ok := w.(PipelinedWriter); ok {
		return pw
	}
	if window < 1 {
		window = 1
	}
	l := &localPipe{
		w:    w,
		in:   make(chan queued, window),
		out:  make(chan result, window),
		stop: make(chan struct{}),
	}
	l.wg.Add(1)
	go l.run()
	return l
}

type queued struct {
	ctx context.Context
	rec arrow.RecordBatch
	cp  []byte
}

type result struct {
	cp  []byte
	err error
}

type localPipe struct {
	w        Writer
	in       chan queued
	out      chan result
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

var errClosed = errors.New("flightsink: pipelined writer closed")

func (l *localPipe) run() {
	defer l.wg.Done()
	broken := error(nil)
	for {
		select {
		case <-l.stop:
			return
		case q := <-l.in:
			r := result{cp: q.cp, err: broken}
			if broken == nil {
				r.err = l.commit(q)
				broken = r.err
			}
			q.rec.Release()
			select {
			case l.out <- r:
			case <-l.stop:
				return
			}
		}
	}
}

// commit turns a panic in the sink into flightline.ErrInternal rather than
// a crash of the process that hosts other pipelines. It is not retryable:
// the same batch would hit the same bug.
func (l *localPipe) commit(q queued) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: sink panicked in WriteBatch: %v", flightline.ErrInternal, r)
		}
	}()
	return l.w.WriteBatch(q.ctx, q.rec, q.cp)
}

func (l *localPipe) Submit(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	rec.Retain()
	select {
	case l.in <- queued{ctx: ctx, rec: rec, cp: cp}:
		return nil
	case <-ctx.Done():
		rec.Release()
		return ctx.Err()
	case <-l.stop:
		rec.Release()
		return errClosed
	}
}

func (l *localPipe) Ack(ctx context.Context) ([]byte, error) {
	select {
	case r := <-l.out:
		return r.cp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.stop:
		return nil, errClosed
	}
}

func (l *localPipe) Close(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
	// Release what was queued but never committed.
	for {
		select {
		case q := <-l.in:
			q.rec.Release()
		default:
			return l.w.Close(ctx)
		}
	}
}
