// The postgres-cdc source's initial snapshot against real PostgreSQL, beside
// the ceiling of a plain binary COPY of the same table to nowhere; figures
// and the command in bench/postgrescdc.md.

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgrescdc"
)

// cdcRows is the table's size: FLIGHTLINE_BENCH_CDC_ROWS, default 500,000.
func cdcRows() int {
	if v := os.Getenv("FLIGHTLINE_BENCH_CDC_ROWS"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return 500_000
}

// countWriter counts the bytes written to it.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkPostgresCDCSnapshot reads one table two ways: the source's
// initial snapshot (a fresh slot exporting its snapshot, then pages of
// 100,000 rows in key order decoded into Arrow), and COPY … TO STDOUT
// (FORMAT binary) of the same table, discarded.
func BenchmarkPostgresCDCSnapshot(b *testing.B) {
	dsn := pgDSN(b)
	ctx := context.Background()
	rows := cdcRows()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var wal string
	if err := conn.QueryRow(ctx, `SHOW wal_level`).Scan(&wal); err != nil || wal != "logical" {
		b.Skipf("wal_level is %q, not logical (%v)", wal, err)
	}
	table := fmt.Sprintf("bench_cdc_%d", time.Now().UnixNano()%1e9)
	exec := func(sql string, args ...any) {
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	exec(`CREATE TABLE ` + table + ` (id bigint PRIMARY KEY, x double precision NOT NULL, s text NOT NULL, ts timestamptz NOT NULL)`)
	exec(`INSERT INTO `+table+` SELECT i, i * 1.25, 'customer-' || lpad(i::text, 11, '0'), '2026-01-01'::timestamptz + i * interval '1 ms'
		FROM generate_series(0, $1::bigint - 1) i`, rows)
	exec(`VACUUM ANALYZE ` + table)
	dropSlot := func() {
		for range 100 {
			if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, table); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	defer func() {
		dropSlot()
		exec(`DROP PUBLICATION IF EXISTS ` + table)
		exec(`DROP TABLE ` + table)
	}()
	var cw countWriter
	if _, err := conn.PgConn().CopyTo(ctx, &cw, `COPY `+table+` TO STDOUT (FORMAT binary)`); err != nil {
		b.Fatal(err)
	}

	ceiling := side{"ceiling_copy_to", func(b *testing.B) {
		for b.Loop() {
			if _, err := conn.PgConn().CopyTo(ctx, io.Discard, `COPY `+table+` TO STDOUT (FORMAT binary)`); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	}}
	source := side{"source_snapshot", func(b *testing.B) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(b, 0)
		for b.Loop() {
			b.StopTimer()
			dropSlot() // each op creates the slot and reads its snapshot
			src, err := postgrescdc.New(dsn, postgrescdc.Table(table), postgrescdc.Slot(table), postgrescdc.Publication(table),
				postgrescdc.BatchRows(100_000), postgrescdc.Allocator(mem))
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: table})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for {
				rec, cp, err := rd.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				n += int(rec.NumRows())
				rec.Release()
				if !strings.Contains(string(cp), `"snapshot"`) {
					break
				}
			}
			b.StopTimer()
			if err := rd.Close(); err != nil && !errors.Is(err, context.Canceled) {
				b.Fatal(err)
			}
			if n != rows {
				b.Fatalf("the snapshot read %d rows of %d", n, rows)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	}}
	interleave(b, comparison{wallOnly: true, unit: "MB/s", perOp: float64(cw.n) / 1e6, ratios: []pair{{"source_snapshot", "ceiling_copy_to"}}}, ceiling, source)
}
