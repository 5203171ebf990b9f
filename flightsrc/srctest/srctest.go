// Package srctest is the conformance suite every Flightline source runs
// against its real service, in-process and over Flight.
//
// Run runs every check twice: on the Source the harness builds, and on a
// flightsrc.Client dialled (flightsrc.Dial) to that Source served by
// flightsrc.NewServer on a loopback listener. It checks the contract of
// flightsrc.Source and flightsrc.Reader and the source half of
// docs/protocol.md:
//
//   - resume: reading after a batch's checkpoint returns exactly the records
//     that checkpoint does not cover, first the ones that followed the batch,
//     then records appended since; a read cut at a checkpoint and resumed
//     from it gives every record exactly once. For a source whose records
//     name partitions (Record.Partition) the checkpoint must be in the
//     checkpoint.Positions form, and coverage is per partition: a record is
//     covered when its offset is below its partition's position;
//   - checkpoints are never empty, on every batch, heartbeats included;
//     Positions checkpoints only move forward, within a read and from the
//     checkpoint it started after: no position moves back, no key vanishes;
//   - Commit is advisory: committing a checkpoint changes nothing about where
//     a read after an explicit checkpoint starts;
//   - a Bounded stream ends with io.EOF after its last record; an unbounded
//     one never does, and while idle sends only 0-row batches;
//   - heartbeats (over Flight): an idle stream sends 0-row batches carrying
//     the last checkpoint (or, IdleCheckpointsAdvance, a later resume
//     point), also before its first batch when the read started
//     after a checkpoint;
//   - an unknown stream is flightline.ErrNotFound (gRPC NOT_FOUND, also from
//     GetFlightInfo and GetSchema); a checkpoint the source cannot parse is
//     flightline.ErrInvalidInput from Read; malformed DoGet tickets (not
//     JSON, no stream, bad base64, unparsable checkpoint) are INVALID_ARGUMENT;
//   - deterministic boundaries, for a source that declares them: two reads
//     from the same start return the same batches, rows and checkpoints;
//   - memory: every batch comes from a memory.CheckedAllocator that must
//     hold zero bytes once the case is over, including after a Reader closed
//     mid-stream, a Reader closed before its first Next, and a Next whose
//     context was already cancelled. A batch returned by Next stays readable
//     after its Reader is closed.
//
// What a harness declares is checked, never assumed: a source declared
// Bounded that does not end, or declared DeterministicBoundaries whose reads
// differ, fails. Checks that cannot apply to a declaration (heartbeats of a
// bounded stream, determinism of a source that does not declare it) skip
// with a message naming the declaration.
package srctest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// Record is one record of a stream, as Harness.Records reads it out of a
// batch.
type Record struct {
	// ID is the id the record was appended with (see Harness.Append).
	ID int64
	// Partition is the checkpoint.Positions key of the record's partition
	// ("orders/3"), for a source whose checkpoints are Positions. Leave it
	// empty for a source with one total order (a table, a file).
	Partition string
	// Offset is the record's position in its partition: a Positions
	// checkpoint p covers the record when Offset < p[Partition]. Ignored
	// when Partition is empty.
	Offset int64
}

// Harness connects the suite to one source implementation.
type Harness struct {
	// NewStream creates a fresh, empty stream on the service under test
	// and returns its name. Register any clean-up with t.Cleanup.
	NewStream func(t *testing.T) string

	// Append adds the records with ids [from, to) to stream, in id order,
	// durably: a Read opened after Append returns sees them. The suite calls
	// it with from equal to the previous call's to, starting at 0, and —
	// for an unbounded stream — also while a Reader is open, which must see
	// them too.
	Append func(t *testing.T, stream string, from, to int64)

	// NewSource returns a new Source serving stream, as a restarted process
	// would create it, building its batches with mem. It is called several
	// times per check, after Append calls. Configure small batches (at most
	// about 8 rows): the suite appends a few dozen records and needs several
	// batches. Register clean-up (Close) with t.Cleanup.
	NewSource func(t *testing.T, mem memory.Allocator, stream string) flightsrc.Source

	// Records reads the records out of a batch of stream, one per row, in
	// row order. It must not keep rec.
	Records func(t *testing.T, stream string, rec arrow.RecordBatch) []Record

	// Bounded declares that a Read ends with io.EOF once it returned every
	// record appended before it was opened. Unbounded (false) declares that
	// a Read never ends by itself, sees records appended while it is open,
	// and sends only 0-row batches while idle.
	Bounded bool

	// DeterministicBoundaries declares that two reads from the same start
	// (no checkpoint, or the same checkpoint) of the same records return
	// the same batches: the same records in each, and the same checkpoints.
	// 0-row batches are not compared.
	DeterministicBoundaries bool

	// IdleCheckpointsAdvance declares that the checkpoint of an idle
	// stream's heartbeats may move past the last record's: a change
	// stream confirms the log it skipped (others' writes), so that an
	// idle source does not hold the database's log back. The suite then
	// checks that such a checkpoint is a resume point instead of equal to
	// the last record's: a read from it, after more records are appended,
	// returns exactly those records. Without it (the default) every
	// heartbeat carries the last checkpoint.
	IdleCheckpointsAdvance bool
}

// Sizes of the suite's streams.
const (
	firstRecords = 40 // appended before the first read
	moreRecords  = 30 // appended later: while a reader is open when unbounded
)

// Run runs the suite as subtests of t: every check in-process ("Local") and
// through flightsrc.NewServer + flightsrc.Dial ("Flight").
func Run(t *testing.T, h Harness) {
	if h.NewStream == nil || h.Append == nil || h.NewSource == nil || h.Records == nil {
		t.Fatal("srctest: Harness needs NewStream, Append, NewSource and Records")
	}
	for _, overFlight := range []bool{false, true} {
		name := "Local"
		if overFlight {
			name = "Flight"
		}
		t.Run(name, func(t *testing.T) {
			run := func(name string, f func(e *env)) {
				t.Run(name, func(t *testing.T) { f(setup(t, h, overFlight)) })
			}
			run("ResumeAfterCheckpoint", testResume)
			run("DeterministicBoundaries", testDeterministic)
			run("EndOfStream", testEnd)
			run("CommitIsAdvisory", testCommit)
			run("UnknownStreamNotFound", testUnknownStream)
			run("BadCheckpointInvalid", testBadCheckpoint)
			run("CloseMidStream", testClose)
			if overFlight {
				run("Discovery", testDiscovery)
				run("Heartbeats", testHeartbeats)
				run("MalformedTickets", testMalformedTickets)
			}
		})
	}
}

// HeartbeatInterval is the server heartbeat interval of the suite's Flight
// servers.
const HeartbeatInterval = 50 * time.Millisecond

type env struct {
	h          Harness
	t          *testing.T
	ctx        context.Context
	mem        *memory.CheckedAllocator
	overFlight bool
	stream     string
	pipeline   string
	appended   int64  // the next id to append
	url        string // the last Flight server's URL
}

var quiet = slog.New(slog.DiscardHandler)

func setup(t *testing.T, h Harness, overFlight bool) *env {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	// Registered first, so it runs last: after the servers stopped and the
	// harness closed its sources.
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	e := &env{h: h, t: t, ctx: ctx, mem: mem, overFlight: overFlight}
	e.stream = h.NewStream(t)
	e.pipeline = fmt.Sprintf("srctest-%s-%06d", sanitize(t.Name()), rand.IntN(1e6))
	return e
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s[strings.Index(s, "/")+1:] {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > 40 {
		out = out[len(out)-40:]
	}
	return out
}

// append adds n records after the last appended one.
func (e *env) append(n int64) {
	e.h.Append(e.t, e.stream, e.appended, e.appended+n)
	e.appended += n
}

// source returns a new Source for the stream: the harness's, or a client of
// it served over Flight on a fresh loopback server.
func (e *env) source() flightsrc.Source {
	src := e.h.NewSource(e.t, e.mem, e.stream)
	if !e.overFlight {
		return src
	}
	e.url = flighttest.Serve(e.t, flightsrc.NewServer(src, flightsrc.WithAllocator(e.mem), flightsrc.WithLogger(quiet),
		flightsrc.WithHeartbeat(HeartbeatInterval)), endpoint.ServerConfig{})
	c, err := flightsrc.DialWithAllocator(e.url, flightsrc.ClientConfig{}, e.mem)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = c.Close() }) // before the server stops
	return c
}

func (e *env) open(src flightsrc.Source, after []byte) flightsrc.Reader {
	rd, err := src.Read(e.ctx, flightsrc.ReadRequest{Stream: e.stream, Pipeline: e.pipeline, After: after})
	require.NoError(e.t, err, "Read after %s", after)
	return rd
}

// batch is what one Next returned.
type batch struct {
	recs []Record
	cp   []byte
}

func ids(recs []Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func flatten(bs []batch) []Record {
	var out []Record
	for _, b := range bs {
		out = append(out, b.recs...)
	}
	return out
}

// nonEmpty returns the batches that hold rows.
func nonEmpty(bs []batch) []batch {
	var out []batch
	for _, b := range bs {
		if len(b.recs) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// next calls Next and checks what every batch must be: a non-empty
// checkpoint, the Reader's schema, one Record per row.
func (e *env) next(ctx context.Context, rd flightsrc.Reader) (batch, error) {
	rec, cp, err := rd.Next(ctx)
	if err != nil {
		require.Nil(e.t, rec, "Next returned a batch with error %v", err)
		return batch{}, err
	}
	defer rec.Release()
	require.NotEmpty(e.t, cp, "every batch carries a checkpoint (%d rows)", rec.NumRows())
	require.Truef(e.t, rec.Schema().Equal(rd.Schema()), "batch schema %s, Reader.Schema %s", rec.Schema(), rd.Schema())
	recs := e.h.Records(e.t, e.stream, rec)
	require.Len(e.t, recs, int(rec.NumRows()), "Harness.Records returns one Record per row")
	return batch{recs: recs, cp: cp}, nil
}

// read reads rd, opened after the checkpoint after, until it has returned
// every id in want — or, for a Bounded source, until io.EOF — and returns
// every batch, 0-row ones included. It fails the test if that takes longer
// than a minute, and checks that Positions checkpoints only move forward.
func (e *env) read(rd flightsrc.Reader, after []byte, want []int64) []batch {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	missing := map[int64]bool{}
	for _, id := range want {
		missing[id] = true
	}
	var out []batch
	for e.h.Bounded || len(missing) > 0 {
		b, err := e.next(ctx, rd)
		if e.h.Bounded && errors.Is(err, io.EOF) {
			return out
		}
		require.NoErrorf(e.t, err, "Next, still waiting for %d of %d records (Bounded=%v)", len(missing), len(want), e.h.Bounded)
		for _, r := range b.recs {
			delete(missing, r.ID)
		}
		out = append(out, b)
		e.forward(after, b.cp)
		after = b.cp
	}
	return out
}

// forward asserts that when prev and cp are both Positions, cp holds every
// key of prev at the same or a later position: within a read, and from the
// checkpoint a read started after, a source never moves a partition back
// or drops one (a sink that stores checkpoints as they come would lose the
// dropped partition's position).
func (e *env) forward(prev, cp []byte) {
	e.t.Helper()
	p, err := checkpoint.Parse(prev)
	if err != nil {
		return
	}
	c, err := checkpoint.Parse(cp)
	if err != nil {
		return
	}
	for k, v := range p {
		n, ok := c[k]
		require.Truef(e.t, ok && n >= v, "checkpoint %s after %s: position %q must not move back or vanish", cp, prev, k)
	}
}

// readFrom opens a new source, reads after cp and closes the reader.
func (e *env) readFrom(cp []byte, want []int64) []batch {
	rd := e.open(e.source(), cp)
	defer rd.Close()
	return e.read(rd, cp, want)
}

func seq(from, to int64) []int64 {
	out := make([]int64, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// without returns the ids of [0, n) that are not in got.
func without(n int64, got []Record) []int64 {
	seen := map[int64]bool{}
	for _, r := range got {
		seen[r.ID] = true
	}
	var out []int64
	for i := range n {
		if !seen[i] {
			out = append(out, i)
		}
	}
	return out
}

// exactlyOnce asserts recs hold every id of [0, n) once and nothing else.
func (e *env) exactlyOnce(recs []Record, n int64, what string) {
	e.t.Helper()
	count := map[int64]int{}
	for _, r := range recs {
		count[r.ID]++
	}
	var dup, missing, foreign []int64
	for id, c := range count {
		switch {
		case id < 0 || id >= n:
			foreign = append(foreign, id)
		case c > 1:
			dup = append(dup, id)
		}
	}
	for i := range n {
		if count[i] == 0 {
			missing = append(missing, i)
		}
	}
	slices.Sort(dup)
	slices.Sort(foreign)
	require.Emptyf(e.t, missing, "%s: missing records", what)
	require.Emptyf(e.t, dup, "%s: duplicated records", what)
	require.Emptyf(e.t, foreign, "%s: records never appended", what)
}

// inOrder asserts offsets grow within every partition of one read.
func (e *env) inOrder(recs []Record) {
	e.t.Helper()
	last := map[string]int64{}
	for _, r := range recs {
		if r.Partition == "" {
			continue
		}
		if l, ok := last[r.Partition]; ok {
			require.Greaterf(e.t, r.Offset, l, "offsets grow within partition %s (record %d)", r.Partition, r.ID)
		}
		last[r.Partition] = r.Offset
	}
}

func partitioned(recs []Record) bool {
	return slices.ContainsFunc(recs, func(r Record) bool { return r.Partition != "" })
}

// checkResume checks a read after first[k].cp: before holds the records of
// first[:k+1], after those of the resumed read; the stream holds [0, n).
func (e *env) checkResume(first []batch, k int, after []Record, n int64) {
	e.t.Helper()
	cp := first[k].cp
	before := flatten(first[:k+1])
	e.inOrder(after)
	e.exactlyOnce(append(slices.Clone(before), after...), n,
		fmt.Sprintf("records up to batch %d, then the records read after its checkpoint %s", k, cp))
	all := append(slices.Clone(before), after...)
	if partitioned(all) {
		pos, err := checkpoint.Parse(cp)
		require.NoErrorf(e.t, err, "records name partitions, so checkpoints must be checkpoint.Positions: %s", cp)
		for _, r := range before {
			p, ok := pos[r.Partition]
			require.Truef(e.t, ok && r.Offset < p, "checkpoint %s must cover record %d (%s@%d), returned before it", cp, r.ID, r.Partition, r.Offset)
		}
		for _, r := range after {
			p, ok := pos[r.Partition]
			require.Falsef(e.t, ok && r.Offset < p, "record %d (%s@%d) is covered by checkpoint %s: it must not be read after it", r.ID, r.Partition, r.Offset, cp)
		}
		return
	}
	// One total order: the resumed read starts with exactly the records
	// that followed batch k, in the same order.
	rest := ids(flatten(first[k+1:]))
	got := ids(after)
	require.GreaterOrEqual(e.t, len(got), len(rest))
	require.Equalf(e.t, rest, got[:len(rest)], "after checkpoint %s the read goes on with the records that followed it, in order", cp)
}

// readAll appends n records to a fresh stream and reads them all from the
// source's default start.
func (e *env) readAll(n int64) []batch {
	e.append(n)
	first := e.readFrom(nil, seq(0, e.appended))
	e.inOrder(flatten(first))
	e.exactlyOnce(flatten(first), e.appended, "a read from the default start")
	require.GreaterOrEqualf(e.t, len(nonEmpty(first)), 3,
		"%d records came in %d batches: configure the harness's source with small batches", n, len(nonEmpty(first)))
	return first
}

// checkpoints returns the indices of the batches to resume after: the
// first batch (even a 0-row one), the middle one of those with rows, and
// the last; mid is the middle one. bs has at least 3 batches with rows, so
// mid is neither the first nor the last batch with rows.
func checkpoints(bs []batch) (ks []int, mid int) {
	var withRows []int
	for i, b := range bs {
		if len(b.recs) > 0 {
			withRows = append(withRows, i)
		}
	}
	mid = withRows[len(withRows)/2]
	return slices.Compact([]int{0, mid, len(bs) - 1}), mid
}

func testResume(e *env) {
	first := e.readAll(firstRecords)
	ks, mid := checkpoints(first)

	// Resume mid-stream while records keep arriving.
	n := e.appended + moreRecords
	var after []batch
	if e.h.Bounded {
		e.append(moreRecords) // a bounded read sees what was there at Read
		after = e.readFrom(first[mid].cp, without(n, flatten(first[:mid+1])))
	} else {
		rd := e.open(e.source(), first[mid].cp)
		e.append(moreRecords)
		after = e.read(rd, first[mid].cp, without(n, flatten(first[:mid+1])))
		require.NoError(e.t, rd.Close())
	}
	e.checkResume(first, mid, flatten(after), n)

	// Every other checkpoint, with all records in place.
	for _, k := range ks {
		if k == mid {
			continue
		}
		after := e.readFrom(first[k].cp, without(n, flatten(first[:k+1])))
		e.checkResume(first, k, flatten(after), n)
	}

	// Resuming after a checkpoint taken from a resumed read works the same.
	ab := nonEmpty(after)
	if len(ab) > 1 {
		cp := ab[0].cp
		rest := flatten(ab[1:])
		again := e.readFrom(cp, ids(rest))
		e.exactlyOnce(append(append(slices.Clone(flatten(first[:mid+1])), ab[0].recs...), flatten(again)...), n,
			"a read resumed twice")
	}
}

func testDeterministic(e *env) {
	if !e.h.DeterministicBoundaries {
		e.t.Skip("the harness does not declare DeterministicBoundaries")
	}
	first := e.readAll(firstRecords)
	same := func(a, b []batch, what string) {
		e.t.Helper()
		a, b = nonEmpty(a), nonEmpty(b)
		require.Equalf(e.t, len(a), len(b), "%s: the same number of batches", what)
		for i := range a {
			require.Equalf(e.t, ids(a[i].recs), ids(b[i].recs), "%s: batch %d holds the same records", what, i)
			require.Equalf(e.t, string(a[i].cp), string(b[i].cp), "%s: batch %d has the same checkpoint", what, i)
		}
	}
	same(first, e.readFrom(nil, seq(0, e.appended)), "two reads from the default start")
	_, mid := checkpoints(first)
	for _, k := range []int{0, mid} {
		want := without(e.appended, flatten(first[:k+1]))
		a := e.readFrom(first[k].cp, want)
		b := e.readFrom(first[k].cp, want)
		same(a, b, fmt.Sprintf("two reads after checkpoint %s", first[k].cp))
		same(first[k+1:], a, fmt.Sprintf("the first read and a read after its checkpoint %s", first[k].cp))
	}
}

func testEnd(e *env) {
	first := e.readAll(20)
	last := first[len(first)-1].cp
	src := e.source()
	rd := e.open(src, last)
	defer rd.Close()
	if e.h.Bounded {
		// read already returned at io.EOF; a read after the last checkpoint
		// ends at once, without records.
		rest := e.read(rd, last, nil)
		require.Empty(e.t, flatten(rest), "a read after the last checkpoint of a bounded stream returns nothing")
		return
	}
	// Unbounded: idle, never io.EOF; 0-row batches only, until ctx ends.
	ctx, cancel := context.WithTimeout(e.ctx, 500*time.Millisecond)
	defer cancel()
	for {
		b, err := e.next(ctx, rd)
		if err != nil {
			require.Falsef(e.t, errors.Is(err, io.EOF), "an unbounded stream must not end (declared Bounded=false)")
			require.ErrorIsf(e.t, err, context.DeadlineExceeded, "Next returns ctx.Err() when ctx ends first")
			break
		}
		require.Empty(e.t, b.recs, "an idle stream sends 0-row batches only")
	}
}

func testCommit(e *env) {
	first := e.readAll(firstRecords)
	_, mid := checkpoints(first)
	last := len(first) - 1
	src := e.source()
	require.NoError(e.t, src.Commit(e.ctx, flightsrc.CommitRequest{Stream: e.stream, Pipeline: e.pipeline, Checkpoint: first[last].cp}),
		"committing a checkpoint the source made")
	rd := e.open(src, first[mid].cp)
	after := e.read(rd, first[mid].cp, without(e.appended, flatten(first[:mid+1])))
	require.NoError(e.t, rd.Close())
	e.checkResume(first, mid, flatten(after), e.appended)

	// And backwards: a commit of an earlier checkpoint does not move a read
	// after a later one back.
	require.NoError(e.t, src.Commit(e.ctx, flightsrc.CommitRequest{Stream: e.stream, Pipeline: e.pipeline, Checkpoint: first[0].cp}))
	from := e.appended
	e.append(5)
	after = e.readFrom(first[last].cp, seq(from, e.appended))
	e.checkResume(first, last, flatten(after), e.appended)
}

func testUnknownStream(e *env) {
	e.append(3)
	src := e.source()
	missing := e.stream + "-missing"
	_, err := src.Read(e.ctx, flightsrc.ReadRequest{Stream: missing, Pipeline: e.pipeline})
	require.ErrorIsf(e.t, err, flightline.ErrNotFound, "Read of an unknown stream")
	_, err = src.Read(e.ctx, flightsrc.ReadRequest{Stream: missing, Pipeline: e.pipeline, After: []byte("not a checkpoint")})
	require.ErrorIsf(e.t, err, flightline.ErrNotFound, "Read of an unknown stream, with a checkpoint")

	streams, err := src.Streams(e.ctx)
	require.NoError(e.t, err)
	i := slices.IndexFunc(streams, func(s flightsrc.Stream) bool { return s.Name == e.stream })
	require.GreaterOrEqualf(e.t, i, 0, "Streams lists %q", e.stream)
	require.False(e.t, slices.ContainsFunc(streams, func(s flightsrc.Stream) bool { return s.Name == missing }))
	rd := e.open(src, nil)
	require.Truef(e.t, streams[i].Schema.Equal(rd.Schema()), "Streams' schema %s, Reader's %s", streams[i].Schema, rd.Schema())
	require.NoError(e.t, rd.Close())

	if !e.overFlight {
		return
	}
	fc := e.rawClient()
	for _, d := range []*flight.FlightDescriptor{{Type: flight.DescriptorPATH, Path: []string{missing}}} {
		_, err := fc.GetFlightInfo(e.ctx, d)
		require.Equalf(e.t, codes.NotFound, status.Code(err), "GetFlightInfo of an unknown stream: %v", err)
		_, err = fc.GetSchema(e.ctx, d)
		require.Equalf(e.t, codes.NotFound, status.Code(err), "GetSchema of an unknown stream: %v", err)
	}
	ticket, _ := json.Marshal(flightsrc.Ticket{Stream: missing, PipelineID: e.pipeline})
	require.Equal(e.t, codes.NotFound, e.doGetCode(fc, ticket), "DoGet of an unknown stream")
}

// badCheckpoints are bytes no source's checkpoint parser accepts.
var badCheckpoints = [][]byte{
	[]byte("not a checkpoint"),
	[]byte("{"),
	[]byte("[]"),
	[]byte(`{"srctest_unknown_field":1}`),
}

func testBadCheckpoint(e *env) {
	e.append(3)
	src := e.source()
	for _, cp := range badCheckpoints {
		rd, err := src.Read(e.ctx, flightsrc.ReadRequest{Stream: e.stream, Pipeline: e.pipeline, After: cp})
		if rd != nil {
			_ = rd.Close()
		}
		require.ErrorIsf(e.t, err, flightline.ErrInvalidInput, "Read after the checkpoint %q", cp)
	}
}

func testClose(e *env) {
	e.append(firstRecords)

	// Closed mid-stream, while the source (and, over Flight, the server and
	// the client) still hold batches; the caller's batch stays readable.
	rd := e.open(e.source(), nil)
	var held arrow.RecordBatch
	for held == nil {
		rec, cp, err := rd.Next(e.ctx)
		require.NoError(e.t, err)
		require.NotEmpty(e.t, cp)
		if rec.NumRows() > 0 {
			held = rec
		} else {
			rec.Release()
		}
	}
	want := ids(e.h.Records(e.t, e.stream, held))
	require.NoError(e.t, rd.Close())
	require.Equal(e.t, want, ids(e.h.Records(e.t, e.stream, held)), "a batch Next returned stays valid after Close")
	held.Release()
	require.NoError(e.t, rd.Close(), "Close twice")

	// Closed before its first Next.
	rd = e.open(e.source(), nil)
	require.NoError(e.t, rd.Close())

	// A Next whose context is already over: ctx.Err(), or a batch that was
	// ready; either way nothing leaks.
	rd = e.open(e.source(), nil)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	rec, _, err := rd.Next(ctx)
	if err != nil {
		require.ErrorIsf(e.t, err, context.Canceled, "Next with a cancelled context")
	} else {
		rec.Release()
	}
	require.NoError(e.t, rd.Close())
}

func testHeartbeats(e *env) {
	if e.h.Bounded {
		e.t.Skip("the harness declares Bounded: a bounded stream is never idle (EndOfStream checks that it ends)")
	}
	e.readAll(20)
	// The heartbeats after the last record of a read, and those of a read
	// that starts idle, after that last checkpoint.
	rd := e.open(e.source(), nil)
	bs := e.read(rd, nil, seq(0, e.appended))
	cp := bs[len(bs)-1].cp
	idle := e.heartbeats(rd, cp)
	require.NoError(e.t, rd.Close())
	cp = e.idleResume(cp, idle)

	rd = e.open(e.source(), cp)
	idle = e.heartbeats(rd, cp)
	require.NoError(e.t, rd.Close())
	e.idleResume(cp, idle)
}

// heartbeats reads three batches of an idle stream, within a few heartbeat
// intervals: each has 0 rows and carries cp (with IdleCheckpointsAdvance:
// a checkpoint, which idleResume checks). It returns the last one.
func (e *env) heartbeats(rd flightsrc.Reader, cp []byte) []byte {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 40*HeartbeatInterval+5*time.Second)
	defer cancel()
	last := cp
	for i := range 3 {
		b, err := e.next(ctx, rd)
		require.NoErrorf(e.t, err, "heartbeat %d of an idle stream", i)
		require.Emptyf(e.t, b.recs, "heartbeat %d has no rows", i)
		if !e.h.IdleCheckpointsAdvance {
			require.Equalf(e.t, string(cp), string(b.cp), "heartbeat %d carries the last checkpoint", i)
		}
		require.NotEmptyf(e.t, b.cp, "heartbeat %d carries a checkpoint", i)
		last = b.cp
	}
	return last
}

// idleResume checks, where a heartbeat moved the checkpoint from cp to
// last (IdleCheckpointsAdvance), that last resumes after every record read
// so far and before every record appended later, and returns the
// checkpoint after those; where it did not move, it returns cp. Call it
// with no reader of the stream open.
func (e *env) idleResume(cp, last []byte) []byte {
	e.t.Helper()
	if string(last) == string(cp) {
		return cp
	}
	from := e.appended
	e.append(3)
	var got []Record
	bs := e.readFrom(last, seq(from, e.appended))
	for _, b := range bs {
		got = append(got, b.recs...)
	}
	ids := make([]int64, len(got))
	for i, r := range got {
		ids[i] = r.ID
	}
	require.Equalf(e.t, seq(from, e.appended), ids, "a read after the idle checkpoint %s returns exactly the records appended after it", last)
	return bs[len(bs)-1].cp
}

func (e *env) rawClient() flight.Client {
	e.t.Helper()
	fc, err := flight.NewClientWithMiddleware(strings.TrimPrefix(e.url, "grpc://"), nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = fc.Close() }) // before the server stops
	return fc
}

// doGetCode sends a raw ticket and returns the code the stream ends with.
func (e *env) doGetCode(fc flight.Client, ticket []byte) codes.Code {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	st, err := fc.DoGet(ctx, &flight.Ticket{Ticket: ticket})
	if err != nil {
		return status.Code(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return codes.OK
			}
			return status.Code(err)
		}
	}
}

// testDiscovery reads the stream as a client written from
// docs/protocol.md would: ListFlights and GetFlightInfo describe it, and the
// ticket of GetFlightInfo's endpoint reads it from the default start.
func testDiscovery(e *env) {
	e.append(firstRecords)
	e.source() // serves e.url
	fc := e.rawClient()
	d := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{e.stream}}
	fi, err := fc.GetFlightInfo(e.ctx, d)
	require.NoError(e.t, err)
	require.Equal(e.t, []string{e.stream}, fi.GetFlightDescriptor().GetPath())
	sc, err := flight.DeserializeSchema(fi.Schema, e.mem)
	require.NoError(e.t, err)
	sr, err := fc.GetSchema(e.ctx, d)
	require.NoError(e.t, err)
	sc2, err := flight.DeserializeSchema(sr.Schema, e.mem)
	require.NoError(e.t, err)
	require.True(e.t, sc.Equal(sc2), "GetFlightInfo and GetSchema agree")

	lf, err := fc.ListFlights(e.ctx, &flight.Criteria{})
	require.NoError(e.t, err)
	listed := false
	for {
		info, err := lf.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(e.t, err)
		listed = listed || slices.Equal(info.GetFlightDescriptor().GetPath(), []string{e.stream})
	}
	require.Truef(e.t, listed, "ListFlights lists %q", e.stream)

	require.Len(e.t, fi.Endpoint, 1)
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	st, err := fc.DoGet(ctx, fi.Endpoint[0].Ticket)
	require.NoError(e.t, err)
	rd, err := flight.NewRecordReader(st, ipc.WithAllocator(e.mem))
	require.NoError(e.t, err)
	defer rd.Release()
	require.Truef(e.t, sc.Equal(rd.Schema()), "the stream's schema %s, GetFlightInfo's %s", rd.Schema(), sc)
	var recs []Record
	for (e.h.Bounded || int64(len(recs)) < e.appended) && rd.Next() {
		require.NotEmpty(e.t, rd.LatestAppMetadata(), "every message carries a checkpoint")
		recs = append(recs, e.h.Records(e.t, e.stream, rd.RecordBatch())...)
	}
	if e.h.Bounded {
		require.NoError(e.t, rd.Err(), "a bounded stream ends cleanly")
	}
	cancel() // an unbounded stream is abandoned here
	e.exactlyOnce(recs, e.appended, "a read with GetFlightInfo's ticket")
}

func testMalformedTickets(e *env) {
	e.append(3)
	e.source() // serves e.url
	fc := e.rawClient()
	b64 := base64.StdEncoding.EncodeToString
	stream, _ := json.Marshal(e.stream)
	tickets := map[string]string{
		"not JSON":             `orders`,
		"JSON, not an object":  `["` + e.stream + `"]`,
		"no stream":            `{"pipeline_id":"p"}`,
		"empty stream":         `{"stream":""}`,
		"stream not a string":  `{"stream":7}`,
		"checkpoint not b64":   `{"stream":` + string(stream) + `,"checkpoint":"%%% not base64 %%%"}`,
		"checkpoint not a b64": `{"stream":` + string(stream) + `,"checkpoint":7}`,
	}
	for _, cp := range badCheckpoints {
		tickets[fmt.Sprintf("unparsable checkpoint %q", cp)] = `{"stream":` + string(stream) + `,"checkpoint":"` + b64(cp) + `"}`
	}
	for what, ticket := range tickets {
		require.Equalf(e.t, codes.InvalidArgument, e.doGetCode(fc, []byte(ticket)), "DoGet with a malformed ticket (%s): %s", what, ticket)
	}
	for _, d := range []*flight.FlightDescriptor{
		{Type: flight.DescriptorCMD, Cmd: []byte(e.stream)},
		{Type: flight.DescriptorPATH},
		{Type: flight.DescriptorPATH, Path: []string{e.stream, "extra"}},
	} {
		_, err := fc.GetFlightInfo(e.ctx, d)
		require.Equalf(e.t, codes.InvalidArgument, status.Code(err), "GetFlightInfo(%v): %v", d, err)
		_, err = fc.GetSchema(e.ctx, d)
		require.Equalf(e.t, codes.InvalidArgument, status.Code(err), "GetSchema(%v): %v", d, err)
	}
}
