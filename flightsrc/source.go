package flightsrc

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

// Stream describes one stream a source offers.
type Stream struct {
	Name        string
	Description string
	// Schema of every batch of the stream.
	Schema *arrow.Schema
}

// ReadRequest names what to read and from where.
type ReadRequest struct {
	// Stream is the name of the stream, as listed by Streams.
	Stream string
	// Pipeline is the pipeline reading. A source may use it, for example as
	// a consumer group; it is optional.
	Pipeline string
	// After is the checkpoint to resume after: the source starts with the
	// first record not covered by it. nil means the source's own default
	// start (for Kafka: the group's committed offsets, then the reset policy).
	After []byte
}

// CommitRequest is an advisory progress report: the sink has durably
// committed everything up to Checkpoint.
type CommitRequest struct {
	Stream     string
	Pipeline   string
	Checkpoint []byte
}

// Source produces record batches. Implementations are safe for concurrent
// use; each Read returns an independent Reader. The conformance suite
// flightsrc/srctest checks this contract, in-process and over Flight; every
// source runs it (docs/sources.md).
type Source interface {
	// Streams lists the streams the source offers.
	Streams(ctx context.Context) ([]Stream, error)

	// Read opens a stream positioned after req.After. ctx bounds Read only;
	// the Reader lives until Close. An unknown stream is
	// flightline.ErrNotFound, whatever req.After holds; an After the source
	// cannot parse is flightline.ErrInvalidInput, from Read itself.
	Read(ctx context.Context, req ReadRequest) (Reader, error)

	// Commit records progress advisorily, e.g. as a Kafka group commit so
	// lag dashboards work. It never decides where a pipeline resumes: the
	// sink's checkpoint does. Sources without such a notion return nil.
	Commit(ctx context.Context, req CommitRequest) error
}

// Reader yields the batches of one stream in order. A Reader is used by one
// goroutine at a time.
type Reader interface {
	// Schema is the schema of every batch.
	Schema() *arrow.Schema

	// Next blocks until the next batch is ready and returns it with the
	// checkpoint reached once that batch is durably written downstream,
	// never empty. The caller owns the batch and must Release it; it stays
	// valid after Close. A batch may have zero rows:
	// a heartbeat that says the source is alive (its checkpoint may or may
	// not have moved). Next returns io.EOF at the end of a bounded stream,
	// and ctx.Err() when ctx ends first.
	Next(ctx context.Context) (arrow.RecordBatch, []byte, error)

	// Close stops the stream and releases what the Reader holds. It is safe
	// to call at any time, also while no Next is running.
	Close() error
}

// WireCompacter is an optional Source ability that Server honours.
//
// Flight's IPC writer sends the data buffers of a view column (binary_view,
// string_view) whole. A Source whose batches hold view columns pointing into
// buffers much larger than the batch (the Kafka source's key and value point
// into whole fetch responses: about 35 times the batch for 10k-row batches
// of 100-byte values) implements WireCompacter and returns true. Server then
// copies the top-level view columns of every batch into plain binary and
// string columns before sending it, and lists, describes and sends the
// stream's schema to match. In-process consumers of the Source read the
// views as they are. The ServerOption CompactViews overrides the Source's
// answer.
type WireCompacter interface {
	// CompactOnWire reports whether Server should compact the Source's
	// batches. It is asked once per call to the Server.
	CompactOnWire() bool
}

// PrepareRequest names the stream and pipeline a Read will follow.
type PrepareRequest struct {
	Stream   string
	Pipeline string
}

// Preparer is an optional ability of a Source, found by type assertion:
// work that must be done before the pipeline reads the sink's checkpoint.
// The coordinator calls Prepare at the start of every attempt, before
// Sink.Open and the Read that follows it.
//
// The Kafka source joins the consumer group there and waits for the
// group's first assignment, so the checkpoint the sink returns is read
// after the partitions were assigned and the Reader can serve them at once.
// Without it, the first Read of a fresh process ends with ErrRebalanced as
// soon as the assignment arrives and the attempt restarts.
type Preparer interface {
	// Prepare blocks until req.Stream is ready to be read by req.Pipeline,
	// or ctx ends. Its errors are those of Read (retryable ones make the
	// coordinator back off and try again).
	Prepare(ctx context.Context, req PrepareRequest) error
}

// Ender is implemented by sources that can say where a stream ends now, so
// that a run can stop there (flightline sync --once) instead of following
// the stream for ever.
type Ender interface {
	// End returns the stream's end as of the call.
	End(ctx context.Context, stream string) (End, error)
}

// End is where a stream ended when Ender.End was called.
type End struct {
	// Desc describes the end for people (and logs): the end offsets, the
	// table version, the last watermark.
	Desc string
	// Covered reports whether a pipeline whose sink has committed cp (the
	// sink's checkpoint; nil when it has none) has read every record the
	// stream held when End was called. Safe for concurrent use.
	Covered func(ctx context.Context, cp []byte) (bool, error)
	// Left, when not nil, estimates the records a pipeline whose sink
	// holds cp has still to read to reach the end (for progress output;
	// records that will not become rows, such as dead letters, count).
	Left func(ctx context.Context, cp []byte) (int64, error)
}
