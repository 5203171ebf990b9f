package flighttransform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/flightwire"
	"github.com/flightline/flightline/internal/ipcguard"
	"github.com/flightline/flightline/transform"
)

var _ transform.Transform = (*Client)(nil)

// Descriptor is the JSON of the CMD descriptor a Client sends with its
// first message; for the service's logs only (docs/protocol.md).
type Descriptor struct {
	PipelineID string `json:"pipeline_id,omitempty"`
	Stream     string `json:"stream,omitempty"`
}

// Client is a Transform served by a remote DoExchange endpoint. Safe for
// concurrent use: each Exchange is its own call. Close it when done.
type Client struct {
	url  string
	conn *grpc.ClientConn
	fc   flight.Client
	mem  memory.Allocator
	desc Descriptor
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithAllocator sets the allocator output batches are decoded into; nil
// means memory.DefaultAllocator, the default.
func WithAllocator(mem memory.Allocator) ClientOption {
	return func(c *Client) {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		c.mem = mem
	}
}

// ForPipeline names the pipeline and stream in the descriptor each
// exchange sends.
func ForPipeline(pipeline, stream string) ClientOption {
	return func(c *Client) { c.desc = Descriptor{PipelineID: pipeline, Stream: stream} }
}

// Dial connects to the transform endpoint at url (grpc://host:port or
// grpc+tls://host:port) with cfg's TLS, mTLS and bearer token. The
// connection is lazy.
func Dial(url string, cfg flightline.ClientConfig, opts ...ClientOption) (*Client, error) {
	conn, err := endpoint.Dial(url, cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{url: url, conn: conn, fc: flight.NewClientFromConn(conn, nil), mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// String is the endpoint's URL.
func (c *Client) String() string { return c.url }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// WaitReconnected returns true once a connection to the transform endpoint that
// was down is ready again, false at once when it is ready, or when ctx
// ends first (see endpoint.WaitReconnected). The coordinator retries on it.
func (c *Client) WaitReconnected(ctx context.Context) bool {
	return endpoint.WaitReconnected(ctx, c.conn)
}

// Exchange implements transform.Transform with one DoExchange call. It
// sends in's batches, each with its checkpoint as app_metadata, on its own
// goroutine, and half-closes the call when in ends. When in has a
// Schema() method (a flightsrc.Reader does), the schema is sent at once,
// so an exchange without batches is still a valid stream. ctx bounds the
// call. The output's Next returns an error of in first (a source outage
// stays an outage), then the service's status mapped to Flightline's
// errors (INVALID_ARGUMENT stops the pipeline, UNAVAILABLE retries), and
// ErrInvalidInput for an output batch that fails validation.
func (c *Client) Exchange(ctx context.Context, in transform.Stream) (transform.Stream, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	wctx, zero := flightwire.Call(sctx)
	stream, err := c.fc.DoExchange(wctx, zero)
	if err != nil {
		cancel(nil)
		return nil, flighterr.FromStatus("DoExchange", err)
	}
	x := &exchange{c: c, in: in, ctx: sctx, cancel: cancel, ch: make(chan item, 1)}
	x.wg.Add(2)
	go x.send(sctx, stream)
	go x.recv(sctx, stream)
	return x, nil
}

type item struct {
	rec arrow.RecordBatch
	cp  []byte
	err error
}

type exchange struct {
	c      *Client
	in     transform.Stream
	ctx    context.Context // the call's
	cancel context.CancelCauseFunc
	ch     chan item
	wg     sync.WaitGroup
	once   sync.Once

	mu      sync.Mutex
	sendErr error // why sending stopped early, if it did
}

func (x *exchange) failSend(err error) {
	x.mu.Lock()
	x.sendErr = err
	x.mu.Unlock()
	x.cancel(err)
}

func (x *exchange) send(ctx context.Context, stream flight.FlightService_DoExchangeClient) {
	defer x.wg.Done()
	var opts []ipc.Option
	opts = append(opts, ipc.WithAllocator(x.c.mem))
	haveSchema := false
	if s, ok := x.in.(interface{ Schema() *arrow.Schema }); ok && s.Schema() != nil {
		opts = append(opts, ipc.WithSchema(s.Schema()))
		haveSchema = true
	}
	w := flightwire.NewWriter(stream, opts...)
	desc, _ := json.Marshal(x.c.desc)
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: desc})
	wrote := false
	for {
		rec, cp, err := x.in.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() == nil {
				x.failSend(err)
			}
			return
		}
		err = w.WriteWithAppMetadata(rec, cp)
		rec.Release()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return // the service ended the call; recv reports its status
			}
			if errors.Is(err, arrow.ErrInvalid) {
				x.failSend(fmt.Errorf("%w: DoExchange input: %v", flightline.ErrSchemaMismatch, err))
				return
			}
			x.failSend(flighterr.FromStatus("DoExchange send", err))
			return
		}
		wrote = true
	}
	if wrote || haveSchema {
		_ = w.Close()
	}
	_ = stream.CloseSend()
}

func (x *exchange) recv(ctx context.Context, stream flight.FlightService_DoExchangeClient) {
	defer x.wg.Done()
	defer close(x.ch)
	rdr, err := flightwire.NewReader(stream, endpoint.MaxMessageSize, x.c.mem)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.EOF // the service ended without output
		} else {
			err = x.streamErr(ctx, malformed(err), err)
		}
		x.put(ctx, item{err: err})
		return
	}
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if err := ipcguard.ValidateBatch(rec); err != nil {
			x.put(ctx, item{err: fmt.Errorf("transform %s sent an invalid batch: %w", x.c.url, err)})
			return
		}
		rec.Retain()
		if !x.put(ctx, item{rec: rec, cp: bytes.Clone(rdr.LatestAppMetadata())}) {
			rec.Release()
			return
		}
	}
	err = rdr.Err()
	if err == nil || errors.Is(err, io.EOF) {
		err = io.EOF
	} else {
		err = x.streamErr(ctx, rdr.Malformed(), err)
	}
	x.put(ctx, item{err: err})
}

// streamErr classifies an error reading the output: the service's status,
// a cancellation, or a malformed stream (ErrInvalidInput).
func (x *exchange) streamErr(ctx context.Context, refused, err error) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case refused != nil:
		return fmt.Errorf("%w: transform %s: %v", flightline.ErrInvalidInput, x.c.url, refused)
	}
	if _, ok := status.FromError(err); ok {
		return flighterr.FromStatus("transform "+x.c.url, err)
	}
	return fmt.Errorf("%w: transform %s sent a malformed stream: %v", flightline.ErrInvalidInput, x.c.url, err)
}

// malformed returns err when it is a refused message (flightwire's or
// ipcguard's), else nil.
func malformed(err error) error {
	if errors.Is(err, flightwire.ErrMalformed) || errors.Is(err, ipcguard.ErrMalformed) {
		return err
	}
	return nil
}

// put hands it to Next unless ctx ends first.
func (x *exchange) put(ctx context.Context, it item) bool {
	select {
	case x.ch <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

func (x *exchange) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	select {
	case it, ok := <-x.ch:
		if ok && it.err == nil {
			return it.rec, it.cp, nil
		}
		x.mu.Lock()
		serr := x.sendErr
		x.mu.Unlock()
		if serr != nil {
			return nil, nil, serr
		}
		if !ok {
			if err := context.Cause(x.ctx); err != nil {
				return nil, nil, err
			}
			return nil, nil, errors.New("flighttransform: exchange ended")
		}
		return nil, nil, it.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// Close cancels the call if it is still running, releases the batches not
// handed out, waits for both goroutines and closes the input.
func (x *exchange) Close() error {
	x.once.Do(func() {
		x.cancel(context.Canceled)
		for it := range x.ch { // recv closes it once the cancel reaches it
			if it.rec != nil {
				it.rec.Release()
			}
		}
		x.wg.Wait()
		x.in.Close()
	})
	return nil
}
