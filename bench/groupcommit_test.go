// Group commit (flightsink.GroupWriter) next to one commit per batch, for
// the Dir, PostgreSQL, Kafka and Delta sinks, at 1k-, 10k- and 100k-row
// batches. Each measurement writes the same batches to a fresh target
// through flightsink.PipelinedGroup (the coordinator's in-process path)
// with window in flight; rounds alternate the two modes and the table gives
// medians. Figures and the command in docs/design.md ("Group commit").

package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
	"github.com/flightline/flightline/flightsink/postgres"
)

var gcSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "value", Type: arrow.BinaryTypes.Binary},
}, nil)

// gcBatch builds rows rows: an id, a 16-byte name and a 64-byte value.
func gcBatch(mem memory.Allocator, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, gcSchema)
	defer b.Release()
	v := make([]byte, 64)
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%011d", i))
		copy(v, fmt.Sprintf("value-%d", i))
		b.Field(2).(*array.BinaryBuilder).Append(v)
	}
	return b.NewRecordBatch()
}

func gcEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// countingWriter counts commits: WriteBatch calls and WriteBatches calls.
type countingWriter struct {
	flightsink.GroupWriter
	commits atomic.Int64
}

func (c *countingWriter) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	c.commits.Add(1)
	return c.GroupWriter.WriteBatch(ctx, rec, cp)
}

// MaxGroupRows passes the sink's row bound on (flightsink.GroupRowBounder).
func (c *countingWriter) MaxGroupRows() int64 {
	if b, ok := c.GroupWriter.(flightsink.GroupRowBounder); ok {
		return b.MaxGroupRows()
	}
	return 0
}

func (c *countingWriter) WriteBatches(ctx context.Context, b []flightsink.Batch) error {
	c.commits.Add(1)
	return c.GroupWriter.WriteBatches(ctx, b)
}

// TestGroupCommitEffect measures rows/s with and without group commit. It
// runs only with FLIGHTLINE_BENCH_GROUP=1 (and the services the sinks
// need; a sink whose service is missing is left out of the table, or
// fails the test under FLIGHTLINE_REQUIRE_SERVICES=1).
// FLIGHTLINE_BENCH_GROUP_ROUNDS (default 3), _WINDOW (default 4, the
// coordinator's), _SCALE (default 2: 200 1k-row, 40 10k-row and 8
// 100k-row batches a measurement) and _SINKS (default
// dir,postgres,kafka,delta) tune it. Besides wall-clock rows/s it reports
// rows per CPU second of the test process (the sink's client side; for
// Dir and Delta on a local directory, all of the work), which a loaded
// machine disturbs less.
func TestGroupCommitEffect(t *testing.T) {
	if os.Getenv("FLIGHTLINE_BENCH_GROUP") != "1" {
		t.Skip("set FLIGHTLINE_BENCH_GROUP=1 to measure group commit")
	}
	rounds := gcEnv("FLIGHTLINE_BENCH_GROUP_ROUNDS", 3)
	window := gcEnv("FLIGHTLINE_BENCH_GROUP_WINDOW", 4)
	sinks := strings.Split(os.Getenv("FLIGHTLINE_BENCH_GROUP_SINKS"), ",")
	if sinks[0] == "" {
		sinks = []string{"dir", "postgres", "kafka", "delta"}
	}
	scale := gcEnv("FLIGHTLINE_BENCH_GROUP_SCALE", 2)
	sizes := []struct{ rows, batches int }{{1_000, 100 * scale}, {10_000, 20 * scale}, {100_000, 4 * scale}}
	ctx := context.Background()
	mem := memory.NewGoAllocator()

	type key struct {
		sink    string
		rows    int
		grouped bool
	}
	rate := map[key][]float64{}
	cpu := map[key][]float64{} // rows per CPU second of this process
	commits := map[key][]int64{}
	for _, kind := range sinks {
		mk, ok := gcSinks(t, kind)
		if !ok {
			continue
		}
		for _, sz := range sizes {
			rec := gcBatch(mem, sz.rows)
			for r := range rounds {
				// Alternate which mode goes first, round by round.
				modes := []bool{false, true}
				if r%2 == 1 {
					modes = []bool{true, false}
				}
				for _, grouped := range modes {
					c0 := gcCPU()
					rs, n := gcRun(t, ctx, mk, rec, sz.batches, window, grouped)
					k := key{kind, sz.rows, grouped}
					rate[k] = append(rate[k], rs)
					cpu[k] = append(cpu[k], float64(sz.rows*sz.batches)/(gcCPU()-c0).Seconds())
					commits[k] = append(commits[k], n)
				}
			}
			rec.Release()
		}
	}
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	var out strings.Builder
	fmt.Fprintf(&out, "window %d, %d rounds, medians\n\n", window, rounds)
	fmt.Fprintf(&out, "| sink | rows/batch | batches | one commit per batch, rows/s | group commit, rows/s | ratio | rows per CPU s, one / group | commits (grouped) | rounds, k rows/s (one / group) |\n|---|---:|---:|---:|---:|---:|---|---:|---|\n")
	for _, kind := range sinks {
		for _, sz := range sizes {
			off, on := rate[key{kind, sz.rows, false}], rate[key{kind, sz.rows, true}]
			if len(off) == 0 {
				continue
			}
			var rs []string
			for i := range off {
				rs = append(rs, fmt.Sprintf("%.0f/%.0f", off[i]/1e3, on[i]/1e3))
			}
			coff, con := cpu[key{kind, sz.rows, false}], cpu[key{kind, sz.rows, true}]
			fmt.Fprintf(&out, "| %s | %d | %d | %.0f | %.0f | %.2f× | %.0fk / %.0fk (%.2f×) | %v | %s |\n", kind, sz.rows, sz.batches, med(off), med(on), med(on)/med(off),
				med(coff)/1e3, med(con)/1e3, med(con)/med(coff), commits[key{kind, sz.rows, true}], strings.Join(rs, " "))
		}
	}
	t.Log("\n" + out.String())

	// What the table's ratios rest on: something was measured, and group
	// commit grouped (fewer commits than one per batch, in every round).
	require.NotEmpty(t, commits, "no sink was measured: every one's service is missing")
	for k, grouped := range commits {
		if !k.grouped {
			continue
		}
		one := commits[key{k.sink, k.rows, false}]
		for i := range grouped {
			require.Less(t, grouped[i], one[i], "%s, %d rows a batch, round %d: group commit made no fewer commits than one per batch", k.sink, k.rows, i)
		}
	}
}

// gcCPU is the CPU time (user and system) this process has used.
func gcCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcSinks returns a maker of fresh (sink, pipeline) pairs for kind, or
// false when its service is not set up.
func gcSinks(t *testing.T, kind string) (func() (flightsink.Sink, flightsink.Pipeline, func()), bool) {
	n := 0
	name := func() string {
		n++
		return fmt.Sprintf("gc_%s_%d_%d", kind, time.Now().UnixNano()%1e9, n)
	}
	switch kind {
	case "dir":
		root := t.TempDir()
		return func() (flightsink.Sink, flightsink.Pipeline, func()) {
			d, err := flightsink.NewDir(root, nil)
			require.NoError(t, err)
			nm := name()
			return d, flightsink.Pipeline{ID: nm, Target: nm}, func() {}
		}, true
	case "postgres":
		dsn := os.Getenv("FLIGHTLINE_PG_DSN")
		if dsn == "" {
			peerMissing(t, "postgres: FLIGHTLINE_PG_DSN unset")
			return nil, false
		}
		return func() (flightsink.Sink, flightsink.Pipeline, func()) {
			s, err := postgres.New(context.Background(), postgres.Config{DSN: dsn, MaxConns: 2})
			require.NoError(t, err)
			nm := name()
			return s, flightsink.Pipeline{ID: nm, Target: nm}, func() { s.Close() }
		}, true
	case "kafka":
		v := os.Getenv("FLIGHTLINE_KAFKA_BROKERS")
		if v == "" {
			peerMissing(t, "kafka: FLIGHTLINE_KAFKA_BROKERS unset")
			return nil, false
		}
		return func() (flightsink.Sink, flightsink.Pipeline, func()) {
			nm := name()
			s, err := kafkasink.New(context.Background(), kafkasink.Config{Brokers: strings.Split(v, ","), Topic: nm, CreateTopics: 3, CreateReplicationFactor: 1})
			require.NoError(t, err)
			return s, flightsink.Pipeline{ID: nm}, func() { s.Close() }
		}, true
	case "delta":
		root := t.TempDir()
		return func() (flightsink.Sink, flightsink.Pipeline, func()) {
			s, err := sinkdelta.New(context.Background(), sinkdelta.Config{URI: root})
			require.NoError(t, err)
			nm := name()
			return s, flightsink.Pipeline{ID: nm, Target: nm}, func() {}
		}, true
	}
	t.Fatalf("unknown sink %q", kind)
	return nil, false
}

// gcRun writes batches copies of rec to a fresh target through
// PipelinedGroup and returns rows/s (first Submit to last Ack) and the
// number of commits.
func gcRun(t *testing.T, ctx context.Context, mk func() (flightsink.Sink, flightsink.Pipeline, func()), rec arrow.RecordBatch, batches, window int, grouped bool) (float64, int64) {
	s, p, done := mk()
	defer done()
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	gw, ok := w.(flightsink.GroupWriter)
	require.True(t, ok, "%T is not a GroupWriter", w)
	cw := &countingWriter{GroupWriter: gw}
	lim := flightsink.GroupLimits{MaxBatches: 1}
	if grouped {
		lim = flightsink.GroupLimits{}
	}
	pw := flightsink.PipelinedGroup(cw, window, lim)
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		for i := range batches {
			cp := checkpoint.Positions{"gc/0": int64(i+1) * rec.NumRows()}.Encode()
			if err := pw.Submit(ctx, rec, cp); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range batches {
		_, err := pw.Ack(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, <-errc)
	el := time.Since(start)
	require.NoError(t, pw.Close(ctx))
	return float64(batches) * float64(rec.NumRows()) / el.Seconds(), cw.commits.Load()
}
