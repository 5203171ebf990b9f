package flighttransform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/flightwire"
	"github.com/flightline/flightline/internal/ipcguard"
	"github.com/flightline/flightline/transform"
)

// Server serves a Transform as a Flight DoExchange endpoint. Register it
// with flight.RegisterFlightServiceServer. Safe for concurrent exchanges:
// each gets its own Exchange of the Transform.
type Server struct {
	flight.BaseFlightServer
	t   transform.Transform
	mem memory.Allocator
	log *slog.Logger
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithServerAllocator sets the allocator input batches are decoded into;
// nil means memory.DefaultAllocator, the default.
func WithServerAllocator(mem memory.Allocator) ServerOption {
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

// NewServer returns a DoExchange server for t.
func NewServer(t transform.Transform, opts ...ServerOption) *Server {
	s := &Server{t: t, mem: memory.DefaultAllocator, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// DoExchange runs one exchange: it decodes the input batches (each message
// checked by ipcguard, each batch validated with ipcguard.ValidateBatch;
// a batch without app_metadata or failing either check ends the call with
// INVALID_ARGUMENT), feeds them to the Transform, and writes its outputs
// with their checkpoints as app_metadata. The output schema is sent with
// the first output. A panic in the Transform is recovered into INTERNAL
// with reason INTERNAL_BUG.
func (s *Server) DoExchange(stream flight.FlightService_DoExchangeServer) (err error) {
	ctx := stream.Context()
	defer func() {
		if err != nil {
			err = flighterr.ToStatus(err)
			if status.Code(err) != codes.Canceled {
				s.log.Warn("DoExchange failed", "err", err)
			}
		}
	}()
	defer flighterr.Recover(s.log, func() string { return "DoExchange" }, &err)

	rdr, err := flightwire.NewReader(stream, endpoint.MaxMessageSize, s.mem)
	if err != nil {
		switch {
		case errors.Is(err, flightwire.ErrMalformed) || errors.Is(err, ipcguard.ErrMalformed):
			return fmt.Errorf("%w: DoExchange schema message: %v", flightline.ErrInvalidInput, err)
		case errors.Is(err, io.EOF):
			return nil // an exchange without input has no output
		}
		if st, ok := status.FromError(err); ok {
			return st.Err()
		}
		return fmt.Errorf("%w: reading DoExchange schema: %v", flightline.ErrInvalidInput, err)
	}
	defer rdr.Release()

	out, err := s.t.Exchange(ctx, &serverInput{ctx: ctx, rdr: rdr})
	if err != nil {
		return err
	}
	defer out.Close()
	w := flightwire.NewWriter(stream, ipc.WithAllocator(s.mem))
	wrote := false
	for {
		rec, cp, err := out.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		err = w.WriteWithAppMetadata(rec, cp)
		rec.Release()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: writing DoExchange output: %v", flightline.ErrUnavailable, err)
		}
		wrote = true
	}
	if wrote {
		return w.Close()
	}
	return nil
}

// serverInput is the decoded input of one exchange, as a Stream. Its
// batches are Retained for the caller, who Releases them.
type serverInput struct {
	ctx context.Context
	rdr *flightwire.Reader
	n   int
}

func (s *serverInput) Schema() *arrow.Schema { return s.rdr.Schema() }

func (s *serverInput) Next(context.Context) (arrow.RecordBatch, []byte, error) {
	if !s.rdr.Next() {
		err := s.rdr.Err()
		switch {
		case s.rdr.Malformed() != nil:
			return nil, nil, fmt.Errorf("%w: DoExchange input: %v", flightline.ErrInvalidInput, s.rdr.Malformed())
		case err == nil || errors.Is(err, io.EOF):
			return nil, nil, io.EOF
		case s.ctx.Err() != nil:
			return nil, nil, s.ctx.Err()
		}
		if st, ok := status.FromError(err); ok {
			return nil, nil, st.Err()
		}
		return nil, nil, fmt.Errorf("%w: reading DoExchange input: %v", flightline.ErrInvalidInput, err)
	}
	s.n++
	rec := s.rdr.RecordBatch()
	cp := bytes.Clone(s.rdr.LatestAppMetadata())
	if len(cp) == 0 {
		return nil, nil, fmt.Errorf("%w: input batch %d has no checkpoint in its app_metadata", flightline.ErrInvalidInput, s.n)
	}
	if err := ipcguard.ValidateBatch(rec); err != nil {
		return nil, nil, fmt.Errorf("input batch %d: %w", s.n, err)
	}
	rec.Retain()
	return rec, cp, nil
}

func (s *serverInput) Close() error { return nil } // DoExchange releases the reader
