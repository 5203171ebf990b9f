package flightsrc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/metrics"
)

// Server serves a Source over Arrow Flight. Register it with
// flight.RegisterFlightServiceServer. Safe for concurrent streams.
type Server struct {
	flight.BaseFlightServer
	src       Source
	mem       memory.Allocator
	log       *slog.Logger
	metrics   *metrics.Metrics
	heartbeat time.Duration
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithAllocator sets the allocator for heartbeats and schema messages.
func WithAllocator(mem memory.Allocator) ServerOption { return func(s *Server) { s.mem = mem } }

// WithLogger sets the logger; default slog.Default().
func WithLogger(l *slog.Logger) ServerOption { return func(s *Server) { s.log = l } }

// WithMetrics records what the server sends in m.
func WithMetrics(m *metrics.Metrics) ServerOption { return func(s *Server) { s.metrics = m } }

// WithHeartbeat sets how long a DoGet stream may stay silent before the
// server sends a heartbeat: a 0-row batch carrying the last checkpoint.
// Default 5s; 0 disables heartbeats.
func WithHeartbeat(d time.Duration) ServerOption { return func(s *Server) { s.heartbeat = d } }

// NewServer returns a Flight server for src.
func NewServer(src Source, opts ...ServerOption) *Server {
	s := &Server{src: src, mem: memory.DefaultAllocator, log: slog.Default(), heartbeat: 5 * time.Second}
	for _, o := range opts {
		o(s)
	}
	return s
}

type item struct {
	rec arrow.RecordBatch
	cp  []byte
	err error
}

// DoGet streams the batches of the stream the ticket names, each with its
// checkpoint as app_metadata, and heartbeats while the source is idle.
func (s *Server) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) (err error) {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	req, err := parseTicket(t.Ticket)
	if err != nil {
		return flighterr.ToStatus(err)
	}
	defer func() {
		if err != nil {
			err = flighterr.ToStatus(err)
			s.metrics.Error("source", req.Stream, status.Code(err).String())
			if status.Code(err) != codes.Canceled {
				s.log.Warn("DoGet failed", "stream", req.Stream, "pipeline", req.Pipeline, "err", err)
			}
		}
	}()
	rd, err := s.src.Read(ctx, req)
	if err != nil {
		return fmt.Errorf("opening stream %q: %w", req.Stream, err)
	}
	defer rd.Close()

	w := flight.NewRecordWriter(stream, ipc.WithSchema(rd.Schema()), ipc.WithAllocator(s.mem))
	defer w.Close()

	// A pump goroutine reads the source so this one can send heartbeats
	// while Next blocks. The channel holds at most one batch.
	ch := make(chan item, 1)
	go func() {
		defer close(ch)
		for {
			rec, cp, err := rd.Next(ctx)
			select {
			case ch <- item{rec, cp, err}:
			case <-ctx.Done():
				if rec != nil {
					rec.Release()
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for it := range ch { // drain what the pump still holds
			if it.rec != nil {
				it.rec.Release()
			}
		}
	}()

	last := req.After
	var tick <-chan time.Time
	var ticker *time.Ticker
	if s.heartbeat > 0 {
		ticker = time.NewTicker(s.heartbeat)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if len(last) == 0 {
				continue // nothing to carry yet: app_metadata must be non-empty
			}
			cols := emptyColumns(s.mem, rd.Schema())
			hb := array.NewRecordBatch(rd.Schema(), cols, 0)
			for _, c := range cols {
				c.Release() // the batch holds its own references
			}
			err := w.WriteWithAppMetadata(hb, last)
			hb.Release()
			if err != nil {
				return err
			}
		case it, ok := <-ch:
			if !ok {
				return ctx.Err()
			}
			if errors.Is(it.err, io.EOF) {
				return nil
			}
			if it.err != nil {
				return it.err
			}
			err := w.WriteWithAppMetadata(it.rec, it.cp)
			s.metrics.Moved("source", req.Stream, it.rec.NumRows(), int64(util.TotalRecordSize(it.rec)))
			it.rec.Release()
			if err != nil {
				return err
			}
			last = bytes.Clone(it.cp)
			if ticker != nil {
				ticker.Reset(s.heartbeat)
			}
		}
	}
}

func emptyColumns(mem memory.Allocator, sc *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i] = array.MakeArrayOfNull(mem, f.Type, 0)
	}
	return cols
}

func (s *Server) info(st Stream) (*flight.FlightInfo, error) {
	ticket, _ := json.Marshal(Ticket{Stream: st.Name})
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(st.Schema, s.mem),
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{st.Name}},
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: ticket}}},
		TotalRecords:     -1,
		TotalBytes:       -1,
		AppMetadata:      []byte(st.Description),
	}, nil
}

func (s *Server) stream(ctx context.Context, d *flight.FlightDescriptor) (Stream, error) {
	if d == nil || d.Type != flight.DescriptorPATH || len(d.Path) != 1 {
		return Stream{}, status.Error(codes.InvalidArgument, "descriptor must be a PATH naming one stream")
	}
	streams, err := s.src.Streams(ctx)
	if err != nil {
		return Stream{}, flighterr.ToStatus(err)
	}
	for _, st := range streams {
		if st.Name == d.Path[0] {
			return st, nil
		}
	}
	return Stream{}, flighterr.ToStatus(fmt.Errorf("%w: no stream %q", flightline.ErrNotFound, d.Path[0]))
}

// ListFlights lists every stream of the source.
func (s *Server) ListFlights(_ *flight.Criteria, fs flight.FlightService_ListFlightsServer) error {
	streams, err := s.src.Streams(fs.Context())
	if err != nil {
		return flighterr.ToStatus(err)
	}
	for _, st := range streams {
		fi, _ := s.info(st)
		if err := fs.Send(fi); err != nil {
			return err
		}
	}
	return nil
}

// GetFlightInfo describes one stream; its endpoint's ticket reads it from
// the source's default start.
func (s *Server) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	st, err := s.stream(ctx, d)
	if err != nil {
		return nil, err
	}
	return s.info(st)
}

// GetSchema returns one stream's schema.
func (s *Server) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	st, err := s.stream(ctx, d)
	if err != nil {
		return nil, err
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(st.Schema, s.mem)}, nil
}

// DoAction answers "commit", the advisory progress report, and "prepare"
// (the source's Prepare, a no-op for sources without one).
func (s *Server) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if a.Type == ActionPrepare {
		var b PrepareBody
		if err := json.Unmarshal(a.Body, &b); err != nil || b.Stream == "" {
			return status.Error(codes.InvalidArgument, `prepare action body must be JSON {"stream", "pipeline_id"}`)
		}
		p, ok := s.src.(Preparer)
		if !ok {
			return nil
		}
		return flighterr.ToStatus(p.Prepare(stream.Context(), PrepareRequest{Stream: b.Stream, Pipeline: b.PipelineID}))
	}
	if a.Type != ActionCommit {
		return status.Errorf(codes.Unimplemented, "unknown action %q; this source answers %q and %q", a.Type, ActionCommit, ActionPrepare)
	}
	var b CommitBody
	if err := json.Unmarshal(a.Body, &b); err != nil || b.Stream == "" || len(b.Checkpoint) == 0 {
		return status.Error(codes.InvalidArgument, `commit action body must be JSON {"stream", "pipeline_id", "checkpoint": <base64>}`)
	}
	err := s.src.Commit(stream.Context(), CommitRequest{Stream: b.Stream, Pipeline: b.PipelineID, Checkpoint: b.Checkpoint})
	return flighterr.ToStatus(err)
}

// ListActions lists the actions DoAction answers.
func (s *Server) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	if err := stream.Send(&flight.ActionType{Type: ActionCommit,
		Description: `advisory: {"stream","pipeline_id","checkpoint"} is durably written downstream`}); err != nil {
		return err
	}
	return stream.Send(&flight.ActionType{Type: ActionPrepare,
		Description: `{"stream","pipeline_id"}: ready the stream for a read that follows a sink open (e.g. join the consumer group); call before reading the sink's checkpoint`})
}
