// The Iceberg sink next to pyiceberg's own append of the same batches, in
// one run with the rounds interleaved (issue 34's figure: rows per
// CPU-second, goal ≥ 3×); figures in bench/report.md.

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

const iceBatches, iceBatchRows = 10, 100_000

// BenchmarkIceberg commits the same 10 generator batches of 100,000 rows,
// one snapshot each, into a new table of a local warehouse with an SQLite
// catalog, FLIGHTLINE_BENCH_ROUNDS times (default 3), each side once per
// round:
//
//   - flightline: flightsink/iceberg in this process (its checkpoint in
//     each snapshot's summary, the branch-head assertion, the table
//     created at the first batch), timed around its Open, batches and
//     Close;
//   - pyiceberg: pyiceberg's Table.append of the same batches read from
//     an Arrow IPC file (iceberg_pyiceberg.py, FLIGHTLINE_PYICEBERG_PYTHON
//     from `services.sh up iceberg`), which times its appends itself
//     (process CPU and wall), its imports and catalog set-up left out.
//
// The main figure is rows per CPU-second of the writing process (both
// count every thread); rows per wall second is reported beside it. Run it
// with -benchtime 1x.
func BenchmarkIceberg(b *testing.B) {
	py := os.Getenv("FLIGHTLINE_PYICEBERG_PYTHON")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	recs := make([]arrow.RecordBatch, iceBatches)
	for i := range recs {
		recs[i] = flightsrc.GenerateOrders(mem, int64(i*iceBatchRows), int64((i+1)*iceBatchRows))
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	dir := b.TempDir()
	in := filepath.Join(dir, "in.arrow")
	writeIPCFile(b, in, recs)
	ctx := context.Background()
	sink, err := icesink.New(ctx, icesink.Config{Warehouse: filepath.Join(dir, "flightline")}, icesink.Allocator(mem))
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	rows := float64(iceBatches * iceBatchRows)
	op := 0
	flightline := func(b *testing.B) {
		var cpu, wall float64
		for b.Loop() {
			op++
			c0, w0 := cpuSeconds(), time.Now()
			w, _, err := sink.Open(ctx, flightsink.Pipeline{ID: "bench", Target: fmt.Sprintf("t%d", op)})
			if err != nil {
				b.Fatal(err)
			}
			for i, rec := range recs {
				if err := w.WriteBatch(ctx, rec, checkpoint.Positions{"orders/0": int64((i + 1) * iceBatchRows)}.Encode()); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			cpu += cpuSeconds() - c0
			wall += time.Since(w0).Seconds()
		}
		n := rows * float64(b.N)
		b.ReportMetric(n/cpu, "rows/cpu-s")
		b.ReportMetric(n/wall, "rows/s")
		measured(b, n/cpu, map[string]float64{"rows/s": n / wall})
	}
	round := 0
	pyiceberg := func(b *testing.B) {
		if py == "" {
			b.Skip("FLIGHTLINE_PYICEBERG_PYTHON is not set (integration/services/services.sh up iceberg)")
		}
		var n, cpu, wall float64
		for b.Loop() {
			round++
			out, err := exec.Command(py, "iceberg_pyiceberg.py", in, filepath.Join(dir, fmt.Sprintf("py%d", round)), "1").CombinedOutput()
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			var r, c, w float64
			if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &r, &c, &w); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			n, cpu, wall = n+r, cpu+c, wall+w
		}
		b.ReportMetric(n/cpu, "rows/cpu-s")
		b.ReportMetric(n/wall, "rows/s")
		measured(b, n/cpu, map[string]float64{"rows/s": n / wall})
	}
	interleave(b, comparison{unit: "rows/cpu-s", external: []string{"pyiceberg"}},
		side{"flightline", flightline}, side{"pyiceberg", pyiceberg})
}

func writeIPCFile(b *testing.B, path string, recs []arrow.RecordBatch) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(recs[0].Schema()))
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
