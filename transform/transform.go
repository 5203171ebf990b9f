// Package transform holds what a pipeline runs between source and sink:
// Func, a rewrite of one batch (the connectors' rewrites, the built-ins
// Select, Rename and Filter); Transform, a stage that rewrites a stream of
// batches with their checkpoints (Map makes one of a Func;
// transform/flighttransform serves and reaches one over Flight
// DoExchange); and Checked, which holds a Transform to the checkpoint
// contract of docs/protocol.md. It depends on Arrow and on the leaf
// packages flightline (errors) and checkpoint only: sources, sinks, the
// coordinator and pipelines may all import it without importing each
// other.
package transform

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/internal/viewcopy"
)

// Func rewrites a batch between source and sink.
//
// It must accept zero-row batches (they carry checkpoints) and keep its
// output schema stable from batch to batch. It receives a batch it does not
// own (it must not Release it, nor keep it after returning unless it Retains
// it) and returns a batch the caller Releases; it may return its input after
// Retaining it. Its error stops the pipeline: wrap flightline.ErrInvalidInput
// for bad data, so the pipeline does not retry it.
type Func func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error)

// Chain returns a Func that runs fs in order, each on the previous one's
// output; nil entries are skipped. It returns nil when every entry is nil,
// so a pipeline without transforms pays nothing.
func Chain(fs ...Func) Func {
	var live []Func
	for _, f := range fs {
		if f != nil {
			live = append(live, f)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		rec.Retain() // the loop releases each step's input, this one too
		for _, f := range live {
			out, err := f(ctx, rec)
			rec.Release()
			if err != nil {
				return nil, err
			}
			rec = out
		}
		return rec, nil
	}
}

// PlainViews returns a Func that copies the top-level binary_view and
// string_view columns of a batch (the Kafka source's raw key and value)
// into plain binary and string columns, for sinks whose type map has no
// view types. The values are copied once, into buffers from mem (nil: the
// default allocator); other columns are shared. Batches without view
// columns pass through unchanged (Retained).
func PlainViews(mem memory.Allocator) Func {
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		return viewcopy.Copy(mem, rec, viewcopy.Schema(rec.Schema())), nil
	}
}
