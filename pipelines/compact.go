package pipelines

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
)

// compactSource serves the batches of a Kafka source with their view
// columns copied into plain binary columns. Flight's IPC writer sends a
// view column's data buffers whole, and the Kafka source's views point
// into whole fetch responses: served as they are, every batch would ship
// the fetch buffers it touches, several times its own size.
type compactSource struct {
	flightsrc.Source
	f coordinator.Transform
}

func compact(src flightsrc.Source, mem memory.Allocator) flightsrc.Source {
	return compactSource{Source: src, f: kafka.BinaryColumns(mem)}
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
// kafka.BinaryColumns writes them.
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
