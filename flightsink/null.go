package flightsink

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/flightline/flightline"
)

// Null is a sink that discards data and keeps checkpoints in memory only, for
// benchmarks: it measures everything but the destination. It is exactly-once
// only for the life of the process. Safe for concurrent use.
type Null struct {
	mu    sync.Mutex
	cps   map[Pipeline][]byte
	rows  atomic.Int64
	bytes atomic.Int64
}

// NewNull returns a Null sink.
func NewNull() *Null { return &Null{cps: map[Pipeline][]byte{}} }

// Rows returns how many rows the sink has accepted.
func (n *Null) Rows() int64 { return n.rows.Load() }

// Bytes returns the Arrow buffer bytes of the rows accepted.
func (n *Null) Bytes() int64 { return n.bytes.Load() }

// Checkpoint implements Sink.
func (n *Null) Checkpoint(_ context.Context, p Pipeline) ([]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.cps[p]), nil
}

// Open implements Sink. Null does not fence.
func (n *Null) Open(ctx context.Context, p Pipeline) (Writer, []byte, error) {
	cp, _ := n.Checkpoint(ctx, p)
	return nullWriter{n: n, p: p}, cp, nil
}

type nullWriter struct {
	n *Null
	p Pipeline
}

func (w nullWriter) WriteBatch(_ context.Context, rec arrow.RecordBatch, cp []byte) error {
	if len(cp) == 0 {
		return fmt.Errorf("%w: batch without checkpoint", flightline.ErrInvalidInput)
	}
	w.n.rows.Add(rec.NumRows())
	w.n.bytes.Add(int64(util.TotalRecordSize(rec)))
	w.n.mu.Lock()
	w.n.cps[w.p] = slices.Clone(cp)
	w.n.mu.Unlock()
	return nil
}

func (nullWriter) Close(context.Context) error { return nil }
