// Package sinktest is the conformance suite every Flightline sink runs
// against its real destination.
//
// It checks the contract of flightsink.Sink and flightsink.Writer (written
// in flightsink/sink.go and docs/sinks.md): a fresh pipeline has no
// checkpoint; committed batches and their checkpoint survive a restart; a
// replayed batch is a no-op; a crash between commit and ack loses nothing
// and duplicates nothing; a schema mismatch writes nothing; a zombie writer
// is fenced, its replays included; the newest claim wins on a target that
// has no data yet; over Flight, a rejoin of a claim is refused once a
// newer claim was made; Checkpoint does not fence; one pipeline id writes two
// targets without fencing itself; pipelines commit concurrently; mergeable
// checkpoints are merged per key; a batch without a checkpoint is refused.
//
// Run runs every check twice: against the sink in-process, and through
// flightsink.NewServer and flightsink.Dial on a loopback Flight connection,
// so the wire adapter keeps the same contract.
//
// Every test builds its batches from a memory.CheckedAllocator and asserts
// that zero bytes are left once the sink is closed and the harness cleaned
// up.
package sinktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// Harness connects the suite to one sink implementation.
type Harness struct {
	// NewSink returns a new Sink instance on the destination under test, as
	// a restarted process would create it. Every call reaches the same
	// destination. Register any clean-up with t.Cleanup.
	NewSink func(t *testing.T) flightsink.Sink

	// IDs reads back, preferably without the sink under test, the int64 "id"
	// column of every row committed to p.Target, in any order.
	IDs func(t *testing.T, p flightsink.Pipeline) []int64

	// Guarantee is what the sink promises. AtLeastOnce sinks skip the checks
	// that rest on the checkpoint being committed with the data.
	Guarantee flightsink.Guarantee

	// Batch, when set, builds the suite's batch of ids [from, to) for sinks
	// that need columns of their own (a Kafka sink needs a binary value
	// column). It must hold every row of Batch(mem, from, to), including
	// its int64 "id" column, which IDs reads back; it may add columns. The
	// caller releases the batch. Nil means Batch. The schema-mismatch check
	// keeps its own, foreign, batch.
	Batch func(mem memory.Allocator, from, to int64) arrow.RecordBatch

	// Group says the sink's writers implement flightsink.GroupWriter: the
	// suite then requires it of the writers Open returns in-process and
	// runs the group-commit checks, in-process with WriteBatches and over
	// Flight with several batches in flight in one DoPut stream (which the
	// server commits as groups of what has arrived).
	Group bool

	// NewInstance, when set, returns a new Sink like NewSink but named as
	// the given instance of its pipelines (the Delta and PostgreSQL sinks'
	// Instance option): instances write one pipeline side by side, each
	// fencing only its own older writers, and every one's Checkpoint is
	// merged over them. The suite then runs its instance checks, in
	// process.
	NewInstance func(t *testing.T, name string) flightsink.Sink

	// Repeats says an AtLeastOnce sink prints again what a restarted
	// instance is sent, having kept nothing to tell it was written (the
	// stdout sink: no guarantee). Where the suite replays batches into a
	// new instance it then requires every id at least once and at most
	// twice, instead of exactly once; replays into one instance must still
	// be no-ops.
	Repeats bool

	// Unserialized, when set, says why concurrent commits to one
	// destination cannot be tested on the harness's service (moto's Glue
	// ignores the VersionId that makes a real Glue catalog's commits a
	// compare-and-swap, so two writers' commits can overwrite each
	// other): ConcurrentPipelines is skipped with this reason, which
	// should name what is left unverified. Leave it empty wherever the
	// service is the real thing.
	Unserialized string

	// Parallel says the harness's fixtures (its NewSink, NewInstance and
	// IDs, and what they share) are safe to use from two goroutines: Run
	// then runs its two passes, in-process and over Flight, at once
	// (t.Parallel, within go test's -parallel). Each check already has a
	// target and pipeline of its own, so the passes share nothing of the
	// suite's; on a remote service, where the checks mostly wait, this
	// halves the suite's wall time.
	Parallel bool

	// remote is set by Run for the pass through Flight, where a Writer
	// claims the pipeline with its first batch (the DoPut stream starts
	// with the schema), not in Open; resume_after keeps that safe.
	remote bool
}

// Schema is the schema of the suite's batches: id int64 (not null), name
// utf8 (nullable).
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// Run runs the suite as subtests of t: "InProcess" against the sink, and
// "OverFlight" against a flightsink.Client dialled to a flightsink.Server
// serving it on loopback. With h.Parallel the two run at once, and Run
// returns before they end (t's clean-ups run after both).
func Run(t *testing.T, h Harness) {
	t.Run("InProcess", func(t *testing.T) { h.parallel(t); run(t, h) })
	t.Run("OverFlight", func(t *testing.T) { h.parallel(t); run(t, overFlight(h)) })
}

func (h Harness) parallel(t *testing.T) {
	if h.Parallel {
		t.Parallel()
	}
}

// overFlight wraps every sink the harness makes in a Flight server and
// returns a client dialled to it.
func overFlight(h Harness) Harness {
	serve := func(t *testing.T, s flightsink.Sink) flightsink.Sink {
		url := flighttest.Serve(t, flightsink.NewServer(s), endpoint.ServerConfig{})
		c, err := flightsink.Dial(url, flightsink.ClientConfig{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	inner := h.NewSink
	h.NewSink = func(t *testing.T) flightsink.Sink { return serve(t, inner(t)) }
	if inst := h.NewInstance; inst != nil {
		h.NewInstance = func(t *testing.T, name string) flightsink.Sink { return serve(t, inst(t, name)) }
	}
	h.remote = true
	return h
}

func run(t *testing.T, h Harness) {
	t.Run("FreshPipelineHasNoCheckpoint", func(t *testing.T) { testFresh(t, h) })
	t.Run("CommitAndResume", func(t *testing.T) { testCommitAndResume(t, h) })
	t.Run("ReplayIsNoop", func(t *testing.T) { testReplay(t, h) })
	t.Run("CrashBetweenWriteAndAck", func(t *testing.T) { testCrashBeforeAck(t, h) })
	t.Run("SchemaMismatchWritesNothing", func(t *testing.T) { testSchemaMismatch(t, h) })
	t.Run("MissingCheckpointRefused", func(t *testing.T) { testMissingCheckpoint(t, h) })
	if h.Guarantee == flightsink.ExactlyOnce {
		t.Run("EmptyBatchCommitsCheckpoint", func(t *testing.T) { testEmptyBatch(t, h) })
		t.Run("ZombieWriterFenced", func(t *testing.T) { testZombie(t, h) })
		t.Run("ZombieReplayFenced", func(t *testing.T) { testZombieReplay(t, h) })
		t.Run("NewestClaimWinsOnFreshTarget", func(t *testing.T) { testFreshClaimedTwice(t, h) })
		t.Run("CheckpointDoesNotFence", func(t *testing.T) { testCheckpointNoFence(t, h) })
		t.Run("MergeablePositions", func(t *testing.T) { testMergeable(t, h) })
		if h.remote {
			// The claims a rejoin checks are the Flight server's record.
			t.Run("RejoinRefusedAfterNewerClaim", func(t *testing.T) { testRejoin(t, h) })
		}
		if h.NewInstance != nil && !h.remote {
			// In process only: over Flight a stream's resume_after check
			// refuses its first batch (ABORTED) whenever another instance
			// committed since the writer read the merged checkpoint, which
			// instances writing at once do all the time (a known limit of
			// instances behind serve-sink; see docs/sinks.md).
			t.Run("InstancesSideBySide", func(t *testing.T) { testInstances(t, h) })
		}
		if h.Group {
			t.Run("GroupCommit", func(t *testing.T) { testGroupCommit(t, h) })
			t.Run("CrashBetweenGroupCommitAndAcks", func(t *testing.T) { testGroupCrashBeforeAcks(t, h) })
			t.Run("GroupPartReplayed", func(t *testing.T) { testGroupPartReplayed(t, h) })
			t.Run("GroupFenced", func(t *testing.T) { testGroupFenced(t, h) })
			if !h.remote {
				// Over Flight a batch of another schema cannot join the
				// stream; in-process the group must fail whole.
				t.Run("GroupAllOrNothing", func(t *testing.T) { testGroupAtomic(t, h) })
			}
		}
	}
	if h.Guarantee == flightsink.AtLeastOnce {
		// The exactly-once checks above rest on a stored checkpoint. An
		// at-least-once sink declares it keeps none; this check holds it
		// to that instead of skipping them silently.
		t.Run("AtLeastOnceKeepsNoCheckpoint", func(t *testing.T) { testNoCheckpoint(t, h) })
	}
	t.Run("TwoTargetsOnePipeline", func(t *testing.T) { testTwoTargets(t, h) })
	t.Run("ConcurrentPipelines", func(t *testing.T) {
		if h.Unserialized != "" {
			t.Skip("concurrent commits not testable here: " + h.Unserialized)
		}
		testConcurrent(t, h)
	})
}

type env struct {
	h   Harness
	t   *testing.T
	ctx context.Context
	mem *memory.CheckedAllocator
	p   flightsink.Pipeline
}

func setup(t *testing.T, h Harness) *env {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	// Registered first, so it runs last: after the harness released the sink.
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	name := strings.ToLower(fmt.Sprintf("st_%s_%06d", sanitize(t.Name()), rand.IntN(1e6)))
	return &env{h: h, t: t, ctx: ctx, mem: mem, p: flightsink.Pipeline{ID: name + "_pipe", Target: name}}
}

func sanitize(s string) string {
	s = s[strings.LastIndex(s, "/")+1:]
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > 24 {
		out = out[:24]
	}
	return out
}

// Batch builds a batch of ids [from, to) in Schema from mem. The caller
// releases it.
func Batch(mem memory.Allocator, from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, Schema)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	names := b.Field(1).(*array.StringBuilder)
	for i := from; i < to; i++ {
		ids.Append(i)
		if i%7 == 3 {
			names.AppendNull()
		} else {
			names.Append(fmt.Sprintf("name-%d", i))
		}
	}
	return b.NewRecordBatch()
}

// CP is the mergeable checkpoint the suite attaches to a batch ending before
// id next.
func CP(next int64) []byte { return checkpoint.Positions{"sinktest/0": next}.Encode() }

// batch builds the batch of ids [from, to) with the harness's builder.
func (e *env) batch(from, to int64) arrow.RecordBatch {
	if e.h.Batch != nil {
		return e.h.Batch(e.mem, from, to)
	}
	return Batch(e.mem, from, to)
}

func (e *env) write(w flightsink.Writer, from, to int64) error {
	rec := e.batch(from, to)
	defer rec.Release()
	return w.WriteBatch(e.ctx, rec, CP(to))
}

func (e *env) open(s flightsink.Sink) (flightsink.Writer, []byte) {
	w, cp, err := s.Open(e.ctx, e.p)
	require.NoError(e.t, err)
	return w, cp
}

func seq(from, to int64) []int64 {
	out := make([]int64, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func sorted(ids []int64) []int64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

func testFresh(t *testing.T, h Harness) {
	e := setup(t, h)
	s := h.NewSink(t)
	cp, err := s.Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Nil(t, cp, "a fresh pipeline has no checkpoint")
	w, cp := e.open(s)
	require.Nil(t, cp)
	require.NoError(t, w.Close(e.ctx))
}

func testCommitAndResume(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 10))
	require.NoError(t, e.write(w, 10, 25))
	require.NoError(t, e.write(w, 25, 30))
	require.NoError(t, w.Close(e.ctx))

	s := h.NewSink(t) // restart
	if h.Guarantee == flightsink.ExactlyOnce {
		cp, err := s.Checkpoint(e.ctx, e.p)
		require.NoError(t, err)
		require.Equal(t, string(CP(30)), string(cp))
	}
	w, cp := e.open(s)
	if h.Guarantee == flightsink.ExactlyOnce {
		require.Equal(t, string(CP(30)), string(cp))
	}
	require.NoError(t, e.write(w, 30, 40))
	require.NoError(t, w.Close(e.ctx))
	require.Equal(t, seq(0, 40), sorted(h.IDs(t, e.p)))
}

func testReplay(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 10))
	require.NoError(t, e.write(w, 10, 20))
	// The same writer sends the last batch again, as a client that lost
	// the ack would.
	require.NoError(t, e.write(w, 10, 20))
	require.NoError(t, w.Close(e.ctx))
	if h.Repeats {
		require.Equal(t, seq(0, 20), sorted(h.IDs(t, e.p)), "a replay into the same writer is a no-op")
	}

	w, _ = e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 10), "a batch covered by the checkpoint is a no-op")
	require.NoError(t, e.write(w, 10, 20), "the last committed batch again is a no-op")
	require.NoError(t, w.Close(e.ctx))
	e.requireIDsAfterRestart(seq(0, 20))
}

// requireIDsAfterRestart checks the target holds want after batches were
// replayed into a new instance: exactly once, or, for a Repeats sink, each
// id once or twice and nothing else.
func (e *env) requireIDsAfterRestart(want []int64) {
	got := sorted(e.h.IDs(e.t, e.p))
	if !e.h.Repeats {
		require.Equal(e.t, want, got)
		return
	}
	seen := map[int64]int{}
	for _, id := range got {
		seen[id]++
	}
	for _, id := range want {
		n := seen[id]
		require.Truef(e.t, n == 1 || n == 2, "id %d landed %d times; a Repeats sink lands it once or twice", id, n)
		delete(seen, id)
	}
	require.Emptyf(e.t, seen, "ids that were never sent: %v", seen)
}

func testCrashBeforeAck(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 10))
	require.NoError(t, e.write(w, 10, 20))
	// The process dies here: the commit returned, the ack never left, and
	// Close is never called. A new instance must resume after id 19.
	s := h.NewSink(t)
	w2, cp := e.open(s)
	next := int64(0)
	if h.Guarantee == flightsink.ExactlyOnce {
		require.Equal(t, string(CP(20)), string(cp))
		next = 20
	}
	// An at-least-once sink resumes from the source's position: replay it
	// all and rely on idempotent writes.
	for from := next; from < 30; from += 10 {
		require.NoError(t, e.write(w2, from, from+10))
	}
	require.NoError(t, w2.Close(e.ctx))
	_ = w.Close(e.ctx)
	e.requireIDsAfterRestart(seq(0, 30))
}

func testSchemaMismatch(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 5))

	other := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(e.mem, other)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"x", "y"}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	bad := b.NewRecordBatch()
	b.Release()
	err := w.WriteBatch(e.ctx, bad, CP(100))
	bad.Release()
	require.Error(t, err)
	require.Truef(t, errors.Is(err, flightline.ErrSchemaMismatch), "want ErrSchemaMismatch, got %v", err)
	_ = w.Close(e.ctx)

	s := h.NewSink(t)
	if h.Guarantee == flightsink.ExactlyOnce {
		cp, err := s.Checkpoint(e.ctx, e.p)
		require.NoError(t, err)
		require.Equal(t, string(CP(5)), string(cp), "a refused batch must not move the checkpoint")
	}
	require.Equal(t, seq(0, 5), sorted(h.IDs(t, e.p)))
}

func testMissingCheckpoint(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	rec := e.batch(0, 3)
	err := w.WriteBatch(e.ctx, rec, nil)
	rec.Release()
	require.Truef(t, errors.Is(err, flightline.ErrInvalidInput), "want ErrInvalidInput, got %v", err)
	require.NoError(t, w.Close(e.ctx))
	require.Empty(t, h.IDs(t, e.p))
}

func testEmptyBatch(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 5))
	empty := e.batch(0, 0)
	require.NoError(t, w.WriteBatch(e.ctx, empty, CP(9)))
	empty.Release()
	require.NoError(t, w.Close(e.ctx))
	cp, err := h.NewSink(t).Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Equal(t, string(CP(9)), string(cp))
	require.Equal(t, seq(0, 5), sorted(h.IDs(t, e.p)))
}

func testZombie(t *testing.T, h Harness) {
	e := setup(t, h)
	old, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(old, 0, 5))

	newer, cp := e.open(h.NewSink(t))
	require.Equal(t, string(CP(5)), string(cp))
	next := int64(5)
	if h.remote {
		// Over Flight the claim rides on the newer writer's first batch.
		require.NoError(t, e.write(newer, 5, 7))
		next = 7
	}

	err := e.write(old, next, 10)
	require.Error(t, err, "a fenced writer must not commit")
	require.Truef(t, errors.Is(err, flightline.ErrFenced) || errors.Is(err, flightline.ErrConflict),
		"want ErrFenced or ErrConflict, got %v", err)
	_ = old.Close(e.ctx)

	require.NoError(t, e.write(newer, next, 12))
	require.NoError(t, newer.Close(e.ctx))
	require.Equal(t, seq(0, 12), sorted(h.IDs(t, e.p)))
	cp, err = h.NewSink(t).Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Equal(t, string(CP(12)), string(cp))
}

// testRejoin: a writer that rejoins its claim (a coordinator retrying
// after its stream broke) writes on while no newer claim was made, and is
// refused with ErrReplaced, committing nothing, once one was; a fresh
// claim (a coordinator started again) wins as always.
func testRejoin(t *testing.T, h Harness) {
	e := setup(t, h)
	s := h.NewSink(t) // one server: it keeps the record of claims
	cl, ok := s.(flightsink.Claimer)
	require.True(t, ok, "the Flight client takes claims")
	open := func(id string, rejoin bool) flightsink.Writer {
		w, _, err := cl.OpenClaim(e.ctx, e.p, flightsink.Claim{ID: id, Rejoin: rejoin})
		require.NoError(t, err)
		return w
	}
	b := open("b", false)
	require.NoError(t, e.write(b, 0, 5))
	_ = b.Close(e.ctx) // B's stream broke

	b = open("b", true)
	require.NoError(t, e.write(b, 5, 7), "no newer claim: B's rejoin writes on")

	d := open("d", false) // D, started while B was cut off
	require.NoError(t, e.write(d, 7, 9))
	err := e.write(b, 9, 10)
	requireFenced(t, err, "B's open stream after D claimed")
	_ = b.Close(e.ctx)

	b = open("b", true)
	err = e.write(b, 9, 10)
	require.ErrorIs(t, err, flightline.ErrReplaced, "B's rejoin after D claimed")
	require.ErrorIs(t, err, flightline.ErrFenced)
	require.Contains(t, err.Error(), "claimed by a newer coordinator")
	_ = b.Close(e.ctx)
	require.NoError(t, e.write(d, 9, 12), "D is not fenced by B's refused rejoin")

	b = open("b", false) // B started again: a fresh claim wins
	require.NoError(t, e.write(b, 12, 14))
	err = e.write(d, 14, 15)
	requireFenced(t, err, "D's stream after B claimed anew")
	if errors.Is(err, flightline.ErrFenced) {
		require.ErrorIs(t, err, flightline.ErrReplaced, "a stream fenced by a newer claim says so")
	}
	_ = d.Close(e.ctx)
	require.NoError(t, b.Close(e.ctx))
	require.Equal(t, seq(0, 14), sorted(h.IDs(t, e.p)))
}

// writeCP writes the batch of ids [from, to) with checkpoint cp.
func (e *env) writeCP(w flightsink.Writer, from, to int64, cp []byte) error {
	rec := e.batch(from, to)
	defer rec.Release()
	return w.WriteBatch(e.ctx, rec, cp)
}

func requireFenced(t *testing.T, err error, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	require.Truef(t, errors.Is(err, flightline.ErrFenced) || errors.Is(err, flightline.ErrConflict),
		"%s: want ErrFenced or ErrConflict, got %v", msg, err)
}

// testZombieReplay: fencing wins over replay. A fenced writer's replay of a
// batch it committed fails like any other batch of it.
func testZombieReplay(t *testing.T, h Harness) {
	e := setup(t, h)
	old, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(old, 0, 5))
	newer, cp := e.open(h.NewSink(t))
	require.Equal(t, string(CP(5)), string(cp))
	require.NoError(t, e.write(newer, 5, 8)) // over Flight, the claim rides on the first batch
	requireFenced(t, e.write(old, 0, 5), "a fenced writer's replay")
	_ = old.Close(e.ctx)
	require.NoError(t, newer.Close(e.ctx))
	require.Equal(t, seq(0, 8), sorted(h.IDs(t, e.p)))
}

// testFreshClaimedTwice: on a target that has never been written, the
// newest Open wins: the older writer is fenced, the newer one writes.
func testFreshClaimedTwice(t *testing.T, h Harness) {
	e := setup(t, h)
	a, cp := e.open(h.NewSink(t))
	require.Nil(t, cp)
	b, cp := e.open(h.NewSink(t))
	require.Nil(t, cp)
	if !h.remote {
		// In-process, Open itself claims: the older writer is fenced
		// before the newer one has written anything.
		requireFenced(t, e.write(a, 100, 105), "the older writer on a fresh target")
	}
	require.NoError(t, e.write(b, 0, 5), "the newest claim must win")
	requireFenced(t, e.write(a, 100, 105), "the older writer after the newer one wrote")
	_ = a.Close(e.ctx)
	require.NoError(t, e.write(b, 5, 9))
	require.NoError(t, b.Close(e.ctx))
	require.Equal(t, seq(0, 9), sorted(h.IDs(t, e.p)))
	got, err := h.NewSink(t).Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Equal(t, string(CP(9)), string(got))
}

// testCheckpointNoFence: Checkpoint is read-only; the writer goes on.
func testCheckpointNoFence(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 5))
	cp, err := h.NewSink(t).Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Equal(t, string(CP(5)), string(cp))
	require.NoError(t, e.write(w, 5, 10), "Checkpoint must not fence the writer")
	require.NoError(t, w.Close(e.ctx))
	require.Equal(t, seq(0, 10), sorted(h.IDs(t, e.p)))
}

// testMergeable: checkpoints in the Positions form are merged per key, to
// the maximum, in the commit; a batch covered by the merge is a replay; Open
// returns the merged checkpoint and a Flight writer resumes after it.
func testMergeable(t *testing.T, h Harness) {
	e := setup(t, h)
	pos := func(kv ...any) []byte {
		p := checkpoint.Positions{}
		for i := 0; i < len(kv); i += 2 {
			p[kv[i].(string)] = int64(kv[i+1].(int))
		}
		return p.Encode()
	}
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.writeCP(w, 0, 100, pos("m/0", 100)))
	require.NoError(t, e.writeCP(w, 1000, 1010, pos("m/1", 10)))
	// The first batch again, as a source instance that lost the second
	// partition to a rebalance and re-read its own would send it.
	require.NoError(t, e.writeCP(w, 0, 100, pos("m/0", 100)), "a batch covered by the merged checkpoint is a replay")
	require.NoError(t, w.Close(e.ctx))

	merged := string(pos("m/0", 100, "m/1", 10))
	cp, err := h.NewSink(t).Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Equal(t, merged, string(cp), "the stored checkpoint is the per-key maximum")

	w, cp = e.open(h.NewSink(t)) // over Flight: resume_after is the merged checkpoint
	require.Equal(t, merged, string(cp))
	require.NoError(t, e.writeCP(w, 100, 150, pos("m/0", 150)))
	require.NoError(t, e.writeCP(w, 1000, 1010, pos("m/1", 10)), "still a replay after a restart")
	require.NoError(t, w.Close(e.ctx))
	cp, err = h.NewSink(t).Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Equal(t, string(pos("m/0", 150, "m/1", 10)), string(cp))
	require.Equal(t, append(seq(0, 150), seq(1000, 1010)...), sorted(h.IDs(t, e.p)))
}

// testInstances: two instances of one pipeline write their partitions at
// once without fencing each other; the checkpoint is merged over them; a
// newer claim of one instance fences that instance's older writer (its
// replays too) and not the other instance.
func testInstances(t *testing.T, h Harness) {
	e := setup(t, h)
	pos := func(part int, n int64) []byte { return checkpoint.Positions{fmt.Sprintf("i/%d", part): n}.Encode() }
	both := func(a, b int64) string { return string(checkpoint.Positions{"i/0": a, "i/1": b}.Encode()) }
	a, _ := e.open(h.NewInstance(t, "a"))
	b, _ := e.open(h.NewInstance(t, "b"))
	// a writes ids 0..99 as partition i/0, b ids 1000..1099 as i/1, 20 at a
	// time, at once.
	errs := make(chan error, 2)
	for i, w := range []flightsink.Writer{a, b} {
		go func() {
			base := int64(i * 1000)
			var err error
			for n := int64(20); n <= 100 && err == nil; n += 20 {
				err = e.writeCP(w, base+n-20, base+n, pos(i, n))
			}
			errs <- err
		}()
	}
	require.NoError(t, <-errs, "instances do not fence each other")
	require.NoError(t, <-errs, "instances do not fence each other")
	cp, err := h.NewInstance(t, "c").Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Equal(t, both(100, 100), string(cp), "merged over the instances")
	require.NoError(t, e.writeCP(a, 1080, 1100, pos(1, 100)), "what another instance committed is a replay")

	a2, cp := e.open(h.NewInstance(t, "a"))
	require.Equal(t, both(100, 100), string(cp))
	require.NoError(t, e.writeCP(a2, 100, 110, pos(0, 110))) // over Flight the claim rides on it
	requireFenced(t, e.writeCP(a, 110, 120, pos(0, 120)), "a's older writer")
	requireFenced(t, e.writeCP(a, 80, 100, pos(0, 100)), "a's older writer's replay")
	require.NoError(t, e.writeCP(b, 1100, 1110, pos(1, 110)), "a's claim does not fence b")
	for _, w := range []flightsink.Writer{a, a2, b} {
		_ = w.Close(e.ctx)
	}
	require.Equal(t, append(seq(0, 110), seq(1000, 1110)...), sorted(h.IDs(t, e.p)))
	cp, err = h.NewSink(t).Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Equal(t, both(110, 110), string(cp))
}

// testTwoTargets: one pipeline id writing two targets keeps a checkpoint
// (and a claim) per target; neither fences the other.
func testTwoTargets(t *testing.T, h Harness) {
	e := setup(t, h)
	p1, p2 := e.p, e.p
	p2.Target = e.p.Target + "_b"
	s := h.NewSink(t)
	w1, _, err := s.Open(e.ctx, p1)
	require.NoError(t, err)
	w2, _, err := s.Open(e.ctx, p2)
	require.NoError(t, err)
	require.NoError(t, e.write(w1, 0, 5))
	require.NoError(t, e.write(w2, 100, 103))
	require.NoError(t, e.write(w1, 5, 10), "a second target must not fence the first")
	require.NoError(t, e.write(w2, 103, 107))
	require.NoError(t, w1.Close(e.ctx))
	require.NoError(t, w2.Close(e.ctx))
	if h.Guarantee == flightsink.ExactlyOnce {
		s = h.NewSink(t)
		cp, err := s.Checkpoint(e.ctx, p1)
		require.NoError(t, err)
		require.Equal(t, string(CP(10)), string(cp))
		cp, err = s.Checkpoint(e.ctx, p2)
		require.NoError(t, err)
		require.Equal(t, string(CP(107)), string(cp))
	}
	require.Equal(t, seq(0, 10), sorted(h.IDs(t, p1)))
	require.Equal(t, seq(100, 107), sorted(h.IDs(t, p2)))
}

// testConcurrent: several pipelines commit to one target of one sink at
// the same time; every row lands once and each keeps its own checkpoint.
func testConcurrent(t *testing.T, h Harness) {
	e := setup(t, h)
	s := h.NewSink(t)
	const pipes, batches, rows = 3, 4, 5
	errs := make(chan error, pipes)
	for i := range pipes {
		go func() {
			p := flightsink.Pipeline{ID: fmt.Sprintf("%s_%d", e.p.ID, i), Target: e.p.Target}
			w, _, err := s.Open(e.ctx, p)
			if err != nil {
				errs <- err
				return
			}
			defer w.Close(e.ctx)
			base := int64(i * 1000)
			for b := range int64(batches) {
				from := base + b*rows
				if err := e.writeCP(w, from, from+rows, CP(from+rows)); err != nil {
					errs <- fmt.Errorf("pipeline %d batch %d: %w", i, b, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range pipes {
		require.NoError(t, <-errs)
	}
	var want []int64
	for i := range pipes {
		base := int64(i * 1000)
		want = append(want, seq(base, base+batches*rows)...)
		if h.Guarantee == flightsink.ExactlyOnce {
			p := flightsink.Pipeline{ID: fmt.Sprintf("%s_%d", e.p.ID, i), Target: e.p.Target}
			cp, err := h.NewSink(t).Checkpoint(e.ctx, p)
			require.NoError(t, err)
			require.Equal(t, string(CP(base+batches*rows)), string(cp))
		}
	}
	require.Equal(t, want, sorted(h.IDs(t, e.p)))
}

// testNoCheckpoint: an at-least-once sink returns no checkpoint from
// Checkpoint or Open, whatever it has written, so the source's own position
// decides where a pipeline resumes.
func testNoCheckpoint(t *testing.T, h Harness) {
	e := setup(t, h)
	w, cp := e.open(h.NewSink(t))
	require.Nil(t, cp)
	require.NoError(t, e.write(w, 0, 5))
	require.NoError(t, w.Close(e.ctx))
	s := h.NewSink(t)
	cp, err := s.Checkpoint(e.ctx, e.p)
	require.NoError(t, err)
	require.Nil(t, cp, "an at-least-once sink declares it keeps no checkpoint")
	w, cp = e.open(s)
	require.Nil(t, cp)
	require.NoError(t, w.Close(e.ctx))
	require.Equal(t, seq(0, 5), sorted(h.IDs(t, e.p)))
}

// span is a batch of ids [from, to) with checkpoint cp (CP(to) when nil).
type span struct {
	from, to int64
	cp       []byte
}

// group commits the spans as one group: in-process with
// flightsink.WriteGroup (WriteBatches, the harness having checked the
// writer is a GroupWriter), over Flight by submitting them all to the
// DoPut stream before reading any ack, so the server finds them queued.
// It returns the first error.
func (e *env) group(w flightsink.Writer, spans ...span) error {
	batches := make([]flightsink.Batch, len(spans))
	for i, sp := range spans {
		cp := sp.cp
		if cp == nil {
			cp = CP(sp.to)
		}
		batches[i] = flightsink.Batch{Rec: e.batch(sp.from, sp.to), CP: cp}
	}
	defer func() {
		for _, b := range batches {
			b.Rec.Release()
		}
	}()
	pw, ok := w.(flightsink.PipelinedWriter)
	if !e.h.remote || !ok {
		if e.h.Group && !e.h.remote {
			_, ok := w.(flightsink.GroupWriter)
			require.True(e.t, ok, "the harness says the sink commits groups: its writer must implement flightsink.GroupWriter")
		}
		_, err := flightsink.WriteGroup(e.ctx, w, batches)
		return err
	}
	sent := 0
	for _, b := range batches {
		err := pw.Submit(e.ctx, b.Rec, b.CP)
		if errors.Is(err, flightsink.ErrWriterBroken) {
			break
		}
		if err != nil {
			return err
		}
		sent++
	}
	if sent == 0 {
		_, err := pw.Ack(e.ctx)
		return err
	}
	for i := range sent {
		got, err := pw.Ack(e.ctx)
		if err != nil {
			return err
		}
		if string(got) != string(batches[i].CP) {
			return fmt.Errorf("ack %d carries checkpoint %q, want %q (acks out of order)", i, got, batches[i].CP)
		}
	}
	return nil
}

func (e *env) checkpoint() []byte {
	cp, err := e.h.NewSink(e.t).Checkpoint(e.ctx, e.p)
	require.NoError(e.t, err)
	return cp
}

// testGroupCommit: a group commits every batch, and the checkpoint covers
// the last (and so every) batch of it.
func testGroupCommit(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 5))
	require.NoError(t, e.group(w, span{from: 5, to: 10}, span{from: 10, to: 20}, span{from: 20, to: 21}, span{from: 21, to: 30}))
	require.NoError(t, e.group(w, span{from: 30, to: 31})) // a group of one
	require.NoError(t, w.Close(e.ctx))
	require.Equal(t, string(CP(31)), string(e.checkpoint()))
	require.Equal(t, seq(0, 31), sorted(h.IDs(t, e.p)))
}

// testGroupCrashBeforeAcks: the group's commit returned, the process dies
// before any ack leaves (Close is never called). The client resends every
// batch of the group, alone and as a group: each is recognised as a
// replay, nothing is doubled, and the pipeline goes on.
func testGroupCrashBeforeAcks(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	spans := []span{{from: 0, to: 10}, {from: 10, to: 20}, {from: 20, to: 30}}
	require.NoError(t, e.group(w, spans...))
	// Crash: no ack reached the client, which resends from its last ack.
	w2, cp := e.open(h.NewSink(t))
	require.Equal(t, string(CP(30)), string(cp), "the group's checkpoint covers its last batch")
	for _, sp := range spans {
		require.NoErrorf(t, e.write(w2, sp.from, sp.to), "batch [%d, %d) of the committed group again", sp.from, sp.to)
	}
	require.NoError(t, e.group(w2, spans...), "the committed group again, as a group")
	require.NoError(t, e.group(w2, span{from: 30, to: 35}, span{from: 35, to: 40}))
	require.NoError(t, w2.Close(e.ctx))
	_ = w.Close(e.ctx)
	require.Equal(t, string(CP(40)), string(e.checkpoint()))
	require.Equal(t, seq(0, 40), sorted(h.IDs(t, e.p)), "nothing doubled")
}

// testGroupPartReplayed: a group whose first batches were committed before
// (by an earlier group whose acks were lost) writes only the rest; with
// mergeable Positions a replay may sit between new batches, and the
// group's checkpoint is the per-key maximum of all of them.
func testGroupPartReplayed(t *testing.T, h Harness) {
	e := setup(t, h)
	pos := func(kv ...any) []byte {
		p := checkpoint.Positions{}
		for i := 0; i < len(kv); i += 2 {
			p[kv[i].(string)] = int64(kv[i+1].(int))
		}
		return p.Encode()
	}
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.group(w, span{from: 0, to: 10}, span{from: 10, to: 20}))
	require.NoError(t, w.Close(e.ctx))
	w, cp := e.open(h.NewSink(t)) // a restarted client resends from before the group
	require.Equal(t, string(CP(20)), string(cp))
	require.NoError(t, e.group(w, span{from: 0, to: 10}, span{from: 10, to: 20}, span{from: 20, to: 30}, span{from: 30, to: 40}))
	require.NoError(t, w.Close(e.ctx))
	require.Equal(t, string(CP(40)), string(e.checkpoint()))
	require.Equal(t, seq(0, 40), sorted(h.IDs(t, e.p)))

	// Two keys: the replay of key a's batch between two new batches of
	// key b writes nothing, and the group commits both keys' maximum.
	e.p.Target += "_m"
	e.p.ID += "_m"
	w, _ = e.open(h.NewSink(t))
	require.NoError(t, e.writeCP(w, 0, 100, pos("a", 100)))
	require.NoError(t, w.Close(e.ctx))
	w, _ = e.open(h.NewSink(t))
	require.NoError(t, e.group(w,
		span{from: 1000, to: 1010, cp: pos("b", 10)},
		span{from: 0, to: 100, cp: pos("a", 100)}, // covered: a replay
		span{from: 1010, to: 1020, cp: pos("b", 20)},
		span{from: 1000, to: 1010, cp: pos("b", 10)}, // covered by the group's own first batch
	))
	require.NoError(t, w.Close(e.ctx))
	require.Equal(t, string(pos("a", 100, "b", 20)), string(e.checkpoint()))
	require.Equal(t, append(seq(0, 100), seq(1000, 1020)...), sorted(h.IDs(t, e.p)))
}

// testGroupFenced: fencing wins over replay in a group too. A fenced
// writer's group fails, whether it holds new batches, replays or both, and
// writes nothing.
func testGroupFenced(t *testing.T, h Harness) {
	e := setup(t, h)
	old, _ := e.open(h.NewSink(t))
	require.NoError(t, e.group(old, span{from: 0, to: 5}, span{from: 5, to: 8}))
	newer, cp := e.open(h.NewSink(t))
	require.Equal(t, string(CP(8)), string(cp))
	require.NoError(t, e.write(newer, 8, 10)) // over Flight, the claim rides on the first batch
	requireFenced(t, e.group(old, span{from: 0, to: 5}, span{from: 5, to: 8}), "a fenced writer's group of replays")
	_ = old.Close(e.ctx)
	old, _ = e.open(h.NewSink(t)) // this one is fenced in turn by the next claim
	require.NoError(t, e.write(old, 10, 11))
	newer2, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(newer2, 11, 12))
	requireFenced(t, e.group(old, span{from: 10, to: 11}, span{from: 100, to: 110}, span{from: 110, to: 120}), "a fenced writer's group of a replay and new batches")
	_ = old.Close(e.ctx)
	_ = newer.Close(e.ctx)
	require.NoError(t, e.group(newer2, span{from: 12, to: 15}, span{from: 15, to: 20}))
	require.NoError(t, newer2.Close(e.ctx))
	require.Equal(t, string(CP(20)), string(e.checkpoint()))
	require.Equal(t, seq(0, 20), sorted(h.IDs(t, e.p)))
}

// testGroupAtomic: a group with a batch the sink refuses commits nothing,
// not even the good batches before it, and the checkpoint stays.
func testGroupAtomic(t *testing.T, h Harness) {
	e := setup(t, h)
	w, _ := e.open(h.NewSink(t))
	require.NoError(t, e.write(w, 0, 5))
	gw, ok := w.(flightsink.GroupWriter)
	require.True(t, ok, "the harness says the sink commits groups: its writer must implement flightsink.GroupWriter")

	other := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(e.mem, other)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"x", "y"}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	bad := b.NewRecordBatch()
	b.Release()
	good := e.batch(5, 10)
	err := gw.WriteBatches(e.ctx, []flightsink.Batch{{Rec: good, CP: CP(10)}, {Rec: bad, CP: CP(100)}})
	good.Release()
	bad.Release()
	require.Truef(t, errors.Is(err, flightline.ErrSchemaMismatch), "want ErrSchemaMismatch, got %v", err)
	err = gw.WriteBatches(e.ctx, nil)
	require.Truef(t, errors.Is(err, flightline.ErrInvalidInput), "an empty group: want ErrInvalidInput, got %v", err)
	_ = w.Close(e.ctx)
	require.Equal(t, string(CP(5)), string(e.checkpoint()), "a failed group must not move the checkpoint")
	require.Equal(t, seq(0, 5), sorted(h.IDs(t, e.p)), "a failed group must write nothing")
}
