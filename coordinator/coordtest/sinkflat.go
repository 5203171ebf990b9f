// Package coordtest is the kit of checks that run a whole pipeline through
// the coordinator: a sink's heap stays flat over a long stream (SinkFlat).
package coordtest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/testkit/heaptest"
	"github.com/flightline/flightline/transform"
)

// SinkFlat runs a generator stream of rows rows, in batches of batchRows,
// through the coordinator (window 4) into pipeline p of sink, and checks
// that the live heap after a collection at every tenth of the stream stays
// within bound of its value at the first tenth. The generator allocates
// from a checked allocator that must end at zero bytes. The stream should
// be many times longer than what the sink and the window hold. shape, if
// not nil, rewrites each generator batch for a sink that needs other
// columns; it follows transform.Func's ownership rules.
func SinkFlat(t *testing.T, sink flightsink.Sink, p flightsink.Pipeline, rows int64, batchRows int, bound uint64, shape transform.Func) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(rows), flightsrc.GenBatchRows(batchRows), flightsrc.GenAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	g := heaptest.New(t, bound)
	var seen int64
	next := int64(1)
	// The transform runs on the coordinator's reading goroutine, between
	// source and sink: a sample sees the window's batches in flight, which
	// is what the pipeline holds at any time.
	sample := func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		seen += rec.NumRows()
		if seen >= next*rows/10 {
			g.Sample(fmt.Sprintf("%d%%", 100*seen/rows))
			next = 10*seen/rows + 1
		}
		if shape != nil {
			return shape(ctx, rec)
		}
		rec.Retain()
		return rec, nil
	}
	c, err := coordinator.New(gen, sink, "orders", p, coordinator.WithTransform(sample), coordinator.Window(4),
		coordinator.WithLogger(slog.New(slog.DiscardHandler)), coordinator.Backoff(10*time.Millisecond, 100*time.Millisecond),
		coordinator.MaxAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Rows != rows {
		t.Fatalf("the sink acknowledged %d rows of %d", st.Rows, rows)
	}
	g.Check()
}
