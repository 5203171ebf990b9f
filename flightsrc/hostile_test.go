package flightsrc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// hostileServer serves a generator and returns a raw Flight client to it
// and the server's log.
func hostileServer(t *testing.T, src flightsrc.Source) (flight.FlightServiceClient, *bytes.Buffer) {
	var logs bytes.Buffer
	url := flighttest.Serve(t, flightsrc.NewServer(src, flightsrc.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), flightsrc.WithHeartbeat(0)), endpoint.ServerConfig{})
	conn, err := endpoint.Dial(url, endpoint.ClientConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return flight.NewFlightServiceClient(conn), &logs
}

func doGetCode(t *testing.T, c flight.FlightServiceClient, ticket []byte) codes.Code {
	st, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: ticket})
	require.NoError(t, err)
	for {
		if _, err := st.Recv(); errors.Is(err, io.EOF) {
			return codes.OK
		} else if err != nil {
			return status.Code(err)
		}
	}
}

func TestGeneratorRefusesPositionsThatWrap(t *testing.T) {
	g, err := flightsrc.NewGenerator(flightsrc.GenBatchRows(10))
	require.NoError(t, err)
	_, err = g.Read(context.Background(), flightsrc.ReadRequest{Stream: "orders", After: checkpoint.Positions{"orders/0": math.MaxInt64}.Encode()})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = g.Read(context.Background(), flightsrc.ReadRequest{Stream: "orders", After: checkpoint.Positions{"orders/0": math.MaxInt64 - 9}.Encode()})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)

	// The last position it can serve ends the stream at MaxInt64 and
	// never goes negative.
	rd, err := g.Read(context.Background(), flightsrc.ReadRequest{Stream: "orders", After: checkpoint.Positions{"orders/0": math.MaxInt64 - 10}.Encode()})
	require.NoError(t, err)
	defer rd.Close()
	rec, cp, err := rd.Next(context.Background())
	require.NoError(t, err)
	rec.Release()
	require.Equal(t, string(checkpoint.Positions{"orders/0": math.MaxInt64}.Encode()), string(cp))
	_, _, err = rd.Next(context.Background())
	require.Error(t, err)

	c, _ := hostileServer(t, g)
	tk, _ := json.Marshal(flightsrc.Ticket{Stream: "orders", Checkpoint: checkpoint.Positions{"orders/0": math.MaxInt64}.Encode()})
	require.Equal(t, codes.InvalidArgument, doGetCode(t, c, tk))
}

func TestSourceBoundsNamesAndClipsLogs(t *testing.T) {
	g, err := flightsrc.NewGenerator(flightsrc.GenRows(10))
	require.NoError(t, err)
	c, logs := hostileServer(t, g)
	huge := strings.Repeat("x", 1<<20)
	ctx := context.Background()

	tk, _ := json.Marshal(flightsrc.Ticket{Stream: huge})
	require.Equal(t, codes.InvalidArgument, doGetCode(t, c, tk))
	tk, _ = json.Marshal(flightsrc.Ticket{Stream: "orders", PipelineID: huge})
	require.Equal(t, codes.InvalidArgument, doGetCode(t, c, tk))
	tk, _ = json.Marshal(flightsrc.Ticket{Stream: "nope"})
	require.Equal(t, codes.NotFound, doGetCode(t, c, tk))

	_, err = c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{huge}})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	_, err = c.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"nope"}})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	action := func(typ string, body any) codes.Code {
		b, _ := json.Marshal(body)
		st, err := c.DoAction(ctx, &flight.Action{Type: typ, Body: b})
		require.NoError(t, err)
		for {
			if _, err := st.Recv(); errors.Is(err, io.EOF) {
				return codes.OK
			} else if err != nil {
				return status.Code(err)
			}
		}
	}
	cp := checkpoint.Positions{"orders/0": 5}.Encode()
	require.Equal(t, codes.InvalidArgument, action(huge, nil))
	require.Equal(t, codes.Unimplemented, action("nope", nil))
	require.Equal(t, codes.InvalidArgument, action(flightsrc.ActionCommit, flightsrc.CommitBody{Stream: huge, Checkpoint: cp}))
	require.Equal(t, codes.NotFound, action(flightsrc.ActionCommit, flightsrc.CommitBody{Stream: "nope", Checkpoint: cp}))
	require.Equal(t, codes.OK, action(flightsrc.ActionCommit, flightsrc.CommitBody{Stream: "orders", Checkpoint: cp}))

	for _, line := range strings.Split(logs.String(), "\n") {
		require.Less(t, len(line), 8<<10, "a log line echoes a client string whole: %.200s…", line)
	}
}

// panicky is a source whose reader panics.
type panicky struct{ flightsrc.Source }

func (p panicky) Read(context.Context, flightsrc.ReadRequest) (flightsrc.Reader, error) {
	return panicReader{}, nil
}

type panicReader struct{}

func (panicReader) Schema() *arrow.Schema { return flightsrc.GeneratorSchema }
func (panicReader) Next(context.Context) (arrow.RecordBatch, []byte, error) {
	panic("reader bug")
}
func (panicReader) Close() error { return nil }

func TestSourcePanicIsInternalNotACrash(t *testing.T) {
	g, err := flightsrc.NewGenerator()
	require.NoError(t, err)
	c, logs := hostileServer(t, panicky{g})
	tk, _ := json.Marshal(flightsrc.Ticket{Stream: "orders"})
	require.Equal(t, codes.Internal, doGetCode(t, c, tk))
	require.Contains(t, logs.String(), "reader bug", "the panic is logged")

	// The Go client sees a non-retryable error.
	cl, err := flightsrc.Dial(hostURL(t, panicky{g}), flightsrc.ClientConfig{})
	require.NoError(t, err)
	defer cl.Close()
	rd, err := cl.Read(context.Background(), flightsrc.ReadRequest{Stream: "orders"})
	if err == nil {
		_, _, err = rd.Next(context.Background())
		rd.Close()
	}
	require.ErrorIs(t, err, flightline.ErrInternal)
	require.False(t, flightline.IsRetryable(err))
	require.NotContains(t, err.Error(), "reader bug", "the panic stays in the log")
}

func hostURL(t *testing.T, src flightsrc.Source) string {
	return flighttest.Serve(t, flightsrc.NewServer(src, flightsrc.WithLogger(quiet), flightsrc.WithHeartbeat(0)), endpoint.ServerConfig{})
}
