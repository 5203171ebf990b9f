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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/postgres"
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
			src, err := postgrescdc.New(context.Background(), postgrescdc.Config{DSN: dsn, Table: table, Slot: table, Publication: table,
				BatchRows: 100_000}, postgrescdc.Allocator(mem))
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

// BenchmarkPostgresCDCStream measures the streaming path end to end, in one
// process: the source reading the slot, the PostgreSQL sink in upsert mode
// committing each batch with its checkpoint, then the advisory commit to
// the source (what the coordinator does, without Flight between them).
//
//   - changes/s: 100,000 updates committed on the source in transactions
//     of 1,000 rows before the clock starts, drained until the sink holds
//     the last one;
//   - latency: then 2,000 single-row transactions paced at 200/s (with
//     synchronous_commit on; the test cluster's default is off); for each,
//     the time from its commit on the source (_commit_time) to the return
//     of the sink's commit of its batch; p50 and p99.
func BenchmarkPostgresCDCStream(b *testing.B) {
	dsn := pgDSN(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var wal string
	if err := conn.QueryRow(ctx, `SHOW wal_level`).Scan(&wal); err != nil || wal != "logical" {
		b.Skipf("wal_level is %q, not logical (%v)", wal, err)
	}
	exec := func(sql string, args ...any) {
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	const keys = 10_000
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		table := fmt.Sprintf("bench_cdcs_%d_%d", time.Now().UnixNano()%1e9, i)
		exec(`CREATE TABLE ` + table + ` (id bigint PRIMARY KEY, v text NOT NULL, n bigint NOT NULL)`)
		exec(`INSERT INTO ` + table + ` SELECT i, 'v', 0 FROM generate_series(0, ` + fmt.Sprint(keys-1) + `) i`)
		mem := memory.NewGoAllocator()
		src, err := postgrescdc.New(context.Background(), postgrescdc.Config{DSN: dsn, Table: table, Slot: table, Publication: table,
			BatchRows: 10_000, PollInterval: 50 * time.Millisecond}, postgrescdc.Allocator(mem))
		if err != nil {
			b.Fatal(err)
		}
		sink, err := postgres.New(context.Background(), postgres.Config{DSN: dsn, Mode: postgres.ModeUpsert, Key: []string{"id"}, Table: table + "_copy", MaxConns: 2})
		if err != nil {
			b.Fatal(err)
		}
		w, _, err := sink.Open(ctx, flightsink.Pipeline{ID: table})
		if err != nil {
			b.Fatal(err)
		}
		rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: table})
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		// pump moves batches until the sink holds a row with n >= until.
		pump := func(until int64, measure bool) {
			for {
				rec, cp, err := rd.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.WriteBatch(ctx, rec, cp); err != nil {
					b.Fatal(err)
				}
				done := time.Now()
				if err := src.Commit(ctx, flightsrc.CommitRequest{Stream: table, Checkpoint: cp}); err != nil {
					b.Fatal(err)
				}
				sc := rec.Schema()
				nIdx, tIdx := sc.FieldIndices("n")[0], sc.FieldIndices("_commit_time")[0]
				reached := false
				for r := range int(rec.NumRows()) {
					n := rec.Column(nIdx).(*array.Int64)
					ts := rec.Column(tIdx).(*array.Timestamp)
					if measure && ts.IsValid(r) {
						lat = append(lat, done.Sub(time.UnixMicro(int64(ts.Value(r)))))
					}
					if n.IsValid(r) && n.Value(r) >= until {
						reached = true
					}
				}
				rec.Release()
				if reached {
					return
				}
			}
		}
		pump(-1, false) // the snapshot
		// Throughput: 100 transactions of 1,000 updates, then drain.
		for t := int64(1); t <= 100; t++ {
			exec(`UPDATE `+table+` SET n = $1::bigint, v = 'u' || $1::bigint WHERE id >= $2::bigint AND id < $2::bigint + 1000`, t, (t*1000)%keys)
		}
		b.StartTimer()
		start := time.Now()
		pump(100, false)
		b.ReportMetric(100_000/time.Since(start).Seconds(), "changes/s")
		b.StopTimer()
		// Latency: paced single-row transactions. The test cluster runs with
		// synchronous_commit=off, whose commits reach the WAL (and so the
		// walsender) only at the WAL writer's next round (up to 200 ms
		// later): this session commits synchronously, as production would.
		exec(`SET synchronous_commit = on`)
		go func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for t := int64(101); t <= 2100; t++ {
				<-tick.C
				if _, err := conn.Exec(ctx, `UPDATE `+table+` SET n = $1 WHERE id = $2`, t, t%keys); err != nil {
					return
				}
			}
		}()
		pump(2100, true)
		slices.Sort(lat)
		if len(lat) > 0 {
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		}
		_ = rd.Close()
		_ = w.Close(ctx)
		sink.Close()
		for range 100 {
			if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, table); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		exec(`DROP PUBLICATION IF EXISTS ` + table)
		exec(`DROP TABLE ` + table)
		exec(`DROP TABLE IF EXISTS ` + table + `_copy`)
		exec(`DELETE FROM __flightline_checkpoints WHERE pipeline_id = $1`, table)
		b.StartTimer()
	}
}
