package flightsink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/flighterr"
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

// NewServer returns a Flight server for sink.
func NewServer(sink Sink, opts ...ServerOption) *Server {
	s := &Server{sink: sink, mem: memory.DefaultAllocator, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// DoPut claims the pipeline named by the descriptor, commits every batch
// with the checkpoint in its app_metadata, and acknowledges each commit, in
// order, with a PutResult whose app_metadata is that checkpoint.
func (s *Server) DoPut(stream flight.FlightService_DoPutServer) (err error) {
	ctx := stream.Context()
	pipeline := ""
	defer func() {
		if err != nil {
			err = flighterr.ToStatus(err)
			s.metrics.Error("sink", pipeline, status.Code(err).String())
			if status.Code(err) != codes.Canceled {
				s.log.Warn("DoPut failed", "pipeline", pipeline, "err", err)
			}
		}
	}()

	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(s.mem))
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: DoPut stream ended before its schema", flightline.ErrInvalidInput)
		}
		if st, ok := status.FromError(err); ok {
			return st.Err()
		}
		return fmt.Errorf("%w: reading DoPut schema: %v", flightline.ErrInvalidInput, err)
	}
	defer rdr.Release()

	p, expect, check, err := parseDescriptor(rdr.LatestFlightDescriptor())
	if err != nil {
		return err
	}
	pipeline = p.ID
	w, last, err := s.sink.Open(ctx, p)
	if err != nil {
		return fmt.Errorf("opening pipeline %q: %w", p.ID, err)
	}
	defer func() {
		if cerr := w.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if check && !bytes.Equal(expect, last) {
		return fmt.Errorf("%w: pipeline %q has moved since the writer read its checkpoint; re-read it and resume", flightline.ErrConflict, p.ID)
	}
	s.log.Debug("DoPut opened", "pipeline", p.ID, "target", p.Target, "schema", rdr.Schema())

	for rdr.Next() {
		rec := rdr.RecordBatch()
		cp := bytes.Clone(rdr.LatestAppMetadata())
		start := time.Now()
		if err := w.WriteBatch(ctx, rec, cp); err != nil {
			return fmt.Errorf("committing batch of pipeline %q: %w", p.ID, err)
		}
		s.metrics.Committed("sink", p.ID, rec.NumRows(), int64(util.TotalRecordSize(rec)), time.Since(start))
		if err := stream.Send(&flight.PutResult{AppMetadata: cp}); err != nil {
			return err // the batch is committed; the client re-reads the checkpoint
		}
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

// DoAction answers "checkpoint" and "describe".
func (s *Server) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	ctx := stream.Context()
	switch a.Type {
	case ActionCheckpoint:
		var req PipelineRequest
		if err := json.Unmarshal(a.Body, &req); err != nil || req.PipelineID == "" {
			return status.Errorf(codes.InvalidArgument, "checkpoint action body must be JSON {\"pipeline_id\": ..., \"target\": ...}")
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
	return status.Errorf(codes.Unimplemented, "unknown action %q; this sink answers %q and %q", a.Type, ActionCheckpoint, ActionDescribe)
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
