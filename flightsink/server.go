package flightsink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/flightwire"
	"github.com/flightline/flightline/internal/ipcguard"
	"github.com/flightline/flightline/internal/metrics"
)

// Server serves a Sink as an Arrow Flight DoPut endpoint. Register it with
// flight.RegisterFlightServiceServer. Safe for concurrent streams.
type Server struct {
	flight.BaseFlightServer
	sink    Sink
	mem     memory.Allocator
	log     *slog.Logger
	metrics *metrics.Metrics

	validate bool  // ValidateBatch every batch before the Writer sees it
	maxBatch int64 // bound on what one IPC message may make the reader allocate
	group    GroupLimits
	budget   int64 // WithPipelineBytes
	claims   claimRegistry

	onReceive func() // test hook: the prefetch goroutine received a message
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithAllocator sets the allocator incoming batches are decoded into; nil
// means memory.DefaultAllocator, the default.
func WithAllocator(mem memory.Allocator) ServerOption {
	return func(s *Server) {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		s.mem = mem
	}
}

// WithLogger sets the logger; nil means slog.Default(), the default.
func WithLogger(l *slog.Logger) ServerOption {
	return func(s *Server) {
		if l == nil {
			l = slog.Default()
		}
		s.log = l
	}
}

// WithMetrics records what the server commits in Flightline's metrics (role
// "sink") registered on reg. Components given the same reg share the
// collectors. nil records nothing, the default.
func WithMetrics(reg prometheus.Registerer) ServerOption {
	return func(s *Server) { s.metrics = metrics.For(reg) }
}

// WithValidation turns the full validation of every received batch
// (ValidateBatch) on or off; default on. Turn it off only to measure what
// it costs: without it, a malformed batch reaches the sink's writer, which
// may commit it or fail with INTERNAL.
func WithValidation(on bool) ServerOption { return func(s *Server) { s.validate = on } }

// WithMaxBatchBytes bounds what one received IPC message may make the
// server allocate: the sum of the uncompressed lengths its compressed
// buffers declare, and row counts at one bit per value. Default (and
// ceiling, for n <= 0) endpoint.MaxMessageSize, the gRPC message limit.
func WithMaxBatchBytes(n int64) ServerOption {
	return func(s *Server) {
		if n <= 0 || n > endpoint.MaxMessageSize {
			n = endpoint.MaxMessageSize
		}
		s.maxBatch = n
	}
}

// WithGroupCommit bounds the groups the server hands to a GroupWriter in
// one WriteBatches call: batches that have already arrived on the DoPut
// stream when the previous commit returns, up to l.MaxBatches of them and
// l.MaxBytes of Arrow buffers (defaults DefaultGroupBatches and
// DefaultGroupBytes). l.MaxBatches == 1 turns group commit off: every
// batch is committed alone. The server never waits for a group to fill.
func WithGroupCommit(l GroupLimits) ServerOption {
	return func(s *Server) { s.group = l.Norm() }
}

// NewServer returns a Flight server for sink.
func NewServer(sink Sink, opts ...ServerOption) *Server {
	s := &Server{sink: sink, mem: memory.DefaultAllocator, log: slog.Default(), validate: true, maxBatch: endpoint.MaxMessageSize,
		group: GroupLimits{}.Norm()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// DoPut claims the pipeline named by the descriptor, commits every batch
// with the checkpoint in its app_metadata, and acknowledges each commit, in
// order, with a PutResult whose app_metadata is that checkpoint.
//
// Claims: the server records, per pipeline and target, the newest claim
// it made and the descriptor's claim id (PutCommand.Claim). A rejoin
// (PutCommand.Rejoin) whose id is not the newest recorded claim's is
// refused with flightline.ErrReplaced before anything is claimed; a
// stream fenced by a newer claim recorded here fails with ErrReplaced too.
// The check, the sink's Open and the record are one step per pipeline
// (docs/protocol.md, "Rejoining a claim"). The record lives in memory.
//
// Pipelining and group commit: a goroutine receives the stream's messages
// ahead of the commits (at most twice the group bound of them), the
// handler decodes and validates them, and another goroutine commits them
// in order and sends the acks, holding at most WithPipelineBytes of
// batches between receipt and commit. When the Writer is a Stager, the
// batches queued behind a commit are staged (encoded and written, not
// committed) meanwhile, on up to GOMAXPROCS goroutines. When the Writer is
// a GroupWriter and, once a commit returns, more than one batch is ready,
// they are committed in one WriteBatches (or CommitStaged) call (bounded
// by WithGroupCommit) and then acked one by one, in order. The server
// never waits for more batches than have arrived: at a low rate every
// group is a batch alone. A group that fails commits nothing and acks
// nothing of it; the batches received before a malformed one are
// committed and acked before the call fails.
//
// Every message is checked before arrow-go decodes it (ipcguard.Check:
// metadata version, body length, buffers inside the body, declared
// uncompressed sizes within the batch bound) and every decoded batch is
// validated (ValidateBatch) before the Writer sees it; both failures are
// INVALID_ARGUMENT with nothing committed. A panic in the Writer is
// recovered: the Writer is closed (it commits nothing), the batch released,
// the panic and its stack logged, and the call fails with
// flightline.ErrInternal (INTERNAL, reason INTERNAL_BUG: do not retry).
func (s *Server) DoPut(stream flight.FlightService_DoPutServer) (err error) {
	ctx := stream.Context()
	pipeline := ""
	defer func() {
		if err != nil {
			err = flighterr.ToStatus(err)
			s.metrics.Error("sink", pipeline, status.Code(err).String())
			if status.Code(err) != codes.Canceled {
				s.log.Warn("DoPut failed", "pipeline", flighterr.Clip(pipeline), "err", err)
			}
		}
	}()
	// Runs before the status mapping above and after the deferred Close
	// and Release below, which run while the panic unwinds.
	defer flighterr.Recover(s.log, func() string { return fmt.Sprintf("DoPut of pipeline %q", flighterr.Clip(pipeline)) }, &err)

	pre := flightwire.NewPrefetch(stream, 2*s.group.MaxBatches, s.onReceive)
	defer pre.Stop()
	rdr, err := flightwire.NewReader(pre, s.maxBatch, s.mem)
	if err != nil {
		if errors.Is(err, flightwire.ErrMalformed) || errors.Is(err, ipcguard.ErrMalformed) {
			return fmt.Errorf("%w: DoPut schema message: %v", flightline.ErrInvalidInput, err)
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: DoPut stream ended before its schema", flightline.ErrInvalidInput)
		}
		if st, ok := status.FromError(err); ok {
			return st.Err()
		}
		return fmt.Errorf("%w: reading DoPut schema: %v", flightline.ErrInvalidInput, err)
	}
	defer rdr.Release()

	req, err := parseDescriptor(rdr.LatestFlightDescriptor())
	if err != nil {
		return err
	}
	p := req.p
	pipeline = p.ID
	w, last, mine, err := s.claim(ctx, req)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := w.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if req.check && !checkpoint.Same(req.expect, last) {
		// It moved between the look and the claim.
		return fmt.Errorf("%w: pipeline %q has moved since the writer read its checkpoint; re-read it and resume", flightline.ErrConflict, flighterr.Clip(p.ID))
	}
	s.log.Debug("DoPut opened", "pipeline", flighterr.Clip(p.ID), "target", flighterr.Clip(p.Target), "schema", rdr.Schema())

	// The pipe commits what this loop decodes, in order, on a goroutine
	// of its own, staging the batches queued behind a commit (Stager) and
	// grouping what is staged when a commit returns; it sends the acks.
	var commitErr, sendErr error
	pp := newPipe(w, s.group, s.budget, func(group []*item, done int, took time.Duration, err error) bool {
		per := took / time.Duration(len(group))
		for _, it := range group[:done] {
			s.metrics.Committed("sink", p.ID, it.b.Rec.NumRows(), int64(util.TotalRecordSize(it.b.Rec)), per)
			if err := stream.Send(&flight.PutResult{AppMetadata: it.b.CP}); err != nil {
				sendErr = err // the batch is committed; the client re-reads the checkpoint
				pre.Stop()    // the loop below stops reading
				return false
			}
		}
		if err != nil {
			commitErr = err
			pre.Stop()
			return false
		}
		return true
	})
	// A panic in the sink's commit, on the pipe's goroutine, fails the
	// call as one in this handler would (flighterr.Recover).
	pp.panicked = func(r any) error {
		c := fmt.Sprintf("DoPut of pipeline %q", flighterr.Clip(pipeline))
		s.log.Error(c+" panicked; the call fails with INTERNAL", "panic", flighterr.Clip(fmt.Sprint(r)), "stack", string(debug.Stack()))
		return fmt.Errorf("%w: %s", flightline.ErrInternal, c)
	}
	defer pp.Abort() // a no-op once finished
	n := 0           // batches received
	var rerr error
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if s.validate {
			if err := ValidateBatch(rec); err != nil {
				rerr = fmt.Errorf("batch %d of pipeline %q: %w", n, flighterr.Clip(p.ID), err)
				break
			}
		}
		// Submit takes its own reference: the reader releases rec on its
		// next Next.
		if err := pp.Submit(ctx, Batch{Rec: rec, CP: bytes.Clone(rdr.LatestAppMetadata())}); err != nil {
			break // the pipe stopped: commitErr or sendErr says why
		}
		n++
	}
	// What was received before an error is committed and acked first.
	pp.Finish()
	if sendErr != nil {
		return sendErr
	}
	if commitErr != nil {
		if errors.Is(commitErr, flightline.ErrFenced) && !errors.Is(commitErr, flightline.ErrReplaced) {
			// Say who fenced it, when this server made the newer claim.
			if rerr := s.claims.replaced(p, req.claim.ID, mine); rerr != nil {
				return fmt.Errorf("%w (the sink: %v)", rerr, commitErr)
			}
		}
		return fmt.Errorf("committing batch of pipeline %q: %w", flighterr.Clip(p.ID), commitErr)
	}
	if rerr != nil {
		return rerr
	}
	if rdr.Malformed() != nil {
		return fmt.Errorf("%w: DoPut of pipeline %q: %v", flightline.ErrInvalidInput, flighterr.Clip(p.ID), rdr.Malformed())
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		if st, ok := status.FromError(err); ok {
			return st.Err()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: reading DoPut stream: %v", flightline.ErrInvalidInput, err)
	}
	return nil
}

// claim opens req's pipeline on the sink under its claim lock: a rejoin is
// refused with ErrReplaced when a newer claim is recorded; with
// resume_after, the checkpoint is compared before the sink's Open, so a
// writer that has not seen the latest checkpoint never fences the live
// one; then the claim is recorded. It returns the Writer, the checkpoint
// Open returned and the claim's number.
func (s *Server) claim(ctx context.Context, req putRequest) (Writer, []byte, uint64, error) {
	p := req.p
	unlock, err := s.claims.lock(ctx, p)
	if err != nil {
		return nil, nil, 0, err
	}
	defer unlock()
	if req.claim.Rejoin {
		if err := s.claims.check(p, req.claim.ID); err != nil {
			return nil, nil, 0, err
		}
	}
	if req.check {
		cur, err := s.sink.Checkpoint(ctx, p)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("reading the checkpoint of pipeline %q: %w", flighterr.Clip(p.ID), err)
		}
		if !checkpoint.Same(req.expect, cur) {
			return nil, nil, 0, fmt.Errorf("%w: pipeline %q has moved since the writer read its checkpoint; re-read it and resume", flightline.ErrConflict, flighterr.Clip(p.ID))
		}
	}
	w, last, err := s.sink.Open(ctx, p)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("opening pipeline %q: %w", flighterr.Clip(p.ID), err)
	}
	return w, last, s.claims.record(p, req.claim.ID), nil
}

// GetFlightInfo is not offered by a sink (UNIMPLEMENTED); a descriptor
// that does not decode is INVALID_ARGUMENT, as it is on a source.
func (s *Server) GetFlightInfo(_ context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return nil, descriptorOnly(d, "GetFlightInfo")
}

// GetSchema is not offered by a sink (UNIMPLEMENTED); a descriptor that
// does not decode is INVALID_ARGUMENT, as it is on a source.
func (s *Server) GetSchema(_ context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	return nil, descriptorOnly(d, "GetSchema")
}

func descriptorOnly(d *flight.FlightDescriptor, method string) error {
	if flightwire.Undecodable(d) {
		return status.Error(codes.InvalidArgument, "the flight descriptor does not decode as a FlightDescriptor message")
	}
	return status.Errorf(codes.Unimplemented, "method %s not implemented by a Flightline sink", method)
}

// DoAction answers "checkpoint" and "describe".
func (s *Server) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) (err error) {
	defer func() { err = flighterr.ToStatus(err) }()
	defer flighterr.Recover(s.log, func() string { return fmt.Sprintf("DoAction %q", flighterr.Clip(a.Type)) }, &err)
	ctx := stream.Context()
	if len(a.Type) > endpoint.MaxNameSize {
		return fmt.Errorf("%w: action type of %d bytes; at most %d are allowed", flightline.ErrInvalidInput, len(a.Type), endpoint.MaxNameSize)
	}
	switch a.Type {
	case ActionCheckpoint:
		var req PipelineRequest
		if err := json.Unmarshal(a.Body, &req); err != nil || req.PipelineID == "" {
			return status.Errorf(codes.InvalidArgument, "checkpoint action body must be JSON {\"pipeline_id\": ..., \"target\": ...}")
		}
		if err := checkNames(Pipeline{ID: req.PipelineID, Target: req.Target}); err != nil {
			return err
		}
		cp, err := s.sink.Checkpoint(ctx, Pipeline{ID: req.PipelineID, Target: req.Target})
		if err != nil {
			return flighterr.ToStatus(err)
		}
		if cp == nil {
			return nil
		}
		return stream.Send(&flight.Result{Body: cp})
	case ActionDescribe:
		body, _ := json.Marshal(Describe{Guarantee: GuaranteeOf(s.sink).String()})
		return stream.Send(&flight.Result{Body: body})
	}
	return status.Errorf(codes.Unimplemented, "unknown action %q; this sink answers %q and %q", flighterr.Clip(a.Type), ActionCheckpoint, ActionDescribe)
}

// ListActions lists the actions DoAction answers.
func (s *Server) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range []*flight.ActionType{
		{Type: ActionCheckpoint, Description: `last committed checkpoint of {"pipeline_id","target"}; no result when none`},
		{Type: ActionDescribe, Description: `JSON description of the sink, e.g. {"guarantee":"exactly-once"}`},
	} {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return nil
}

// groupRows is the number of rows of a group.
func groupRows(g []Batch) int64 {
	var n int64
	for _, b := range g {
		n += b.Rec.NumRows()
	}
	return n
}

// groupBytes is the size of a group's Arrow buffers.
func groupBytes(g []Batch) int64 {
	var n int64
	for _, b := range g {
		n += int64(util.TotalRecordSize(b.Rec))
	}
	return n
}
