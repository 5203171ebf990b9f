package doputtest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// NewSink returns a fresh sink of the kind under test.
type NewSink func(t testing.TB) flightsink.Sink

// runner runs one DoPut.
type runner func(ctx context.Context, msgs []*flight.FlightData) ([][]byte, error)

// Run sends every case of the corpus to a sink of one kind, in-process
// (Server.DoPut on a Stream) and over Flight (a loopback gRPC server), and
// checks that each is refused with INVALID_ARGUMENT, acknowledges and
// commits nothing (the case's pipeline has no checkpoint), leaves no byte
// of the server's checked allocator behind and the Go heap where it was; then that the server still
// commits every valid stream (but those named in unsupported, of types the
// sink cannot store), and that the Go heap is back where it was. Every
// run writes targets of its own (c<i>_<tag>, v<i>_<tag>).
func Run(t *testing.T, newSink NewSink, unsupported ...string) {
	for _, mode := range []string{"in-process", "in-process-wire", "flight"} {
		t.Run(mode, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the sink's and the server's cleanups
			sink := newSink(t)
			var logs bytes.Buffer
			srv := flightsink.NewServer(sink, flightsink.WithAllocator(mem),
				flightsink.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			var run runner = func(ctx context.Context, msgs []*flight.FlightData) ([][]byte, error) {
				return InProcess(ctx, srv, msgs)
			}
			if mode == "in-process-wire" {
				run = func(ctx context.Context, msgs []*flight.FlightData) ([][]byte, error) {
					return InProcessWire(ctx, srv, msgs)
				}
			}
			if mode == "flight" {
				url := flighttest.Serve(t, srv, endpoint.ServerConfig{})
				conn, err := endpoint.Dial(url, endpoint.ClientConfig{})
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				run = func(ctx context.Context, msgs []*flight.FlightData) ([][]byte, error) {
					return OverFlight(ctx, conn, msgs)
				}
				for _, c := range RawCases() {
					if err := RawOverFlight(context.Background(), conn, c.B); status.Code(err) != codes.InvalidArgument {
						t.Errorf("%s: got %v, want INVALID_ARGUMENT\nserver log:\n%s", c.Name, err, tail(logs.String()))
					}
				}
			}
			ctx := context.Background()
			// Targets are new to every run: sinks on a shared service
			// (a database, a broker) keep what earlier runs wrote.
			tag := strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36*36), 36)
			before := heapInUse()
			for i, c := range Cases() {
				p := flightsink.Pipeline{ID: fmt.Sprintf("case-%d-%s", i, tag), Target: fmt.Sprintf("c%d_%s", i, tag)}
				desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{p.ID, p.Target}}
				caseBefore := heapInUse()
				acks, err := run(ctx, FlightData(desc, c.Messages))
				if after := heapInUse(); after > caseBefore+16<<20 {
					t.Errorf("%s: heap in use grew from %d to %d bytes", c.Name, caseBefore, after)
				}
				if status.Code(err) != codes.InvalidArgument {
					t.Errorf("%s: got %v, want INVALID_ARGUMENT\nserver log:\n%s", c.Name, err, tail(logs.String()))
					continue
				}
				if len(acks) != 0 {
					t.Errorf("%s: %d batches acknowledged", c.Name, len(acks))
				}
				cp, err := sink.Checkpoint(ctx, p)
				if err != nil || cp != nil {
					t.Errorf("%s: pipeline checkpoint %q, %v after a refused stream; want none", c.Name, cp, err)
				}
				if n := mem.CurrentAlloc(); n != 0 {
					t.Errorf("%s: %d bytes of the server's allocator still held", c.Name, n)
				}
			}
			for i, v := range Valid() {
				if slices.Contains(unsupported, v.Name) {
					continue
				}
				p := flightsink.Pipeline{ID: fmt.Sprintf("valid-%d-%s", i, tag), Target: fmt.Sprintf("v%d_%s", i, tag)}
				desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{p.ID, p.Target}}
				acks, err := run(ctx, FlightData(desc, v.Messages))
				if err != nil || len(acks) != 1 || !bytes.Equal(acks[0], Checkpoint(1)) {
					t.Fatalf("valid stream %q after the corpus: acks %q, %v\nserver log:\n%s", v.Name, acks, err, tail(logs.String()))
				}
			}
			// Allow for the sink's own state and the runtime's caches; a
			// bomb that got allocated would be hundreds of MiB.
			if after := heapInUse(); after > before+64<<20 {
				t.Errorf("heap in use grew from %d to %d bytes over the corpus", before, after)
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// wireDescriptor is the descriptor of the fuzz targets' second run.
var wireDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"corpus", "wire"}}

// hang is how long one fuzz input may take.
const hang = 60 * time.Second

// Fuzz is the body of a DoPut fuzz target: it seeds f with the valid
// streams and the corpus, and for each input runs one in-process DoPut on a
// fresh sink. Any status but OK or INVALID_ARGUMENT fails (INTERNAL means
// a writer panicked and was recovered); stored, when not nil, is then
// called to check what the sink committed (every acknowledged batch must
// pass full validation); and the server's allocator must be empty.
func Fuzz(f *testing.F, newSink NewSink, stored func(t *testing.T, sink flightsink.Sink, acks int)) {
	for _, v := range Valid() {
		f.Add(Marshal(v.Messages))
	}
	for _, c := range Cases() {
		f.Add(Marshal(c.Messages))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs := Unmarshal(b)
		if len(msgs) == 0 {
			return
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		sink := newSink(t)
		var logs bytes.Buffer
		srv := flightsink.NewServer(sink, flightsink.WithAllocator(mem),
			flightsink.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		// A hang is a failure too: the panic on the timer's goroutine
		// ends the worker, and the fuzzer keeps the input as a crasher.
		watchdog := time.AfterFunc(hang, func() { panic(fmt.Sprintf("DoPut of a %d-byte input still running after %s", len(b), hang)) })
		acks, err := InProcess(context.Background(), srv, FlightData(Descriptor, msgs))
		if c := status.Code(err); c != codes.OK && c != codes.InvalidArgument {
			t.Fatalf("DoPut: %v\nserver log:\n%s", err, tail(logs.String()))
		}
		// The same input through flightwire's zero-copy reader, on a
		// fresh pipeline target so as not to replay the first run.
		wacks, err := InProcessWire(context.Background(), srv, FlightData(wireDescriptor, msgs))
		watchdog.Stop()
		if c := status.Code(err); c != codes.OK && c != codes.InvalidArgument {
			t.Fatalf("DoPut (flightwire): %v\nserver log:\n%s", err, tail(logs.String()))
		}
		acks = append(acks, wacks...)
		if stored != nil {
			stored(t, sink, len(acks))
		}
		mem.AssertSize(t, 0)
	})
}
