package flightsrc

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
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/flightwire"
	"github.com/flightline/flightline/internal/ipcguard"
)

var _ Preparer = (*Client)(nil)

// Client is a Source backed by a remote Flight source endpoint. Safe for
// concurrent use; Close it when done.
type Client struct {
	conn *grpc.ClientConn
	fc   flight.Client
	mem  memory.Allocator
}

// ClientConfig configures a Client connection: TLS, mTLS and a bearer
// token. It is flightline.ClientConfig, shared with the other side.
type ClientConfig = flightline.ClientConfig

// Dial connects to the source endpoint at url (grpc://host:port or
// grpc+tls://host:port). The connection is lazy.
func Dial(url string, cfg ClientConfig) (*Client, error) {
	return DialWithAllocator(url, cfg, nil)
}

// DialWithAllocator is Dial with the allocator received batches are decoded
// into; nil means memory.DefaultAllocator.
func DialWithAllocator(url string, cfg ClientConfig, mem memory.Allocator) (*Client, error) {
	conn, err := endpoint.Dial(url, cfg)
	if err != nil {
		return nil, err
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &Client{conn: conn, fc: flight.NewClientFromConn(conn, nil), mem: mem}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// WaitReconnected returns true once a connection to the source endpoint that
// was down is ready again, false at once when it is ready, or when ctx
// ends first (see endpoint.WaitReconnected). The coordinator retries on it.
func (c *Client) WaitReconnected(ctx context.Context) bool {
	return endpoint.WaitReconnected(ctx, c.conn)
}

// Streams implements Source with ListFlights.
func (c *Client) Streams(ctx context.Context) ([]Stream, error) {
	lf, err := c.fc.ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		return nil, flighterr.FromStatus("ListFlights", err)
	}
	var out []Stream
	for {
		fi, err := lf.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, flighterr.FromStatus("ListFlights", err)
		}
		sc, err := flight.DeserializeSchema(fi.Schema, c.mem)
		if err != nil {
			return nil, fmt.Errorf("ListFlights: bad schema: %w", err)
		}
		name := ""
		if d := fi.FlightDescriptor; d != nil && len(d.Path) > 0 {
			name = d.Path[0]
		}
		out = append(out, Stream{Name: name, Schema: sc, Description: string(fi.AppMetadata)})
	}
}

// Commit implements Source with the "commit" action.
func (c *Client) Commit(ctx context.Context, req CommitRequest) error {
	body, _ := json.Marshal(CommitBody{Stream: req.Stream, PipelineID: req.Pipeline, Checkpoint: req.Checkpoint})
	stream, err := c.fc.DoAction(ctx, &flight.Action{Type: ActionCommit, Body: body})
	if err != nil {
		return flighterr.FromStatus("commit action", err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return flighterr.FromStatus("commit action", err)
		}
	}
}

// Prepare implements Preparer with the "prepare" action. A server that
// does not know the action (it predates it) needs no preparation: nil.
func (c *Client) Prepare(ctx context.Context, req PrepareRequest) error {
	body, _ := json.Marshal(PrepareBody{Stream: req.Stream, PipelineID: req.Pipeline})
	stream, err := c.fc.DoAction(ctx, &flight.Action{Type: ActionPrepare, Body: body})
	for err == nil {
		_, err = stream.Recv()
	}
	switch {
	case errors.Is(err, io.EOF), status.Code(err) == codes.Unimplemented:
		return nil
	default:
		return flighterr.FromStatus("prepare action", err)
	}
}

// Read implements Source with DoGet. It waits for the stream's schema, so
// an unknown stream or a bad checkpoint fails here.
func (c *Client) Read(ctx context.Context, req ReadRequest) (Reader, error) {
	ticket, _ := json.Marshal(Ticket{Stream: req.Stream, PipelineID: req.Pipeline, Checkpoint: req.After})
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel) // ctx bounds Read only
	defer stop()
	cctx, zero := flightwire.Call(sctx)
	stream, err := c.fc.DoGet(cctx, &flight.Ticket{Ticket: ticket}, zero)
	if err != nil {
		cancel()
		return nil, flighterr.FromStatus("DoGet", err)
	}
	// The source is as untrusted as a sink's client: its messages are
	// checked before arrow-go allocates what they declare.
	rdr, err := flightwire.NewReader(stream, endpoint.MaxMessageSize, c.mem)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, flightwire.ErrMalformed) || errors.Is(err, ipcguard.ErrMalformed) {
			return nil, fmt.Errorf("%w: DoGet schema message: %v", flightline.ErrInvalidInput, err)
		}
		return nil, streamErr(err)
	}
	r := &remoteReader{rdr: rdr, cancel: cancel, ch: make(chan item, 1), done: make(chan struct{})}
	go r.pump(sctx)
	return r, nil
}

// streamErr classifies an error reading a DoGet stream: a gRPC status is
// the server's (or the transport's) verdict; anything else is arrow-go's
// IPC reader refusing what the source sent, which a retry would receive
// again: ErrInvalidInput.
func streamErr(err error) error {
	if _, ok := status.FromError(err); ok {
		return flighterr.FromStatus("DoGet", err)
	}
	return fmt.Errorf("%w: DoGet: the source sent a malformed stream: %v", flightline.ErrInvalidInput, err)
}

// remoteReader pumps the DoGet stream on its own goroutine so Next can
// honour its context.
type remoteReader struct {
	rdr    *flightwire.Reader
	cancel context.CancelFunc
	ch     chan item
	done   chan struct{}
	once   sync.Once
}

func (r *remoteReader) pump(ctx context.Context) {
	defer close(r.done)
	defer close(r.ch)
	for r.rdr.Next() {
		rec := r.rdr.RecordBatch()
		rec.Retain()
		it := item{rec: rec, cp: bytes.Clone(r.rdr.LatestAppMetadata())}
		select {
		case r.ch <- it:
		case <-ctx.Done():
			rec.Release()
			return
		}
	}
	err := r.rdr.Err()
	if err == nil {
		err = io.EOF
	} else if ctx.Err() != nil {
		err = ctx.Err()
	} else if r.rdr.Malformed() != nil {
		err = fmt.Errorf("%w: DoGet: %v", flightline.ErrInvalidInput, r.rdr.Malformed())
	} else {
		err = streamErr(err)
	}
	select {
	case r.ch <- item{err: err}:
	case <-ctx.Done():
	}
}

func (r *remoteReader) Schema() *arrow.Schema { return r.rdr.Schema() }

func (r *remoteReader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	select {
	case it, ok := <-r.ch:
		if !ok {
			return nil, nil, errors.New("flightsrc: reader closed")
		}
		return it.rec, it.cp, it.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

func (r *remoteReader) Close() error {
	r.once.Do(func() {
		r.cancel()
		for it := range r.ch {
			if it.rec != nil {
				it.rec.Release()
			}
		}
		<-r.done
		r.rdr.Release()
	})
	return nil
}
