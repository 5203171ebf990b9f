package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	icesink "github.com/flightline/flightline/flightsink/iceberg"
	"github.com/flightline/flightline/flightsrc"
)

const benchBatches, benchRows = 10, 100_000

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkIcebergVsPyiceberg commits the same 10 generator batches of
// 100k rows, one snapshot each, to a local warehouse with an SQLite
// catalog: "flightline" through the sink (checkpoint in the summary,
// branch-head assertion), "pyiceberg" through pyiceberg's Table.append
// (FLIGHTLINE_PYICEBERG_PYTHON; skipped without it), and reports
// rows per CPU-second of the writing process (rusage for Go,
// time.process_time for Python, both counting every thread).
func BenchmarkIcebergVsPyiceberg(b *testing.B) {
	mem := memory.NewGoAllocator()
	recs := make([]arrow.RecordBatch, benchBatches)
	for i := range recs {
		recs[i] = flightsrc.GenerateOrders(mem, int64(i*benchRows), int64((i+1)*benchRows))
		defer recs[i].Release()
	}
	b.Run("flightline", func(b *testing.B) {
		ctx := context.Background()
		s, err := icesink.New(ctx, icesink.Config{Warehouse: b.TempDir()}, icesink.Allocator(mem))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ResetTimer()
		cpu0, start := cpuSeconds(), time.Now()
		for op := range b.N {
			w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "bench", Target: fmt.Sprintf("t%d", op)})
			if err != nil {
				b.Fatal(err)
			}
			for i, rec := range recs {
				if err := w.WriteBatch(ctx, rec, checkpoint.Positions{"orders/0": int64((i + 1) * benchRows)}.Encode()); err != nil {
					b.Fatal(err)
				}
			}
			_ = w.Close(ctx)
		}
		rows := float64(b.N * benchBatches * benchRows)
		b.ReportMetric(rows/time.Since(start).Seconds(), "rows/s")
		b.ReportMetric(rows/(cpuSeconds()-cpu0), "rows/cpu-s")
	})
	b.Run("pyiceberg", func(b *testing.B) {
		py := os.Getenv("FLIGHTLINE_PYICEBERG_PYTHON")
		if py == "" {
			b.Skip("FLIGHTLINE_PYICEBERG_PYTHON is not set (integration/services/services.sh up iceberg)")
		}
		dir := b.TempDir()
		in := filepath.Join(dir, "in.arrow")
		f, err := os.Create(in)
		if err != nil {
			b.Fatal(err)
		}
		iw, err := ipc.NewFileWriter(f, ipc.WithSchema(recs[0].Schema()))
		if err != nil {
			b.Fatal(err)
		}
		for _, rec := range recs {
			if err := iw.Write(rec); err != nil {
				b.Fatal(err)
			}
		}
		if err := iw.Close(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		b.ResetTimer()
		start := time.Now()
		out, err := exec.Command(py, "testdata/bench_pyiceberg.py", in, filepath.Join(dir, "wh"), strconv.Itoa(b.N)).CombinedOutput()
		if err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		var rows, cpu float64
		if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &rows, &cpu); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		b.ReportMetric(rows/time.Since(start).Seconds(), "rows/s")
		b.ReportMetric(rows/cpu, "rows/cpu-s")
	})
}
