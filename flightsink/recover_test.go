package flightsink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// panicSink is a Memory sink whose writers panic on pipeline "boom".
type panicSink struct {
	*flightsink.Memory
	closed atomic.Int32
}

func (s *panicSink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	w, cp, err := s.Memory.Open(ctx, p)
	return &panicWriter{Writer: w, s: s, boom: p.ID == "boom"}, cp, err
}

type panicWriter struct {
	flightsink.Writer
	s    *panicSink
	boom bool
}

func (w *panicWriter) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if w.boom {
		panic("writer bug: secret detail")
	}
	return w.Writer.WriteBatch(ctx, rec, cp)
}

func (w *panicWriter) Close(ctx context.Context) error {
	w.s.closed.Add(1)
	return w.Writer.Close(ctx)
}

// TestWriterPanicIsInternalAndNotRetryable: a panic in WriteBatch does not
// take the server down; the writer is closed, the batch released, the call
// fails with INTERNAL (reason INTERNAL_BUG), which the Go client maps to a
// non-retryable ErrInternal, and the panic is in the log only.
func TestWriterPanicIsInternalAndNotRetryable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := &panicSink{Memory: flightsink.NewMemory()}
	t.Cleanup(sink.Release)
	var logs bytes.Buffer
	srv := flightsink.NewServer(sink, flightsink.WithAllocator(mem), flightsink.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	url := flighttest.Serve(t, srv, endpoint.ServerConfig{})
	c, err := flightsink.Dial(url, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()

	rec := doputtest.Int64s(memory.NewGoAllocator())
	defer rec.Release()
	w, _, err := c.Open(ctx, flightsink.Pipeline{ID: "boom"})
	require.NoError(t, err)
	err = w.WriteBatch(ctx, rec, doputtest.Checkpoint(1))
	require.ErrorIs(t, err, flightline.ErrInternal)
	require.False(t, flightline.IsRetryable(err))
	require.Equal(t, codes.Internal, status.Code(err))
	require.NotContains(t, err.Error(), "secret detail")
	_ = w.Close(ctx) // returns the stream's error again
	require.Contains(t, logs.String(), "writer bug: secret detail")
	require.Contains(t, logs.String(), "panicked")

	cp, err := sink.Checkpoint(ctx, flightsink.Pipeline{ID: "boom"})
	require.NoError(t, err)
	require.Nil(t, cp, "nothing committed")
	require.EqualValues(t, 1, sink.closed.Load(), "the writer was closed")

	// Still serving.
	w, _, err = c.Open(ctx, flightsink.Pipeline{ID: "fine"})
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, doputtest.Checkpoint(1)))
	require.NoError(t, w.Close(ctx))
}

// TestPipelinedPanicIsInternal: the in-process pipelined writer (the
// coordinator's path to a local sink) reports a panic as ErrInternal too.
func TestPipelinedPanicIsInternal(t *testing.T) {
	sink := &panicSink{Memory: flightsink.NewMemory()}
	defer sink.Release()
	ctx := context.Background()
	w, _, err := sink.Open(ctx, flightsink.Pipeline{ID: "boom"})
	require.NoError(t, err)
	pw := flightsink.Pipelined(w, 2)
	rec := doputtest.Int64s(memory.NewGoAllocator())
	defer rec.Release()
	require.NoError(t, pw.Submit(ctx, rec, doputtest.Checkpoint(1)))
	_, err = pw.Ack(ctx)
	require.ErrorIs(t, err, flightline.ErrInternal)
	require.False(t, flightline.IsRetryable(err))
	require.NoError(t, pw.Close(ctx))
}

// TestDecompressionBombAllocatesNothing: bodies declaring 600 MiB, 8 GiB
// and 1 TiB, and schemas declaring 2^20 and 2^31 fields in a few hundred
// bytes, are refused before anything is allocated: the bytes the whole
// process allocates while refusing them stay far below any of them, and
// the heap is where it was.
func TestDecompressionBombAllocatesNothing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	srv := flightsink.NewServer(flightsink.NewNull(), flightsink.WithAllocator(mem), flightsink.WithLogger(slog.New(slog.DiscardHandler)))
	url := flighttest.Serve(t, srv, endpoint.ServerConfig{})
	conn, err := endpoint.Dial(url, endpoint.ClientConfig{})
	require.NoError(t, err)
	defer conn.Close()
	bombs := doputtest.Bombs()
	require.Len(t, bombs, 5) // three compressed bodies, two schemas declaring 2^20 and 2^31 fields
	for _, b := range bombs {
		fds := doputtest.FlightData(doputtest.Descriptor, b.Messages)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := doputtest.OverFlight(context.Background(), conn, fds)
		runtime.ReadMemStats(&after) // peak: TotalAlloc counts every allocation, freed or not
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", b.Name, err)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32<<20), "%s: bytes allocated while refusing it", b.Name)
		require.Less(t, int64(after.HeapSys)-int64(before.HeapSys), int64(64<<20), "%s: heap obtained from the OS", b.Name)
		runtime.GC()
		runtime.ReadMemStats(&after)
		require.Less(t, int64(after.HeapInuse)-int64(before.HeapInuse), int64(16<<20), "%s: heap in use afterwards", b.Name)
		require.Less(t, after.NextGC, before.NextGC+64<<20, "%s: the GC's next target", b.Name)
	}
}

// TestSinkBoundsNames: pipeline ids, targets and action types over
// endpoint.MaxNameSize are INVALID_ARGUMENT, and the refusal does not echo
// them.
func TestSinkBoundsNames(t *testing.T) {
	var logs bytes.Buffer
	srv := flightsink.NewServer(flightsink.NewNull(), flightsink.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	url := flighttest.Serve(t, srv, endpoint.ServerConfig{})
	conn, err := endpoint.Dial(url, endpoint.ClientConfig{})
	require.NoError(t, err)
	defer conn.Close()
	huge := strings.Repeat("n", 1<<20)
	ctx := context.Background()
	valid := doputtest.Valid()[0].Messages
	for _, desc := range []*flight.FlightDescriptor{
		{Type: flight.DescriptorPATH, Path: []string{huge}},
		{Type: flight.DescriptorPATH, Path: []string{"p", huge}},
		{Type: flight.DescriptorCMD, Cmd: []byte(`{"pipeline_id":"` + huge + `"}`)},
		{Type: flight.DescriptorCMD, Cmd: []byte(`{"pipeline_id":"p","claim":"` + huge + `"}`)},
		{Type: flight.DescriptorCMD, Cmd: []byte(`{"pipeline_id":"p","rejoin":true}`)}, // a rejoin names its claim
	} {
		_, err := doputtest.OverFlight(ctx, conn, doputtest.FlightData(desc, valid))
		require.Equal(t, codes.InvalidArgument, status.Code(err))
		require.Less(t, len(status.Convert(err).Message()), 4096)
	}
	fc := flight.NewFlightServiceClient(conn)
	action := func(typ string, body []byte) error {
		st, err := fc.DoAction(ctx, &flight.Action{Type: typ, Body: body})
		require.NoError(t, err)
		for {
			if _, err := st.Recv(); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	require.Equal(t, codes.InvalidArgument, status.Code(action(huge, nil)))
	body, _ := json.Marshal(flightsink.PipelineRequest{PipelineID: huge})
	require.Equal(t, codes.InvalidArgument, status.Code(action(flightsink.ActionCheckpoint, body)))
	require.Equal(t, codes.Unimplemented, status.Code(action("nope", nil)))
	for _, line := range strings.Split(logs.String(), "\n") {
		require.Less(t, len(line), 8<<10, "a log line echoes a client string whole: %.200s…", line)
	}
}

// TestMaxBatchBytes: the bound on declared uncompressed sizes is the
// server's option, and a valid compressed batch over it is refused before
// it is decompressed.
func TestMaxBatchBytes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	var zstd []doputtest.Message
	for _, v := range doputtest.Valid() {
		if v.Name == "strings zstd" {
			zstd = v.Messages
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		max  int64
		want codes.Code
	}{{64, codes.InvalidArgument}, {1 << 20, codes.OK}} {
		srv := flightsink.NewServer(flightsink.NewNull(), flightsink.WithAllocator(mem), flightsink.WithLogger(slog.New(slog.DiscardHandler)),
			flightsink.WithMaxBatchBytes(tc.max))
		_, err := doputtest.InProcess(ctx, srv, doputtest.FlightData(doputtest.Descriptor, zstd))
		require.Equal(t, tc.want, status.Code(err), "max %d: %v", tc.max, err)
	}
}
