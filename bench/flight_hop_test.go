// Package bench holds Flightline's benchmarks. Run them with
//
//	go test -run '^$' -bench . -benchmem -count 6 ./bench/ | tee new.txt
//
// and compare runs with benchstat. bench/README.md has the figures.
package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighttest"
)

const hopRows = 64 * 1024

// int64Batch builds the hop benchmark's batch: 8 int64 columns, 64k rows
// (4 MiB of values).
func int64Batch(mem memory.Allocator) arrow.RecordBatch {
	fields := make([]arrow.Field, 8)
	for i := range fields {
		fields[i] = arrow.Field{Name: string(rune('a' + i)), Type: arrow.PrimitiveTypes.Int64}
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for c := range 8 {
		fb := b.Field(c).(*array.Int64Builder)
		fb.Reserve(hopRows)
		for i := range hopRows {
			fb.UnsafeAppend(int64(i * (c + 1)))
		}
	}
	return b.NewRecordBatch()
}

// repeatSource serves the same batch n times.
type repeatSource struct {
	rec arrow.RecordBatch
	n   int
}

func (s *repeatSource) Streams(context.Context) ([]flightsrc.Stream, error) {
	return []flightsrc.Stream{{Name: "hop", Schema: s.rec.Schema()}}, nil
}

func (s *repeatSource) Read(_ context.Context, _ flightsrc.ReadRequest) (flightsrc.Reader, error) {
	return &repeatReader{s: s}, nil
}

func (s *repeatSource) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

type repeatReader struct {
	s *repeatSource
	i int
}

func (r *repeatReader) Schema() *arrow.Schema { return r.s.rec.Schema() }
func (r *repeatReader) Next(context.Context) (arrow.RecordBatch, []byte, error) {
	if r.i >= r.s.n {
		return nil, nil, io.EOF
	}
	r.i++
	r.s.rec.Retain()
	return r.s.rec, checkpoint.Positions{"hop/0": int64(r.i)}.Encode(), nil
}
func (r *repeatReader) Close() error { return nil }

func reportHop(b *testing.B, rec arrow.RecordBatch, start time.Time) {
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)*float64(util.TotalRecordSize(rec))/secs/1e9, "GB/s")
	b.ReportMetric(float64(b.N)*float64(rec.NumRows())/secs, "rows/s")
}

// BenchmarkFlightHopDoGet: one Flight hop on loopback, server to client,
// through flightsrc.Server and flightsrc.Client. One op is one batch.
func BenchmarkFlightHopDoGet(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := int64Batch(mem)
	defer rec.Release()
	src := &repeatSource{rec: rec}
	url := flighttest.Serve(b, flightsrc.NewServer(src, flightsrc.WithLogger(slog.New(slog.DiscardHandler)), flightsrc.WithHeartbeat(0)), endpoint.ServerConfig{})
	c, err := flightsrc.Dial(url, flightsrc.ClientConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.SetBytes(int64(util.TotalRecordSize(rec)))
	b.ReportAllocs()
	src.n = b.N
	b.ResetTimer()
	start := time.Now()
	rd, err := c.Read(ctx, flightsrc.ReadRequest{Stream: "hop"})
	if err != nil {
		b.Fatal(err)
	}
	for {
		got, _, err := rd.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		got.Release()
	}
	rd.Close()
	b.StopTimer()
	reportHop(b, rec, start)
}

// BenchmarkFlightHopDoPut: one Flight hop on loopback, client to server,
// through the flightsink Client's pipelined writer into a Null sink behind
// flightsink.Server. Acks are awaited, 4 batches in flight. The server
// validates every batch (the default).
func BenchmarkFlightHopDoPut(b *testing.B) { hopDoPut(b, int64Batch) }

// BenchmarkFlightHopDoPutNoValidation is BenchmarkFlightHopDoPut with the
// server's batch validation off: the difference is what
// flightsink.ValidateBatch costs on the hop.
func BenchmarkFlightHopDoPutNoValidation(b *testing.B) {
	hopDoPut(b, int64Batch, flightsink.WithValidation(false))
}

// BenchmarkFlightHopDoPutOrders and ...OrdersNoValidation are the hop with
// the generator's 64k orders (a string column, whose UTF-8 check is the
// expensive part of validation) instead of int64 columns.
func BenchmarkFlightHopDoPutOrders(b *testing.B) { hopDoPut(b, ordersBatch) }

func BenchmarkFlightHopDoPutOrdersNoValidation(b *testing.B) {
	hopDoPut(b, ordersBatch, flightsink.WithValidation(false))
}

func ordersBatch(mem memory.Allocator) arrow.RecordBatch {
	return flightsrc.GenerateOrders(mem, 0, hopRows)
}

func hopDoPut(b *testing.B, batch func(memory.Allocator) arrow.RecordBatch, opts ...flightsink.ServerOption) {
	mem := memory.NewGoAllocator()
	rec := batch(mem)
	defer rec.Release()
	opts = append([]flightsink.ServerOption{flightsink.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	url := flighttest.Serve(b, flightsink.NewServer(flightsink.NewNull(), opts...), endpoint.ServerConfig{})
	c, err := flightsink.Dial(url, flightsink.ClientConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	w, _, err := c.Open(ctx, flightsink.Pipeline{ID: "hop"})
	if err != nil {
		b.Fatal(err)
	}
	pw := flightsink.Pipelined(w, 4)
	defer pw.Close(ctx)
	b.SetBytes(int64(util.TotalRecordSize(rec)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	const window = 4
	inflight := 0
	for i := range b.N {
		if inflight == window {
			if _, err := pw.Ack(ctx); err != nil {
				b.Fatal(err)
			}
			inflight--
		}
		if err := pw.Submit(ctx, rec, checkpoint.Positions{"hop/0": int64(i + 1)}.Encode()); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
	for ; inflight > 0; inflight-- {
		if _, err := pw.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportHop(b, rec, start)
}

// BenchmarkLoopbackTCPCeiling moves the same number of bytes per op as the
// hop benchmarks over a plain loopback TCP socket: the ceiling the Flight
// hop is compared with, measured in the same run.
func BenchmarkLoopbackTCPCeiling(b *testing.B) {
	rec := int64Batch(memory.NewGoAllocator())
	size := util.TotalRecordSize(rec)
	rec.Release()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer lis.Close()
	done := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		done <- err
	}()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	conn.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*float64(size)/time.Since(start).Seconds()/1e9, "GB/s")
}

// BenchmarkValidateBatch is flightsink.ValidateBatch alone on the hop
// benchmarks' batches: the server's per-batch validation cost without the
// network's noise.
func BenchmarkValidateBatch(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch func(memory.Allocator) arrow.RecordBatch
	}{{"int64", int64Batch}, {"orders", ordersBatch}} {
		b.Run(bc.name, func(b *testing.B) {
			rec := bc.batch(memory.NewGoAllocator())
			defer rec.Release()
			b.SetBytes(int64(util.TotalRecordSize(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if err := flightsink.ValidateBatch(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
