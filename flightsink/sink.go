package flightsink

import (
	"bytes"
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline/checkpoint"
)

// Pipeline names what a writer writes: the pipeline whose checkpoint it
// commits, and, where one sink serves several destinations (tables, topics,
// directories), the target inside the sink. An empty Target means the sink's
// default destination.
type Pipeline struct {
	ID     string
	Target string
}

// Sink is a destination that hosts pipelines. Implementations are safe for
// concurrent use by several goroutines and pipelines.
type Sink interface {
	// Checkpoint returns the last committed checkpoint of p, or nil when p
	// has committed nothing. It is read-only: it neither claims p nor fences
	// its current writer.
	Checkpoint(ctx context.Context, p Pipeline) ([]byte, error)

	// Open claims p for writing and returns a Writer and the last checkpoint
	// committed for p (nil when none). Claiming fences every earlier Writer of
	// p: from the moment Open returns, their commits fail with ErrFenced or
	// ErrConflict, so the returned checkpoint stays the truth until this
	// Writer commits. ctx bounds Open only, not the Writer's life.
	Open(ctx context.Context, p Pipeline) (Writer, []byte, error)
}

// Writer commits batches of one pipeline. A Writer is used by one goroutine
// at a time.
type Writer interface {
	// WriteBatch commits rec and cp atomically: when it returns nil, both are
	// durable; when it returns an error, neither is, and the pipeline's
	// checkpoint is unchanged. It is the pipeline's commit point.
	//
	// cp is the checkpoint the source reached with rec and must be non-empty.
	// A batch whose cp was already committed (equal to the last committed
	// checkpoint, or, for the mergeable Positions form, covered by it) is a
	// replay: it returns nil and writes nothing. A zero-row rec commits cp
	// alone.
	//
	// WriteBatch does not keep rec after it returns unless it Retains it; the
	// caller still owns its reference. Schema problems return an error
	// wrapping flightline.ErrSchemaMismatch before anything is written.
	WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error

	// Close releases the writer's resources. It commits nothing: a batch is
	// committed by WriteBatch or not at all.
	Close(ctx context.Context) error
}

// Guarantee is the delivery guarantee a sink gives.
type Guarantee int

const (
	// AtLeastOnce sinks write data without the checkpoint: a replay after a
	// crash may write a batch again (idempotently where the sink says so).
	// The source's advisory commit is the resume authority.
	AtLeastOnce Guarantee = iota
	// ExactlyOnce sinks commit data and checkpoint in one atomic commit.
	ExactlyOnce
)

func (g Guarantee) String() string {
	if g == ExactlyOnce {
		return "exactly-once"
	}
	return "at-least-once"
}

// Guaranteer is implemented by sinks that declare their guarantee. Sinks that
// do not are treated as AtLeastOnce.
type Guaranteer interface {
	Guarantee() Guarantee
}

// GuaranteeOf returns the guarantee s declares, AtLeastOnce by default.
func GuaranteeOf(s Sink) Guarantee {
	if g, ok := s.(Guaranteer); ok {
		return g.Guarantee()
	}
	return AtLeastOnce
}

// Replayed reports whether a batch carrying cp was already committed by a
// pipeline whose last committed checkpoint is last: cp equals last, or both
// are mergeable Positions and last covers cp. Sinks call it first thing in
// WriteBatch to make replays no-ops.
func Replayed(last, cp []byte) bool {
	if last == nil {
		return false
	}
	if bytes.Equal(last, cp) {
		return true
	}
	l, err := checkpoint.Parse(last)
	if err != nil {
		return false
	}
	c, err := checkpoint.Parse(cp)
	if err != nil {
		return false
	}
	return checkpoint.Covers(l, c)
}

// SameSchema reports whether a batch of schema got can be appended to a
// destination of schema want: same field names, types and nullability, in
// order. Metadata is ignored.
func SameSchema(want, got *arrow.Schema) bool {
	if want.NumFields() != got.NumFields() {
		return false
	}
	for i := range want.NumFields() {
		w, g := want.Field(i), got.Field(i)
		if w.Name != g.Name || w.Nullable != g.Nullable || !arrow.TypeEqual(w.Type, g.Type) {
			return false
		}
	}
	return true
}
