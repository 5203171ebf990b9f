package delta_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	delta "github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/flightsrc/srctest"
)

// The Delta source on local tables written by the Delta sink: each Append
// commits its records in versions of up to 9 rows (several files, several
// versions, a Delta checkpoint every 4 versions), so reads cross snapshot
// files, commits and batches inside files. Run once per mode: Once
// (bounded) and tail (unbounded).
func TestDeltaConformance(t *testing.T) {
	for _, once := range []bool{true, false} {
		t.Run(fmt.Sprintf("once=%v", once), func(t *testing.T) {
			var (
				mu   sync.Mutex
				dirs = map[string]string{}
			)
			dir := func(stream string) string {
				mu.Lock()
				defer mu.Unlock()
				return dirs[stream]
			}
			srctest.Run(t, srctest.Harness{
				NewStream: func(t *testing.T) string {
					d := filepath.Join(t.TempDir(), "orders")
					mu.Lock()
					defer mu.Unlock()
					name := fmt.Sprintf("orders%d", len(dirs))
					dirs[name] = d
					return name
				},
				Append: func(t *testing.T, stream string, from, to int64) {
					ctx := context.Background()
					s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: dir(stream), CheckpointInterval: 4})
					require.NoError(t, err)
					w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "fill"})
					require.NoError(t, err)
					for i := from; i < to; i += 9 {
						end := min(i+9, to)
						rec := flightsrc.GenerateOrders(memory.DefaultAllocator, i, end)
						err := w.WriteBatch(ctx, rec, checkpoint.Positions{"fill/0": end}.Encode())
						rec.Release()
						require.NoError(t, err)
					}
					require.NoError(t, w.Close(ctx))
				},
				NewSource: func(t *testing.T, mem memory.Allocator, stream string) flightsrc.Source {
					s, err := delta.New(context.Background(), delta.Config{URI: dir(stream), Stream: stream, Once: once,
						BatchRows: 4, PollInterval: 20 * time.Millisecond}, delta.Allocator(mem))
					require.NoError(t, err)
					return s
				},
				Records: func(t *testing.T, _ string, rec arrow.RecordBatch) []srctest.Record {
					col := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
					out := make([]srctest.Record, rec.NumRows())
					for i := range out {
						out[i].ID = col.Value(i)
					}
					return out
				},
				Bounded:                 once,
				DeterministicBoundaries: true,
			})
		})
	}
}
