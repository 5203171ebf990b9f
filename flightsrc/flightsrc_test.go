package flightsrc_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

var quiet = slog.New(slog.DiscardHandler)

func TestGeneratorResumesAfterCheckpoint(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	g, err := flightsrc.NewGenerator(flightsrc.GenRows(1000), flightsrc.GenBatchRows(300), flightsrc.GenAllocator(mem))
	require.NoError(t, err)
	ctx := context.Background()
	rd, err := g.Read(ctx, flightsrc.ReadRequest{Stream: "orders", After: checkpoint.Positions{"orders/0": 250}.Encode()})
	require.NoError(t, err)
	defer rd.Close()
	want := []int64{550, 850, 1000}
	next := int64(250)
	for _, end := range want {
		rec, cp, err := rd.Next(ctx)
		require.NoError(t, err)
		ids := rec.Column(0).(*array.Int64).Int64Values()
		require.Equal(t, next, ids[0])
		require.Equal(t, end-1, ids[len(ids)-1])
		require.Equal(t, string(checkpoint.Positions{"orders/0": end}.Encode()), string(cp))
		rec.Release()
		next = end
	}
	_, _, err = rd.Next(ctx)
	require.ErrorIs(t, err, io.EOF)
}

func TestGeneratorIsDeterministic(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	a := flightsrc.GenerateOrders(mem, 100, 200)
	b := flightsrc.GenerateOrders(mem, 150, 200)
	defer a.Release()
	defer b.Release()
	tail := a.NewSlice(50, 100)
	defer tail.Release()
	require.True(t, array.RecordEqual(tail, b), "row i has the same values whatever the batch")
}

func TestGeneratorRejectsForeignCheckpoints(t *testing.T) {
	g, err := flightsrc.NewGenerator()
	require.NoError(t, err)
	for _, cp := range [][]byte{[]byte("opaque"), checkpoint.Positions{"other/0": 1}.Encode()} {
		_, err := g.Read(context.Background(), flightsrc.ReadRequest{Stream: "orders", After: cp})
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
	}
	_, err = g.Read(context.Background(), flightsrc.ReadRequest{Stream: "nope"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
}

// idleSource sends one batch, then nothing until its context ends.
type idleSource struct{ mem memory.Allocator }

var idleSchema = arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)

func (s idleSource) Streams(context.Context) ([]flightsrc.Stream, error) {
	return []flightsrc.Stream{{Name: "idle", Schema: idleSchema}}, nil
}
func (s idleSource) Read(context.Context, flightsrc.ReadRequest) (flightsrc.Reader, error) {
	return &idleReader{mem: s.mem}, nil
}
func (s idleSource) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

type idleReader struct {
	mem  memory.Allocator
	sent atomic.Bool
}

func (r *idleReader) Schema() *arrow.Schema { return idleSchema }
func (r *idleReader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	if !r.sent.Swap(true) {
		b := array.NewInt64Builder(r.mem)
		b.AppendValues([]int64{1, 2, 3}, nil)
		col := b.NewArray()
		b.Release()
		rec := array.NewRecordBatch(idleSchema, []arrow.Array{col}, 3)
		col.Release()
		return rec, []byte("cp-3"), nil
	}
	<-ctx.Done()
	return nil, nil, ctx.Err()
}
func (r *idleReader) Close() error { return nil }

func TestServerSendsHeartbeatsWhenIdle(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	url := flighttest.Serve(t, flightsrc.NewServer(idleSource{mem: mem}, flightsrc.WithAllocator(mem), flightsrc.WithLogger(quiet),
		flightsrc.WithHeartbeat(50*time.Millisecond)), endpoint.ServerConfig{})
	c, err := flightsrc.DialWithAllocator(url, flightsrc.ClientConfig{}, mem)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rd, err := c.Read(ctx, flightsrc.ReadRequest{Stream: "idle"})
	require.NoError(t, err)
	defer rd.Close()
	rec, cp, err := rd.Next(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, rec.NumRows())
	rec.Release()
	require.Equal(t, "cp-3", string(cp))
	for range 2 {
		hb, cp, err := rd.Next(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 0, hb.NumRows(), "heartbeat is a 0-row batch")
		require.Equal(t, "cp-3", string(cp), "carrying the last checkpoint")
		hb.Release()
	}
}

func TestClientDescribesStreamsAndMapsErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	g, err := flightsrc.NewGenerator(flightsrc.GenRows(10), flightsrc.GenAllocator(mem))
	require.NoError(t, err)
	url := flighttest.Serve(t, flightsrc.NewServer(g, flightsrc.WithAllocator(mem), flightsrc.WithLogger(quiet)), endpoint.ServerConfig{})
	c, err := flightsrc.DialWithAllocator(url, flightsrc.ClientConfig{}, mem)
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()

	streams, err := c.Streams(ctx)
	require.NoError(t, err)
	require.Len(t, streams, 1)
	require.Equal(t, "orders", streams[0].Name)
	require.True(t, streams[0].Schema.Equal(flightsrc.GeneratorSchema))

	_, err = c.Read(ctx, flightsrc.ReadRequest{Stream: "missing"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	_, err = c.Read(ctx, flightsrc.ReadRequest{Stream: "orders", After: []byte("garbage")})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.NoError(t, c.Commit(ctx, flightsrc.CommitRequest{Stream: "orders", Checkpoint: []byte(`{"positions":{"orders/0":5}}`)}))

	// Abandoning a reader mid-stream releases everything it buffered.
	rd, err := c.Read(ctx, flightsrc.ReadRequest{Stream: "orders"})
	require.NoError(t, err)
	require.NoError(t, rd.Close())
	_, _, err = rd.Next(ctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, io.EOF))
}
