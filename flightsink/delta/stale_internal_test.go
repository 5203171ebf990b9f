package delta

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
)

// A writer idle for longer than staleAfter reads _last_checkpoint before
// it commits: a checkpoint past its snapshot (others committed meanwhile,
// and a cleanup may have deleted the commits after its version) makes it
// re-open instead of committing behind the log.
func TestStaleWriterReopens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := New(ctx, Config{URI: dir, Instance: "a", CheckpointInterval: 2, Compaction: "off"})
	require.NoError(t, err)
	b, err := New(ctx, Config{URI: dir, Instance: "b", CheckpointInterval: 2, Compaction: "off"})
	require.NoError(t, err)
	write := func(w flightsink.Writer, key string, from int64) error {
		rec := sinktest.Batch(memory.DefaultAllocator, from, from+1)
		defer rec.Release()
		return w.WriteBatch(ctx, rec, checkpoint.Positions{key: from}.Encode())
	}
	wa, _, err := a.Open(ctx, flightsink.Pipeline{ID: "p", Target: ""})
	require.NoError(t, err)
	require.NoError(t, write(wa, "x", 1))
	wb, _, err := b.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	for i := range int64(4) {
		require.NoError(t, write(wb, "y", i+1))
	}
	w := wa.(*writer)
	w.synced = time.Now().Add(-2 * staleAfter)
	err = write(wa, "x", 2)
	require.ErrorIs(t, err, flightline.ErrConflict)
	require.Contains(t, err.Error(), "re-open")
	// Recently synced, the same writer would have caught up by the log.
	w.synced = time.Now()
	require.NoError(t, write(wa, "x", 3))
	require.NoError(t, wa.Close(ctx))
	require.NoError(t, wb.Close(ctx))
}
