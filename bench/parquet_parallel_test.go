package bench

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/parquetw"
)

// BenchmarkParquetParallel encodes the same 100k-row orders batch with
// parquetw one column at a time (Parallelism(1)), with its default
// parallelism (GOMAXPROCS), and with pqarrow's defaults plus snappy (the
// peer), interleaving the three round by round so that drift on a shared
// machine lands on all of them. It reports, per side, the median over
// rounds of rows per wall second and rows per CPU second (user+system of
// the process, so GC counts), and the ratios of those medians to the peer.
// FLIGHTLINE_BENCH_ROUNDS sets the rounds (default 7); each round encodes
// the batch 10 times per side.
func BenchmarkParquetParallel(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := flightsrc.GenerateOrders(mem, 0, deltaBatchRows)
	defer rec.Release()
	props := parquet.NewWriterProperties(parquet.WithAllocator(mem), parquet.WithCompression(compress.Codecs.Snappy))
	sides := []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"serial", func(w *bytes.Buffer) error {
			_, err := parquetw.Write(w, rec, parquetw.Allocator(mem), parquetw.Parallelism(1))
			return err
		}},
		{"parallel", func(w *bytes.Buffer) error { _, err := parquetw.Write(w, rec, parquetw.Allocator(mem)); return err }},
		{"pqarrow-defaults-snappy", func(w *bytes.Buffer) error {
			return pqarrow.WriteTable(arrowTable(rec), w, deltaBatchRows, props, pqarrow.DefaultWriterProps())
		}},
	}
	rounds := 7
	if v, err := strconv.Atoi(os.Getenv("FLIGHTLINE_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	const perRound = 10
	wall := make([][]float64, len(sides))
	cpu := make([][]float64, len(sides))
	var buf bytes.Buffer
	for range b.N {
		for r := range rounds {
			for i, s := range sides {
				// Alternate the order too, so no side always runs first.
				i = (i + r) % len(sides)
				s = sides[i]
				c0, t0 := cpuTime(), time.Now()
				for range perRound {
					buf.Reset()
					if err := s.write(&buf); err != nil {
						b.Fatal(err)
					}
				}
				rows := float64(perRound * rec.NumRows())
				wall[i] = append(wall[i], rows/time.Since(t0).Seconds())
				cpu[i] = append(cpu[i], rows/(cpuTime()-c0).Seconds())
			}
		}
	}
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	peer := len(sides) - 1
	for i, s := range sides {
		b.ReportMetric(med(wall[i]), s.name+"-rows/s")
		b.ReportMetric(med(cpu[i]), s.name+"-rows/cpu-s")
		if i != peer {
			b.ReportMetric(med(wall[i])/med(wall[peer]), s.name+"-wall-ratio")
			b.ReportMetric(med(cpu[i])/med(cpu[peer]), s.name+"-cpu-ratio")
		}
	}
	b.Logf("%d interleaved rounds of %d encodes per side; medians: %s", rounds, perRound, fmt.Sprint(func() []string {
		var out []string
		for i, s := range sides {
			out = append(out, fmt.Sprintf("%s %.2fM rows/s wall, %.2fM rows/cpu-s", s.name, med(wall[i])/1e6, med(cpu[i])/1e6))
		}
		return out
	}()))
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
