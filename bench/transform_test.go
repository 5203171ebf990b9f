package bench

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
	"github.com/flightline/flightline/transform"
	"github.com/flightline/flightline/transform/flighttransform"
)

// BenchmarkTransformHop compares, on the hop benchmark's batch (8 int64
// columns, 64k rows), one op = one batch:
//
//   - doget: one DoGet hop (flightsrc.Server → flightsrc.Client), the
//     baseline, as BenchmarkFlightHop/doget;
//   - exchange-go: one round trip through a Go identity transform over
//     DoExchange (flighttransform.Client → Server → transform.Map →
//     back), with transform.Checked on the client as the coordinator runs
//     it: the batch crosses the wire twice and is validated on both ends;
//   - exchange-python: the same through examples/transforms/python in
//     --identity mode (skipped without FLIGHTLINE_PYTHON).
//
// The three are interleaved round by round (interleave_test.go).
func BenchmarkTransformHop(b *testing.B) {
	sides := []side{
		{"doget", func(b *testing.B) { hopDoGet(b, int64Batch) }},
		{"exchange-go", func(b *testing.B) {
			id := transform.Map(func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
				rec.Retain()
				return rec, nil
			})
			url := flighttest.Serve(b, flighttransform.NewServer(id, flighttransform.WithLogger(slog.New(slog.DiscardHandler))), endpoint.ServerConfig{})
			exchangeHop(b, url)
		}},
	}
	if py := os.Getenv("FLIGHTLINE_PYTHON"); py != "" {
		url := startPython(b, py)
		sides = append(sides, side{"exchange-python", func(b *testing.B) { exchangeHop(b, url) }})
	} else {
		b.Log("exchange-python skipped: FLIGHTLINE_PYTHON unset (integration/services/services.sh up python)")
	}
	interleave(b, comparison{unit: "MB/s", perOp: hopMB(int64Batch), external: []string{"exchange-python"}, ratios: []pair{
		{"exchange-go", "doget"}, {"exchange-python", "doget"}, {"exchange-python", "exchange-go"},
	}}, sides...)
}

func exchangeHop(b *testing.B, url string) {
	mem := memory.NewGoAllocator()
	rec := int64Batch(mem)
	defer rec.Release()
	c, err := flighttransform.Dial(url, flightline.ClientConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.SetBytes(int64(util.TotalRecordSize(rec)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	out, err := transform.Checked(url, c, mem).Exchange(ctx, &repeatReader{s: &repeatSource{rec: rec, n: b.N}})
	if err != nil {
		b.Fatal(err)
	}
	for {
		got, _, err := out.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		got.Release()
	}
	out.Close()
	b.StopTimer()
	reportHop(b, rec, start)
}

// startPython runs the Python example transform in identity mode for the
// benchmark's life and returns its URL.
func startPython(b *testing.B, py string) string {
	cmd := exec.Command(py, "../examples/transforms/python/transform.py", "--port", "0", "--identity")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("transform.py did not start: %v", err)
	}
	return "grpc://" + strings.TrimPrefix(strings.TrimSpace(line), "listening on ")
}
