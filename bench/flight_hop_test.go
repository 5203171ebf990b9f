// Package bench holds Flightline's benchmarks. Run them with
//
//	FLIGHTLINE_BENCH_ROUNDS=5 go test -run '^$' -bench . -benchmem ./bench/ | tee new.txt
//
// Side-by-side benchmarks interleave their sides round by round
// (interleave_test.go) and print medians and ratios; `make bench-report`
// writes bench/report.md and its charts. bench/README.md has the figures.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

const hopRows = 64 * 1024

// int64Batch builds the hop benchmark's batch: 8 int64 columns, 64k rows
// (4 MiB of values).
func int64Batch(mem memory.Allocator) arrow.RecordBatch { return int64BatchRows(mem, hopRows) }

// int64BatchRows is int64Batch with rows rows.
func int64BatchRows(mem memory.Allocator, rows int) arrow.RecordBatch {
	fields := make([]arrow.Field, 8)
	for i := range fields {
		fields[i] = arrow.Field{Name: string(rune('a' + i)), Type: arrow.PrimitiveTypes.Int64}
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for c := range 8 {
		fb := b.Field(c).(*array.Int64Builder)
		fb.Reserve(rows)
		for i := range rows {
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

// hopMB is the size of the hop benchmarks' batch in MB (10^6 bytes).
func hopMB(batch func(memory.Allocator) arrow.RecordBatch) float64 {
	rec := batch(memory.NewGoAllocator())
	defer rec.Release()
	return float64(util.TotalRecordSize(rec)) / 1e6
}

// BenchmarkFlightHop: one Flight hop on loopback, interleaved round by
// round with its ceiling and its peer, one op = one batch of 8 int64
// columns, 64k rows (4 MiB):
//
//   - doget: flightsrc.Server → gRPC → flightsrc.Client;
//   - doput: flightsink.Client's pipelined writer (4 batches in flight,
//     acks awaited) → gRPC → flightsink.Server (validating, the default) →
//     Null sink;
//   - tcp: the same bytes over a plain loopback TCP socket, the ceiling;
//   - pyarrow-doget, pyarrow-doput: the same batches between a pyarrow
//     (C++) Flight server and client, each in its own Python process
//     (flight_hop_peer.py; skipped without FLIGHTLINE_PYTHON).
func BenchmarkFlightHop(b *testing.B) {
	sides := []side{
		{"doget", func(b *testing.B) { hopDoGet(b, int64Batch) }},
		{"doput", func(b *testing.B) { hopDoPut(b, int64Batch) }},
		{"tcp", func(b *testing.B) { loopbackTCP(b, int64Batch) }},
	}
	if py := os.Getenv("FLIGHTLINE_PYTHON"); py != "" {
		peer := startHopPeer(b, py, hopRows)
		sides = append(sides,
			side{"pyarrow-doget", func(b *testing.B) { peer.run(b, "get", int64Batch) }},
			side{"pyarrow-doput", func(b *testing.B) { peer.run(b, "put", int64Batch) }})
	} else {
		peerMissing(b, "pyarrow peer: FLIGHTLINE_PYTHON unset (integration/services/services.sh up python)")
	}
	interleave(b, comparison{unit: "MB/s", perOp: hopMB(int64Batch), external: []string{"pyarrow-doget", "pyarrow-doput"}, ratios: []pair{
		{"doget", "tcp"}, {"doput", "tcp"}, {"doget", "pyarrow-doget"}, {"doput", "pyarrow-doput"},
		{"pyarrow-doget", "tcp"}, {"pyarrow-doput", "tcp"},
	}}, sides...)
}

// BenchmarkFlightHopBatchSize is BenchmarkFlightHop's Go sides and its
// ceiling at 4k, 16k, 64k and 256k rows per batch (8 int64 columns): how
// the hop scales with batch size.
func BenchmarkFlightHopBatchSize(b *testing.B) {
	for _, rows := range []int{4 << 10, 16 << 10, 64 << 10, 256 << 10} {
		batch := func(mem memory.Allocator) arrow.RecordBatch { return int64BatchRows(mem, rows) }
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			interleave(b, comparison{unit: "MB/s", perOp: hopMB(batch), ratios: []pair{{"doget", "tcp"}, {"doput", "tcp"}}},
				side{"doget", func(b *testing.B) { hopDoGet(b, batch) }},
				side{"doput", func(b *testing.B) { hopDoPut(b, batch) }},
				side{"tcp", func(b *testing.B) { loopbackTCP(b, batch) }})
		})
	}
}

// BenchmarkFlightHopValidation: the DoPut hop with and without the
// server's batch validation (flightsink.WithValidation(false) exists only
// for this comparison), on the int64 batch and on the generator's 64k
// orders (a string column, whose UTF-8 check is the expensive part).
func BenchmarkFlightHopValidation(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch func(memory.Allocator) arrow.RecordBatch
	}{{"int64", int64Batch}, {"orders", ordersBatch}} {
		b.Run("batch="+bc.name, func(b *testing.B) {
			interleave(b, comparison{unit: "MB/s", perOp: hopMB(bc.batch)},
				side{"validated", func(b *testing.B) { hopDoPut(b, bc.batch) }},
				side{"not-validated", func(b *testing.B) { hopDoPut(b, bc.batch, flightsink.WithValidation(false)) }})
		})
	}
}

// hopDoGet: one Flight hop on loopback, server to client, through
// flightsrc.Server and flightsrc.Client. One op is one batch.
func hopDoGet(b *testing.B, batch func(memory.Allocator) arrow.RecordBatch) {
	mem := memory.NewGoAllocator()
	rec := batch(mem)
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

func ordersBatch(mem memory.Allocator) arrow.RecordBatch {
	return flightsrc.GenerateOrders(mem, 0, hopRows)
}

// hopDoPut: one Flight hop on loopback, client to server, through the
// flightsink Client's pipelined writer into a Null sink behind
// flightsink.Server. Acks are awaited, 4 batches in flight.
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

// loopbackTCP moves the same number of bytes per op as the hop benchmarks
// over a plain loopback TCP socket: the ceiling the Flight hop is compared
// with.
func loopbackTCP(b *testing.B, batch func(memory.Allocator) arrow.RecordBatch) {
	rec := batch(memory.NewGoAllocator())
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

// hopPeer is the pyarrow Flight hop peer (flight_hop_peer.py): a server
// process and a client process, both pyarrow's C++ Flight behind Python.
// The client takes commands on stdin ("get N" or "put N": move N batches
// from or to the server) and answers each with its own elapsed seconds.
type hopPeer struct {
	in  io.Writer
	out *bufio.Reader
}

// startHopPeer starts the peer's server and client for the benchmark's
// life; both build the hop batch (8 int64 columns, rows rows) themselves.
func startHopPeer(b *testing.B, py string, rows int) *hopPeer {
	start := func(args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
		cmd := exec.Command(py, append([]string{"flight_hop_peer.py"}, args...)...)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
		return cmd, in, bufio.NewReader(out)
	}
	_, _, srvOut := start("server", strconv.Itoa(rows))
	line, err := srvOut.ReadString('\n')
	if err != nil {
		b.Fatalf("flight_hop_peer.py server did not start: %v", err)
	}
	addr := strings.TrimPrefix(strings.TrimSpace(line), "listening on ")
	_, in, out := start("client", strconv.Itoa(rows), addr)
	if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		b.Fatalf("flight_hop_peer.py client did not start: %q %v", line, err)
	}
	return &hopPeer{in: in, out: out}
}

// run moves b.N batches one way ("get": DoGet, server → client; "put":
// DoPut, client → server, the server reading every batch). The Go clock
// runs around the command; the pipe round trip adds microseconds to
// seconds of work.
func (p *hopPeer) run(b *testing.B, dir string, batch func(memory.Allocator) arrow.RecordBatch) {
	rec := batch(memory.NewGoAllocator())
	b.SetBytes(int64(util.TotalRecordSize(rec)))
	rec.Release()
	b.ResetTimer()
	if _, err := fmt.Fprintf(p.in, "%s %d\n", dir, b.N); err != nil {
		b.Fatal(err)
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if _, err := strconv.ParseFloat(strings.TrimSpace(line), 64); err != nil {
		b.Fatalf("flight_hop_peer.py: %q", line)
	}
}
