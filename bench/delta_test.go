// Delta Lake benchmarks: the Parquet writer with Flightline's settings
// against pqarrow's defaults on the same data in the same run, and
// generator → Delta sink throughput on local disk. Figures and the command
// in bench/delta.md.

package bench

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/parquetw"
)

const deltaBatchRows = 100_000

func arrowBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n
}

func report(b *testing.B, rows, bytes int64, start time.Time) {
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(rows)/el, "rows/s")
	b.ReportMetric(float64(bytes)/el/1e6, "MB/s")
}

// BenchmarkParquetWrite encodes one 100k-row generator batch (orders: id,
// customer with 10k distinct values, amount, quantity, ts) per operation.
func BenchmarkParquetWrite(b *testing.B) {
	mem := memory.NewGoAllocator()
	rec := flightsrc.GenerateOrders(mem, 0, deltaBatchRows)
	defer rec.Release()
	in := arrowBytes(rec)
	run := func(b *testing.B, write func(*bytes.Buffer) error) {
		var buf bytes.Buffer
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			buf.Reset()
			if err := write(&buf); err != nil {
				b.Fatal(err)
			}
		}
		report(b, int64(b.N)*rec.NumRows(), int64(b.N)*in, start)
		b.ReportMetric(float64(buf.Len()), "file-bytes")
	}
	side0 := side{"flightline", func(b *testing.B) {
		run(b, func(w *bytes.Buffer) error { _, err := parquetw.Write(w, rec, parquetw.Allocator(mem)); return err })
	}}
	serial := side{"flightline-serial", func(b *testing.B) {
		// The same settings, one column after another (no parallel encoding).
		run(b, func(w *bytes.Buffer) error {
			_, err := parquetw.Write(w, rec, parquetw.Allocator(mem), parquetw.Parallelism(1))
			return err
		})
	}}
	side1 := side{"pqarrow-defaults-snappy", func(b *testing.B) {
		// pqarrow's defaults (dictionary on every column) with the same codec.
		props := parquet.NewWriterProperties(parquet.WithAllocator(mem), parquet.WithCompression(compress.Codecs.Snappy))
		run(b, func(w *bytes.Buffer) error {
			return pqarrow.WriteTable(arrowTable(rec), w, deltaBatchRows, props, pqarrow.DefaultWriterProps())
		})
	}}
	side2 := side{"pqarrow-defaults", func(b *testing.B) {
		run(b, func(w *bytes.Buffer) error {
			return pqarrow.WriteTable(arrowTable(rec), w, deltaBatchRows, nil, pqarrow.DefaultWriterProps())
		})
	}}
	interleave(b, comparison{unit: "MB/s", perOp: float64(in) / 1e6, ratios: []pair{{"flightline", "pqarrow-defaults-snappy"},
		{"flightline-serial", "pqarrow-defaults-snappy"}, {"flightline", "flightline-serial"}, {"flightline", "pqarrow-defaults"}}},
		side0, serial, side1, side2)
}

func arrowTable(rec arrow.RecordBatch) arrow.Table {
	return arrowTableFromRecords(rec)
}

// BenchmarkDeltaSink commits 10 generator batches of 100k rows per
// operation to a local Delta table, one Delta commit per batch.
func BenchmarkDeltaSink(b *testing.B) {
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	const batches = 10
	recs := make([]arrow.RecordBatch, batches)
	var in int64
	for i := range recs {
		recs[i] = flightsrc.GenerateOrders(mem, int64(i*deltaBatchRows), int64(i*deltaBatchRows+deltaBatchRows))
		in += arrowBytes(recs[i])
		defer recs[i].Release()
	}
	dir := b.TempDir()
	s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: dir}, sinkdelta.Allocator(mem))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for op := range b.N {
		w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "bench", Target: fmt.Sprintf("t%d", op)})
		if err != nil {
			b.Fatal(err)
		}
		for i, rec := range recs {
			cp := checkpoint.Positions{"orders/0": int64((i + 1) * deltaBatchRows)}.Encode()
			if err := w.WriteBatch(ctx, rec, cp); err != nil {
				b.Fatal(err)
			}
		}
		_ = w.Close(ctx)
	}
	report(b, int64(b.N)*batches*deltaBatchRows, int64(b.N)*in, start)
}

func arrowTableFromRecords(recs ...arrow.RecordBatch) arrow.Table {
	return array.NewTableFromRecords(recs[0].Schema(), recs)
}
