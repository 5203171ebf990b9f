// Throughput of the Snowflake sink against the fakesnow emulator, with the
// split of WriteBatch time between Parquet encoding, PUT and COPY; figures
// and the command in bench/snowflake.md.

package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/snowflake"
	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// sfRows is the rows per operation (FLIGHTLINE_BENCH_SF_ROWS overrides):
// the emulator loads about 100k rows/s, so 400k keeps an operation at a
// few seconds.
func sfRows() int {
	if v := os.Getenv("FLIGHTLINE_BENCH_SF_ROWS"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return 400_000
}

// sfBatches builds rows of (id int64, x float64, s 20-char string, ts
// timestamp[us, UTC]) in batches of size rows.
func sfBatches(mem memory.Allocator, rows, size int) ([]arrow.RecordBatch, int64) {
	var out []arrow.RecordBatch
	var bytes int64
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for from := 0; from < rows; from += size {
		to := min(from+size, rows)
		b := array.NewRecordBuilder(mem, pgSchema)
		for i := from; i < to; i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Float64Builder).Append(float64(i) * 0.5)
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("customer-%011d", i))
			b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)))
		}
		rec := b.NewRecordBatch()
		b.Release()
		for _, c := range rec.Columns() {
			for _, buf := range c.Data().Buffers() {
				if buf != nil {
					bytes += int64(buf.Len())
				}
			}
		}
		out = append(out, rec)
	}
	return out, bytes
}

// BenchmarkSnowflakeSink writes sfRows rows per operation through the sink
// (Open once, then WriteBatch per batch: lock, Parquet, PUT, COPY,
// compare-and-set, COMMIT, REMOVE) into a fresh table, at 10k- and
// 100k-row batches. It reports rows/s, Arrow MB/s, and the seconds per
// operation spent encoding, in PUT, in COPY, and in the rest (lock, schema
// check, checkpoint, commit, removal).
func BenchmarkSnowflakeSink(b *testing.B) {
	cfg := snowtest.Config(b)
	for _, size := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			mem := memory.NewGoAllocator()
			rows := sfRows()
			batches, arrowBytes := sfBatches(mem, rows, size)
			defer func() {
				for _, r := range batches {
					r.Release()
				}
			}()
			s, err := snowflake.New(context.Background(), snowflake.Config{Config: cfg, Match: snowflake.MatchCaseInsensitive, Stage: snowtest.Stage})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var total time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				table := snowtest.Name("bench")
				w, _, err := s.Open(ctx, flightsink.Pipeline{ID: table, Target: table})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				next := int64(0)
				for _, rec := range batches {
					next += rec.NumRows()
					if err := w.WriteBatch(ctx, rec, checkpoint.Positions{"bench/0": next}.Encode()); err != nil {
						b.Fatal(err)
					}
				}
				total += time.Since(start)
			}
			b.StopTimer()
			tm := s.Timing()
			n := float64(b.N)
			secs := total.Seconds()
			b.ReportMetric(float64(rows)*n/secs, "rows/s")
			b.ReportMetric(float64(arrowBytes)*n/secs/1e6, "MB/s")
			b.ReportMetric(tm.Encode.Seconds()/n, "encode-s/op")
			b.ReportMetric(tm.Put.Seconds()/n, "put-s/op")
			b.ReportMetric(tm.Copy.Seconds()/n, "copy-s/op")
			b.ReportMetric((total-tm.Encode-tm.Put-tm.Copy).Seconds()/n, "other-s/op")
			b.ReportMetric(float64(tm.ParquetBytes)/n/1e6, "parquet-MB/op")
		})
	}
}
