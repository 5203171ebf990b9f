//go:build cgo

// The ADBC sink into PostgreSQL next to the project's pgx PostgreSQL sink
// and raw ADBC ingest, in one run with the rounds interleaved; figures and
// the command in bench/adbc.md.

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	adbcsink "github.com/flightline/flightline/flightsink/adbc"
	"github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// BenchmarkADBCPostgres writes the rows of BenchmarkPostgres (pgRows in
// batches of pgBatchRows) FLIGHTLINE_BENCH_ROUNDS times (default 3) with
// each of three writers, rotating their order every round, each time into a
// fresh identical table:
//
//   - adbc_sink: flightsink/adbc with the ADBC PostgreSQL driver (one
//     transaction per batch: lock, COPY by bulk ingest, checkpoint);
//   - pgx_sink: flightsink/postgres (the same per batch, COPY by pgx);
//   - raw_ingest: ADBC bulk ingest alone, each batch in autocommit, no
//     checkpoint.
//
// The writers are the sides of interleave (interleave_test.go), which
// reports each one's median rows/s and the ratios adbc/pgx and adbc/raw.
// Run it with -benchtime=1x.
func BenchmarkADBCPostgres(b *testing.B) {
	dsn := pgDSN(b)
	drv := servicetest.Need(b, "FLIGHTLINE_ADBC_POSTGRESQL_DRIVER", "ADBC PostgreSQL driver")
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
	var tables []string
	defer func() {
		for _, t := range tables {
			exec("DROP TABLE IF EXISTS " + t)
		}
	}()
	fresh := func(name string) {
		tbl := pgx.Identifier{name}.Sanitize()
		exec("DROP TABLE IF EXISTS " + tbl)
		exec("CREATE TABLE " + tbl + " " + pgDDL + " WITH (autovacuum_enabled = false)")
		exec("CHECKPOINT")
		tables = append(tables, tbl)
	}
	cfg := fadbc.Config{Driver: drv, URI: dsn}
	asink, err := adbcsink.New(ctx, adbcsink.Config{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer asink.Close()
	psink, err := postgres.New(context.Background(), postgres.Config{DSN: dsn, MaxConns: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer psink.Close()
	db, err := fadbc.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()

	viaSink := func(s flightsink.Sink, name string) {
		w, _, err := s.Open(ctx, flightsink.Pipeline{ID: name, Target: name})
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
	writers := []struct {
		name  string
		write func(table string)
	}{
		{"adbc_sink", func(t string) { viaSink(asink, t) }},
		{"pgx_sink", func(t string) { viaSink(psink, t) }},
		{"raw_ingest", func(t string) {
			c, err := db.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for _, r := range batches {
				if _, err := c.Ingest(ctx, fadbc.Table{Name: t}, r, false); err != nil {
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
				name := fmt.Sprintf("bench_adbc_%s_%d_%d", w.name, stamp, op)
				b.StopTimer()
				fresh(name)
				b.StartTimer()
				w.write(name)
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		}})
	}
	interleave(b, comparison{wallOnly: true, unit: "rows/s", perOp: float64(rows), ratios: []pair{
		{"adbc_sink", "pgx_sink"}, {"adbc_sink", "raw_ingest"}, {"pgx_sink", "raw_ingest"},
	}}, sides...)
}
