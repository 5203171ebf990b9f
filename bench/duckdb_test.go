//go:build cgo

// The DuckDB sink next to DuckDB's own Arrow ingestion of the same batches,
// in one run with the rounds interleaved; figures in bench/duckdb.md.

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/duckdb"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// BenchmarkDuckDB writes the rows of BenchmarkPostgres (pgRows in batches
// of pgBatchRows) FLIGHTLINE_BENCH_ROUNDS times (default 3) into one DuckDB
// file, each time into a new table, with each of two writers, their order
// rotated every round:
//
//   - duckdb_sink: flightsink/duckdb (per batch: one transaction with the
//     checkpoint read, the Arrow bulk ingest and the checkpoint
//     compare-and-set);
//   - raw_ingest: DuckDB's ADBC Arrow bulk ingest of the same batches on
//     the same database, each batch in autocommit, no checkpoint.
//
// interleave reports each one's median rows/s and the ratio sink/raw.
// Run it with -benchtime=1x.
func BenchmarkDuckDB(b *testing.B) {
	lib := servicetest.Need(b, "FLIGHTLINE_DUCKDB_LIB", "DuckDB library")
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	rows := pgRows()
	batches := pgBatches(mem, rows)
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	path := filepath.Join(b.TempDir(), "bench.duckdb")
	sink, err := duckdb.New(ctx, duckdb.Config{Path: path, Library: lib})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	db, err := duckdb.Open(ctx, path, lib)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()

	writers := []struct {
		name  string
		write func(table string)
	}{
		{"duckdb_sink", func(t string) {
			w, _, err := sink.Open(ctx, flightsink.Pipeline{ID: t, Target: t})
			if err != nil {
				b.Fatal(err)
			}
			next := int64(0)
			for _, r := range batches {
				next += r.NumRows()
				if err := w.WriteBatch(ctx, r, checkpoint.Positions{"bench/0": next}.Encode()); err != nil {
					b.Fatal(err)
				}
			}
			_ = w.Close(ctx)
		}},
		{"raw_ingest", func(t string) {
			c, unlock, err := db.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer unlock()
			defer c.Close()
			for i, r := range batches {
				if _, err := c.Ingest(ctx, fadbc.Table{Name: t}, r, i == 0); err != nil {
					b.Fatal(err)
				}
			}
		}},
	}
	stamp := time.Now().UnixNano()
	var sides []side
	op := 0
	for _, w := range writers {
		sides = append(sides, side{name: w.name, run: func(b *testing.B) {
			for b.Loop() {
				op++
				w.write(fmt.Sprintf("bench_%s_%d_%d", w.name, stamp, op))
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		}})
	}
	interleave(b, comparison{wallOnly: true, unit: "rows/s", perOp: float64(rows), ratios: []pair{
		{"duckdb_sink", "raw_ingest"},
	}}, sides...)
}
