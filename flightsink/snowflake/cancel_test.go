package snowflake_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/flightsink/snowflake"
	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// A WriteBatch whose context is cancelled inside its transaction (a DoPut
// whose coordinator died), after the checkpoint's UPDATE and before COMMIT,
// must not leave that transaction open in a session the sink reuses: the
// next writer of the pipeline, in the same sink, claims it and commits its
// batch at once, and the cancelled batch is not committed.
//
// Before the fix the transaction stayed open: database/sql rolls back a
// transaction whose context is cancelled, but gosnowflake sends that
// ROLLBACK with the cancelled context, so it never left the process, and the
// session went back to the pool (or was closed without a rollback on the
// emulator). The next claim then failed on the dead transaction's write of
// the checkpoint row until the emulator's idle-session rollback (20 s) or,
// on Snowflake, the lock timeout. The bound (15 s) is below that rollback,
// and far above a claim and a write on a loaded machine (about a second).
func TestIntegrationCancelledWriteReleasesItsTransaction(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := snowtest.Name("cancelled")
	p := flightsink.Pipeline{ID: table, Target: table}
	s := newSink(t, retryFor(time.Second))
	bg := context.Background()

	w1, _, err := s.Open(bg, p)
	require.NoError(t, err)
	first := sinktest.Batch(mem, 0, 5)
	defer first.Release()
	require.NoError(t, w1.WriteBatch(bg, first, sinktest.CP(5)))

	ctx, cancel := context.WithCancel(bg)
	restore := snowflake.SetBeforeCommitHook(cancel)
	second := sinktest.Batch(mem, 5, 10)
	defer second.Release()
	err = w1.WriteBatch(ctx, second, sinktest.CP(10))
	restore()
	require.ErrorIs(t, err, context.Canceled)

	// The next writer: the coordinator restarted, same sink process.
	bounded, stop := context.WithTimeout(bg, 15*time.Second)
	defer stop()
	t0 := time.Now()
	w2, cp, err := s.Open(bounded, p)
	require.NoError(t, err, "claim after a cancelled write (%v)", time.Since(t0))
	require.Equal(t, string(sinktest.CP(5)), string(cp), "the cancelled batch was committed")
	require.NoError(t, w2.WriteBatch(bounded, second, sinktest.CP(10)), "write after a cancelled write (%v)", time.Since(t0))
	t.Logf("claimed and wrote %v after the cancelled write", time.Since(t0).Round(time.Millisecond))
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, snowtest.IDs(t, table))
}
