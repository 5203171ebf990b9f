package kafka

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsrc"
)

type compactSource struct {
	flightsrc.Source
	f coordinator.Transform
}

// Compacted returns src with the binary_view columns of its batches (the
// raw key and value) copied into plain binary columns from mem (nil: the
// default allocator), and its Readers' schemas to match. Serve a Source
// over Flight through it: Flight's IPC writer sends a view column's data
// buffers whole, and the Source's views point into whole fetch responses,
// so an uncompacted batch ships every fetch buffer it touches (≈ 35× the
// batch for 10k-row batches of 100-byte values). In-process sinks do not
// need it.
func Compacted(src flightsrc.Source, mem memory.Allocator) flightsrc.Source {
	return compactSource{Source: src, f: BinaryColumns(mem)}
}

// Streams lists the inner Source's streams with the compacted schemas.
func (s compactSource) Streams(ctx context.Context) ([]flightsrc.Stream, error) {
	ss, err := s.Source.Streams(ctx)
	for i := range ss {
		ss[i].Schema = binarySchema(ss[i].Schema)
	}
	return ss, err
}

// Prepare forwards to the inner Source's Prepare, if it has one.
func (s compactSource) Prepare(ctx context.Context, req flightsrc.PrepareRequest) error {
	if p, ok := s.Source.(flightsrc.Preparer); ok {
		return p.Prepare(ctx, req)
	}
	return nil
}

func (s compactSource) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	rd, err := s.Source.Read(ctx, req)
	if err != nil {
		return nil, err
	}
	return &compactReader{Reader: rd, f: s.f, schema: binarySchema(rd.Schema())}, nil
}

type compactReader struct {
	flightsrc.Reader
	f      coordinator.Transform
	schema *arrow.Schema
}

func (r *compactReader) Schema() *arrow.Schema { return r.schema }

// Next returns the inner Reader's batch compacted; the caller owns it.
func (r *compactReader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	rec, cp, err := r.Reader.Next(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer rec.Release()
	out, err := r.f(ctx, rec)
	if err != nil {
		return nil, nil, err
	}
	return out, cp, nil
}

// binarySchema is sc with its top-level binary_view columns as binary, as
// BinaryColumns writes them.
func binarySchema(sc *arrow.Schema) *arrow.Schema {
	fs := sc.Fields()
	changed := false
	for i, f := range fs {
		if f.Type.ID() == arrow.BINARY_VIEW {
			fs[i].Type, changed = arrow.BinaryTypes.Binary, true
		}
	}
	if !changed {
		return sc
	}
	md := sc.Metadata()
	return arrow.NewSchema(fs, &md)
}
