package flightsink

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/flightwire"
)

// Client is a Sink backed by a remote Flightline sink endpoint. It is safe
// for concurrent use; Close it when done.
type Client struct {
	conn *grpc.ClientConn
	fc   flight.Client
	mem  memory.Allocator
}

// ClientConfig configures a Client connection: TLS, mTLS and a bearer
// token. It is flightline.ClientConfig, shared with the other side.
type ClientConfig = flightline.ClientConfig

// Dial connects to the sink endpoint at url (grpc://host:port or
// grpc+tls://host:port). The connection is lazy: an unreachable endpoint
// surfaces as flightline.ErrUnavailable on the first call.
func Dial(url string, cfg ClientConfig) (*Client, error) {
	conn, err := endpoint.Dial(url, cfg)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, fc: flight.NewClientFromConn(conn, nil), mem: memory.DefaultAllocator}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// WaitReconnected returns true once a connection to the sink endpoint that
// was down is ready again, false at once when it is ready, or when ctx
// ends first (see endpoint.WaitReconnected). The coordinator retries on it.
func (c *Client) WaitReconnected(ctx context.Context) bool {
	return endpoint.WaitReconnected(ctx, c.conn)
}

// Checkpoint implements Sink with the "checkpoint" action.
func (c *Client) Checkpoint(ctx context.Context, p Pipeline) ([]byte, error) {
	body, _ := json.Marshal(PipelineRequest{PipelineID: p.ID, Target: p.Target})
	stream, err := c.fc.DoAction(ctx, &flight.Action{Type: ActionCheckpoint, Body: body})
	if err != nil {
		return nil, flighterr.FromStatus("checkpoint action", err)
	}
	var cp []byte
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return cp, nil
		}
		if err != nil {
			return nil, flighterr.FromStatus("checkpoint action", err)
		}
		cp = bytes.Clone(r.Body)
	}
}

// Guarantee asks the endpoint with the "describe" action; AtLeastOnce when it
// cannot tell.
func (c *Client) Guarantee(ctx context.Context) (Guarantee, error) {
	stream, err := c.fc.DoAction(ctx, &flight.Action{Type: ActionDescribe})
	if err != nil {
		return AtLeastOnce, flighterr.FromStatus("describe action", err)
	}
	r, err := stream.Recv()
	if err != nil {
		return AtLeastOnce, flighterr.FromStatus("describe action", err)
	}
	var d Describe
	if err := json.Unmarshal(r.Body, &d); err != nil {
		return AtLeastOnce, fmt.Errorf("describe action: %w", err)
	}
	if d.Guarantee == ExactlyOnce.String() {
		return ExactlyOnce, nil
	}
	return AtLeastOnce, nil
}

// Open implements Sink. It reads the checkpoint, then returns a Writer whose
// DoPut stream starts with the first batch and carries that checkpoint as
// its expectation: if another writer moved the pipeline in between, the
// first commit fails with flightline.ErrConflict.
func (c *Client) Open(ctx context.Context, p Pipeline) (Writer, []byte, error) {
	return c.OpenClaim(ctx, p, Claim{})
}

// OpenClaim implements Claimer: Open, with cl sent in the DoPut command.
// The pipeline is claimed when the stream starts, with the first batch;
// a rejoin the server refuses fails that batch's Submit or Ack (or
// WriteBatch) with flightline.ErrReplaced.
func (c *Client) OpenClaim(ctx context.Context, p Pipeline, cl Claim) (Writer, []byte, error) {
	if cl.Rejoin && cl.ID == "" {
		return nil, nil, fmt.Errorf("%w: a rejoin needs a claim id", flightline.ErrInvalidInput)
	}
	cp, err := c.Checkpoint(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	exp := base64.StdEncoding.EncodeToString(cp)
	cmd, _ := json.Marshal(PutCommand{PipelineID: p.ID, Target: p.Target, ResumeAfter: &exp, Claim: cl.ID, Rejoin: cl.Rejoin})
	sctx, cancel := context.WithCancel(context.Background())
	return &remoteWriter{c: c, desc: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}, ctx: sctx, cancel: cancel, ready: make(chan struct{})}, cp, nil
}

// remoteWriter streams batches over one DoPut call. Submit runs on one
// goroutine and Ack on another, which gRPC allows for a client stream.
type remoteWriter struct {
	c      *Client
	desc   *flight.FlightDescriptor
	ctx    context.Context // the stream's lifetime, ended by Close
	cancel context.CancelFunc

	mu     sync.Mutex // guards stream start
	stream flight.FlightService_DoPutClient
	w      *flightwire.Writer
	schema *arrow.Schema
	ready  chan struct{} // closed once stream is set

	reported atomic.Bool // Ack returned the stream's final status already
}

func (r *remoteWriter) start(schema *arrow.Schema) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stream != nil {
		return nil
	}
	cctx, zero := flightwire.Call(r.ctx)
	stream, err := r.c.fc.DoPut(cctx, zero)
	if err != nil {
		return flighterr.FromStatus("DoPut", err)
	}
	r.stream, r.schema = stream, schema
	r.w = flightwire.NewWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(r.c.mem))
	r.w.SetFlightDescriptor(r.desc)
	close(r.ready)
	return nil
}

// Submit implements PipelinedWriter.
func (r *remoteWriter) Submit(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := CheckBatch(rec, cp); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.start(rec.Schema()); err != nil {
		return err
	}
	if !r.schema.Equal(rec.Schema()) {
		return fmt.Errorf("%w: batch schema %s differs from the stream's %s", flightline.ErrSchemaMismatch, rec.Schema(), r.schema)
	}
	if err := r.w.WriteWithAppMetadata(rec, cp); err != nil {
		if errors.Is(err, io.EOF) {
			// The server ended the stream; its status arrives with the
			// next Ack. Submit must not Recv itself: Ack may be receiving
			// on another goroutine.
			return ErrWriterBroken
		}
		return flighterr.FromStatus("DoPut", err)
	}
	return nil
}

// ErrWriterBroken is returned by a PipelinedWriter's Submit when the stream
// has already ended on the server's side. The cause is reported by Ack, which
// the caller should call for the batches it has submitted.
var ErrWriterBroken = errors.New("flightsink: the sink ended the stream; Ack reports why")

// Ack implements PipelinedWriter.
func (r *remoteWriter) Ack(ctx context.Context) ([]byte, error) {
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.ctx.Done():
		return nil, errors.New("flightsink: writer closed")
	}
	stop := context.AfterFunc(ctx, r.cancel) // a cancelled Ack aborts the stream
	defer stop()
	res, err := r.stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: sink ended the DoPut stream without acknowledging", flightline.ErrUnavailable)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.reported.Store(true)
		return nil, flighterr.FromStatus("DoPut", err)
	}
	return res.AppMetadata, nil
}

// WriteBatch implements Writer: Submit and wait for the ack.
func (r *remoteWriter) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := r.Submit(ctx, rec, cp); err != nil && !errors.Is(err, ErrWriterBroken) {
		return err
	}
	got, err := r.Ack(ctx) // on ErrWriterBroken: the server's status
	if err != nil {
		return err
	}
	if !bytes.Equal(got, cp) {
		return fmt.Errorf("flightsink: sink acknowledged checkpoint %q, want %q", got, cp)
	}
	return nil
}

// Close implements Writer and PipelinedWriter: it half-closes the stream,
// waits for the server to finish, and tears the stream down. A failure Ack
// already reported is not reported again.
func (r *remoteWriter) Close(ctx context.Context) error {
	defer r.cancel()
	r.mu.Lock()
	stream := r.stream
	r.mu.Unlock()
	if stream == nil {
		return nil
	}
	_ = r.w.Close()
	if err := stream.CloseSend(); err != nil {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if r.reported.Load() {
			return nil
		}
		return flighterr.FromStatus("DoPut close", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}
