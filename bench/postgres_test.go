// Throughput benchmarks of the PostgreSQL sink against real PostgreSQL;
// figures and the command in bench/postgres.md.

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/internal/pgarrow"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// Rows per benchmark operation, written as batches of pgBatchRows. The
// issue asks for 5M rows; 1M keeps one operation at a few seconds on the
// 2-core machines this runs on (override with FLIGHTLINE_BENCH_PG_ROWS).
const pgBatchRows = 100_000

func pgRows() int {
	if v := os.Getenv("FLIGHTLINE_BENCH_PG_ROWS"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return 1_000_000
}

var pgSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64},
	{Name: "s", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

const pgDDL = `(id bigint NOT NULL, x double precision NOT NULL, s text NOT NULL, ts timestamp with time zone NOT NULL)`

// pgBatches builds the benchmark rows: (bigint, double, 20-char text,
// timestamptz), in batches of pgBatchRows.
func pgBatches(mem memory.Allocator, rows int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for from := 0; from < rows; from += pgBatchRows {
		to := min(from+pgBatchRows, rows)
		b := array.NewRecordBuilder(mem, pgSchema)
		id := b.Field(0).(*array.Int64Builder)
		x := b.Field(1).(*array.Float64Builder)
		s := b.Field(2).(*array.StringBuilder)
		ts := b.Field(3).(*array.TimestampBuilder)
		for i := from; i < to; i++ {
			id.Append(int64(i))
			x.Append(float64(i) * 1.25)
			s.Append(fmt.Sprintf("customer-%011d", i)) // 20 characters
			ts.Append(arrow.Timestamp(base + int64(i)*1000))
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

func pgDSN(b *testing.B) string {
	return servicetest.Need(b, "FLIGHTLINE_PG_DSN", "PostgreSQL")
}

// BenchmarkPostgres runs the sink and the raw COPY ceiling side by side on
// the same rows; compare their rows/s (bench/postgres.md).
func BenchmarkPostgres(b *testing.B) {
	dsn := pgDSN(b)
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
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	// Every operation gets an identical empty table, created outside the
	// timer with autovacuum off (on 2 cores, an autovacuum of the previous
	// run's table would land in the next measurement), after a CHECKPOINT
	// that keeps one run's dirty pages out of the next one's time.
	var last string
	fresh := func(name string) string {
		if last != "" {
			exec("DROP TABLE IF EXISTS " + last)
		}
		tbl := pgx.Identifier{name}.Sanitize()
		exec("DROP TABLE IF EXISTS " + tbl)
		exec("CREATE TABLE " + tbl + " " + pgDDL + " WITH (autovacuum_enabled = false)")
		exec("CHECKPOINT")
		last = tbl
		return tbl
	}
	defer func() {
		if last != "" {
			exec("DROP TABLE IF EXISTS " + last)
		}
	}()

	// The ceiling: the same rows, encoded once ahead of time as one binary
	// COPY stream, sent by a plain COPY.
	var stream []byte
	stream = pgarrow.AppendCopyHeader(stream)
	for _, r := range batches {
		enc, err := pgarrow.NewRowEncoder(r, []uint32{pgarrow.OIDInt8, pgarrow.OIDFloat8, pgarrow.OIDText, pgarrow.OIDTimestamptz})
		if err != nil {
			b.Fatal(err)
		}
		for i := range enc.NumRows() {
			stream = enc.AppendRow(stream, i)
		}
	}
	stream = pgarrow.AppendCopyTrailer(stream)

	side0 := side{"ceiling_raw_copy", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			tbl := fresh(fmt.Sprintf("bench_pg_ceiling_%d", i))
			b.StartTimer()
			tag, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(stream), "COPY "+tbl+" (id, x, s, ts) FROM STDIN (FORMAT binary)")
			if err != nil || tag.RowsAffected() != int64(rows) {
				b.Fatalf("copy: %v (%d rows)", err, tag.RowsAffected())
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	}}

	side1 := side{"sink", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		sink, err := postgres.New(context.Background(), postgres.Config{DSN: dsn, MaxConns: 2})
		if err != nil {
			b.Fatal(err)
		}
		defer sink.Close()
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			name := fmt.Sprintf("bench_pg_sink_%d", i)
			fresh(name)
			p := flightsink.Pipeline{ID: name + fmt.Sprint(time.Now().UnixNano()), Target: name}
			b.StartTimer()
			w, _, err := sink.Open(ctx, p)
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
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	}}
	interleave(b, comparison{wallOnly: true, unit: "MB/s", perOp: float64(len(stream)) / 1e6, ratios: []pair{{"sink", "ceiling_raw_copy"}}}, side0, side1)
}
