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
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/flightwire"
	"github.com/flightline/flightline/internal/metrics"
	"github.com/flightline/flightline/internal/viewcopy"
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
	compact   *bool // nil: as the Source says (WireCompacter)
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithAllocator sets the allocator for heartbeats, schema messages and the
// copies CompactViews makes; nil means memory.DefaultAllocator.
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

// CompactViews sets whether the server copies the top-level view columns
// of every batch into plain binary and string columns before sending it
// (see WireCompacter), whatever the Source declares. Without this option
// the server compacts exactly when the Source implements WireCompacter and
// returns true.
func CompactViews(on bool) ServerOption { return func(s *Server) { s.compact = &on } }

// WithMetrics records what the server sends in Flightline's metrics (role
// "source") registered on reg. Components given the same reg share the
// collectors. nil records nothing, the default.
func WithMetrics(reg prometheus.Registerer) ServerOption {
	return func(s *Server) { s.metrics = metrics.For(reg) }
}

// WithHeartbeat sets how long a DoGet stream may stay silent before the
// server sends a heartbeat: a 0-row batch carrying the last checkpoint.
// Default 5s; 0 disables heartbeats.
func WithHeartbeat(d time.Duration) ServerOption { return func(s *Server) { s.heartbeat = d } }

// compacts reports whether batches and schemas go out with their view
// columns compacted.
func (s *Server) compacts() bool {
	if s.compact != nil {
		return *s.compact
	}
	wc, ok := s.src.(WireCompacter)
	return ok && wc.CompactOnWire()
}

// wireSchema is the schema the server sends for a stream of schema sc.
func (s *Server) wireSchema(sc *arrow.Schema, compact bool) *arrow.Schema {
	if compact && sc != nil {
		return viewcopy.Schema(sc)
	}
	return sc
}

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
//
// A panic in the source (its Reader's Next included) is recovered: the call
// fails with flightline.ErrInternal (INTERNAL, reason INTERNAL_BUG) and the
// panic is logged.
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
	defer flighterr.Recover(s.log, func() string { return fmt.Sprintf("DoGet of stream %q", req.Stream) }, &err)
	rd, err := s.src.Read(ctx, req)
	if err != nil {
		return fmt.Errorf("opening stream %q: %w", req.Stream, err)
	}
	defer rd.Close()

	compact := s.compacts()
	schema := s.wireSchema(rd.Schema(), compact)
	w := flightwire.NewWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(s.mem))
	defer w.Close()

	// A pump goroutine reads the source so this one can send heartbeats
	// while Next blocks. The channel holds at most one batch.
	ch := make(chan item, 1)
	go func() {
		defer close(ch)
		for {
			rec, cp, err := s.next(ctx, rd, req.Stream)
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
			cols := emptyColumns(s.mem, schema)
			hb := array.NewRecordBatch(schema, cols, 0)
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
			rec := it.rec
			if compact {
				rec = viewcopy.Copy(s.mem, it.rec, schema)
				it.rec.Release()
			}
			err := w.WriteWithAppMetadata(rec, it.cp)
			s.metrics.Moved("source", req.Stream, rec.NumRows(), int64(util.TotalRecordSize(rec)))
			rec.Release()
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

// next is rd.Next with a panic turned into ErrInternal: it runs on the
// pump goroutine, where an unrecovered panic would end the process.
func (s *Server) next(ctx context.Context, rd Reader, stream string) (rec arrow.RecordBatch, cp []byte, err error) {
	defer flighterr.Recover(s.log, func() string { return fmt.Sprintf("reading stream %q", stream) }, &err)
	return rd.Next(ctx)
}

func emptyColumns(mem memory.Allocator, sc *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i] = array.MakeArrayOfNull(mem, f.Type, 0)
	}
	return cols
}

func (s *Server) info(st Stream, compact bool) (*flight.FlightInfo, error) {
	ticket, _ := json.Marshal(Ticket{Stream: st.Name})
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(s.wireSchema(st.Schema, compact), s.mem),
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{st.Name}},
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: ticket}}},
		TotalRecords:     -1,
		TotalBytes:       -1,
		AppMetadata:      []byte(st.Description),
	}, nil
}

func (s *Server) stream(ctx context.Context, d *flight.FlightDescriptor) (Stream, error) {
	if flightwire.Undecodable(d) {
		return Stream{}, status.Error(codes.InvalidArgument, "the flight descriptor does not decode as a FlightDescriptor message")
	}
	if d == nil || d.Type != flight.DescriptorPATH || len(d.Path) != 1 {
		return Stream{}, status.Error(codes.InvalidArgument, "descriptor must be a PATH naming one stream")
	}
	if err := checkName("stream", d.Path[0]); err != nil {
		return Stream{}, flighterr.ToStatus(err)
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
	return Stream{}, flighterr.ToStatus(fmt.Errorf("%w: no stream %q", flightline.ErrNotFound, flighterr.Clip(d.Path[0])))
}

// ListFlights lists every stream of the source.
func (s *Server) ListFlights(_ *flight.Criteria, fs flight.FlightService_ListFlightsServer) (err error) {
	defer func() { err = flighterr.ToStatus(err) }()
	defer flighterr.Recover(s.log, func() string { return "ListFlights" }, &err)
	streams, err := s.src.Streams(fs.Context())
	if err != nil {
		return flighterr.ToStatus(err)
	}
	compact := s.compacts()
	for _, st := range streams {
		fi, _ := s.info(st, compact)
		if err := fs.Send(fi); err != nil {
			return err
		}
	}
	return nil
}

// GetFlightInfo describes one stream; its endpoint's ticket reads it from
// the source's default start.
func (s *Server) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (fi *flight.FlightInfo, err error) {
	defer func() { err = flighterr.ToStatus(err) }()
	defer flighterr.Recover(s.log, func() string { return "GetFlightInfo" }, &err)
	st, err := s.stream(ctx, d)
	if err != nil {
		return nil, err
	}
	return s.info(st, s.compacts())
}

// GetSchema returns one stream's schema.
func (s *Server) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (sr *flight.SchemaResult, err error) {
	defer func() { err = flighterr.ToStatus(err) }()
	defer flighterr.Recover(s.log, func() string { return "GetSchema" }, &err)
	st, err := s.stream(ctx, d)
	if err != nil {
		return nil, err
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(s.wireSchema(st.Schema, s.compacts()), s.mem)}, nil
}

// DoAction answers "commit", the advisory progress report.
func (s *Server) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) (err error) {
	defer func() { err = flighterr.ToStatus(err) }()
	defer flighterr.Recover(s.log, func() string { return fmt.Sprintf("DoAction %q", flighterr.Clip(a.Type)) }, &err)
	if err := checkName("action type", a.Type); err != nil {
		return err
	}
	if a.Type == ActionPrepare {
		var b PrepareBody
		if err := json.Unmarshal(a.Body, &b); err != nil || b.Stream == "" {
			return status.Error(codes.InvalidArgument, `prepare action body must be JSON {"stream", "pipeline_id"}`)
		}
		if err := checkName("stream", b.Stream); err != nil {
			return err
		}
		p, ok := s.src.(Preparer)
		if !ok {
			return nil
		}
		return p.Prepare(stream.Context(), PrepareRequest{Stream: b.Stream, Pipeline: b.PipelineID})
	}
	if a.Type != ActionCommit {
		return status.Errorf(codes.Unimplemented, "unknown action %q; this source answers %q and %q", a.Type, ActionCommit, ActionPrepare)
	}
	var b CommitBody
	if err := json.Unmarshal(a.Body, &b); err != nil || b.Stream == "" || len(b.Checkpoint) == 0 {
		return status.Error(codes.InvalidArgument, `commit action body must be JSON {"stream", "pipeline_id", "checkpoint": <base64>}`)
	}
	if err := checkName("stream", b.Stream); err != nil {
		return err
	}
	if err := checkName("pipeline_id", b.PipelineID); err != nil {
		return err
	}
	return s.src.Commit(stream.Context(), CommitRequest{Stream: b.Stream, Pipeline: b.PipelineID, Checkpoint: b.Checkpoint})
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
