package flightsink

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
)

// Pipeline names what a writer writes: the pipeline whose checkpoint it
// commits, and, where one sink serves several destinations (tables, topics,
// directories), the target inside the sink. An empty Target means the sink's
// default destination.
//
// A sink keeps one checkpoint, and one fencing claim, per (ID, Target): one
// pipeline id may write two targets without fencing itself, and each target
// resumes from its own checkpoint. An empty Target and the explicit name of
// the sink's default destination are the same key.
type Pipeline struct {
	ID     string
	Target string
}

// Sink is a destination that hosts pipelines. Implementations are safe for
// concurrent use by several goroutines and pipelines.
//
// The contract every sink keeps, checked for each by package sinktest:
//
//   - Checkpoints are kept per Pipeline (ID and Target).
//   - Mergeable checkpoints: when a batch's checkpoint and the stored one
//     are both checkpoint.Positions, an exactly-once sink stores their
//     per-key maximum (Next) in the same atomic commit as the batch, and
//     Open and Checkpoint return that merged checkpoint, which no single
//     batch may have carried. Opaque checkpoints are stored as they come.
//   - The newest claim wins: Open fences every earlier Writer of the same
//     Pipeline, whether or not the target holds data yet.
//   - Fencing wins over replay: every WriteBatch of a fenced Writer fails
//     with flightline.ErrFenced (or ErrConflict, where the race is found at
//     commit time), a replay included.
type Sink interface {
	// Checkpoint returns the last committed checkpoint of p, or nil when p
	// has committed nothing. It is read-only: it neither claims p nor fences
	// its current writer, and it does not wait (beyond a moment) for a dead
	// writer's open transaction to end.
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
	// durable; when it returns an error, nothing of rec is visible. It is the
	// pipeline's commit point.
	//
	// cp is the checkpoint the source reached with rec and must be non-empty
	// (CheckBatch). Checks run in this order, before any I/O: CheckBatch,
	// fencing, replay, schema. A batch whose cp was already committed (equal
	// to the last committed checkpoint, or, for the mergeable Positions
	// form, covered by it) is a replay: it returns nil and writes nothing. A
	// zero-row rec commits cp alone.
	//
	// An error from the final commit call itself (a COMMIT or
	// EndTransaction whose answer was lost) may hide a commit that landed:
	// the next Open's checkpoint is the truth, and a replay of the batch is
	// then a no-op.
	//
	// Ownership: WriteBatch keeps neither rec nor cp after it returns (it
	// Retains rec or copies cp if it must); the caller still owns both.
	// Schema problems return an error wrapping flightline.ErrSchemaMismatch
	// before anything is written.
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

// CheckBatch runs the checks every Writer makes first, in one order, before
// any I/O: a batch is required, and so is a non-empty checkpoint. Sinks
// call it first thing in WriteBatch; fencing, replay and schema checks
// follow in that order (see the Writer contract).
func CheckBatch(rec arrow.RecordBatch, cp []byte) error {
	if rec == nil {
		return fmt.Errorf("%w: nil record batch", flightline.ErrInvalidInput)
	}
	if len(cp) == 0 {
		return fmt.Errorf("%w: batch without checkpoint", flightline.ErrInvalidInput)
	}
	return nil
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

// Batch is one batch of a group handed to GroupWriter.WriteBatches: a
// record batch and the checkpoint the source reached with it.
type Batch struct {
	Rec arrow.RecordBatch
	CP  []byte
}

// GroupWriter is implemented by Writers that can commit several queued
// batches in one atomic commit (group commit): one transaction, one Delta
// commit, one Kafka transaction, one file. The DoPut server loop and
// Pipelined use it when more than one batch is already queued; they never
// wait for a group to fill, and they bound its size (GroupLimits).
//
// The contract is WriteBatch's, batch by batch, made atomic for the group:
//
//   - Checks run before any I/O, in WriteBatch's order, for every batch:
//     CheckBatch, fencing (once, and it wins over replay: a fenced writer's
//     group fails whole, replays included), replay, schema.
//   - Replays are recognised batch by batch, as if the batches had been
//     written one after another: batch i is a replay when checkpoint.Replayed(run, cp)
//     where run starts at the stored checkpoint and becomes checkpoint.Next(run, cp)
//     after every batch that is not one. A replayed batch writes nothing;
//     a group of replays only commits nothing.
//   - The checkpoint committed with the group is run after its last batch:
//     with mergeable Positions, the per-key maximum of the stored one and
//     every new batch's, so each batch's checkpoint is covered; with opaque
//     checkpoints, the last new batch's. A later replay of any batch of the
//     group, or of any part of it, is then recognised.
//   - All or nothing: when WriteBatches returns nil, every batch and the
//     group's checkpoint are durable; when it returns an error, nothing of
//     the group is visible (the lost-commit caveat of WriteBatch applies to
//     the group as a whole). The caller acks the batches, in order, only
//     after it returns nil.
//   - Ownership: WriteBatches keeps neither the batches nor their
//     checkpoints after it returns, and does not modify the slice.
type GroupWriter interface {
	Writer
	WriteBatches(ctx context.Context, batches []Batch) error
}

// GroupLimits bounds a group commit. A group takes the batches already
// queued, in order, up to MaxBatches of them, and stops taking more once
// their Arrow buffers (util.TotalRecordSize) reach MaxBytes, or their rows
// reach the writer's MaxGroupRows (GroupRowBounder): a group holds at most
// that bound plus one batch (itself bounded by the message size limit).
// Values <= 0 take the defaults; MaxBatches 1 turns grouping off.
type GroupLimits struct {
	MaxBatches int
	MaxBytes   int64
}

// GroupRowBounder is implemented by GroupWriters whose commits slow down
// past a number of rows (the Kafka sink: its producer's record buffer). A
// group takes no more batches once its rows reach MaxGroupRows; <= 0 means
// no bound.
type GroupRowBounder interface {
	MaxGroupRows() int64
}

// full reports whether a group of n batches, size bytes and rows rows
// takes no more batches under l and w's row bound.
func (l GroupLimits) full(w Writer, n int, size, rows int64) bool {
	if n >= l.MaxBatches || size >= l.MaxBytes {
		return true
	}
	if b, ok := w.(GroupRowBounder); ok {
		if m := b.MaxGroupRows(); m > 0 && rows >= m {
			return true
		}
	}
	return false
}

// Defaults of GroupLimits.
const (
	DefaultGroupBatches = 16
	DefaultGroupBytes   = 64 << 20
)

// Norm returns l with the defaults filled in.
func (l GroupLimits) Norm() GroupLimits {
	if l.MaxBatches <= 0 {
		l.MaxBatches = DefaultGroupBatches
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultGroupBytes
	}
	return l
}

// WriteGroup commits batches with w in order: in one WriteBatches call when
// w is a GroupWriter and there is more than one batch, otherwise with one
// WriteBatch per batch. It returns how many batches are committed (and so
// may be acked): all of them when err is nil; with a GroupWriter, none
// when err is not nil; with WriteBatch, those before the failing one.
func WriteGroup(ctx context.Context, w Writer, batches []Batch) (int, error) {
	if gw, ok := w.(GroupWriter); ok && len(batches) > 1 {
		if err := gw.WriteBatches(ctx, batches); err != nil {
			return 0, err
		}
		return len(batches), nil
	}
	for i, b := range batches {
		if err := w.WriteBatch(ctx, b.Rec, b.CP); err != nil {
			return i, err
		}
	}
	return len(batches), nil
}

// CheckGroup runs CheckBatch on every batch of a group and refuses an
// empty group. GroupWriters call it first thing in WriteBatches.
func CheckGroup(batches []Batch) error {
	if len(batches) == 0 {
		return fmt.Errorf("%w: empty group", flightline.ErrInvalidInput)
	}
	for i, b := range batches {
		if err := CheckBatch(b.Rec, b.CP); err != nil {
			return fmt.Errorf("batch %d of the group: %w", i, err)
		}
	}
	return nil
}

// Fold returns which batches of a group are new on top of the stored
// checkpoint last, and the checkpoint the group commits: the GroupWriter
// replay rule. fresh[i] is false for a replayed batch and n counts the
// fresh ones; next is the running checkpoint after the last batch (a new
// slice; a clone of last when n is 0). The arguments are not kept.
func Fold(last []byte, batches []Batch) (fresh []bool, next []byte, n int) {
	fresh = make([]bool, len(batches))
	run := bytes.Clone(last)
	for i, b := range batches {
		if checkpoint.Replayed(run, b.CP) {
			continue
		}
		fresh[i] = true
		n++
		run = checkpoint.Next(run, b.CP)
	}
	return fresh, run, n
}
