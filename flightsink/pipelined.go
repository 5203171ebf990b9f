package flightsink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/util"

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
	if pw, ok := w.(PipelinedWriter); ok {
		return pw
	}
	if window < 1 {
		window = 1
	}
	l := &localPipe{
		w:    w,
		lim:  lim.Norm(),
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
	lim      GroupLimits
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
	var group []queued
	for {
		select {
		case <-l.stop:
			return
		case q := <-l.in:
			group = append(group[:0], q)
		}
		// Take what is already queued, never waiting for more.
		size, rows := int64(util.TotalRecordSize(group[0].rec)), group[0].rec.NumRows()
	more:
		for !l.lim.full(l.w, len(group), size, rows) {
			select {
			case q := <-l.in:
				group = append(group, q)
				size += int64(util.TotalRecordSize(q.rec))
				rows += q.rec.NumRows()
			default:
				break more
			}
		}
		done, err := 0, broken
		if broken == nil {
			done, err = l.commit(group)
			broken = err
		}
		for i, q := range group {
			r := result{cp: q.cp}
			if i >= done {
				r.err = err
			}
			q.rec.Release()
			select {
			case l.out <- r:
			case <-l.stop:
				for _, q := range group[i+1:] {
					q.rec.Release()
				}
				return
			}
		}
	}
}

// commit turns a panic in the sink into flightline.ErrInternal rather than
// a crash of the process that hosts other pipelines. It is not retryable:
// the same batch would hit the same bug.
func (l *localPipe) commit(group []queued) (done int, err error) {
	defer func() {
		if r := recover(); r != nil {
			done, err = 0, fmt.Errorf("%w: sink panicked in WriteBatch: %v", flightline.ErrInternal, r)
		}
	}()
	ctx := group[0].ctx
	if len(group) == 1 {
		if err := l.w.WriteBatch(ctx, group[0].rec, group[0].cp); err != nil {
			return 0, err
		}
		return 1, nil
	}
	batches := make([]Batch, len(group))
	for i, q := range group {
		batches[i] = Batch{Rec: q.rec, CP: q.cp}
	}
	return WriteGroup(ctx, l.w, batches)
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
