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

// A statement of a batch's transaction that the writer abandoned (its
// context was cancelled: the DoPut of a coordinator that died) may still
// run at the server after the writer has given up on it. The writer must
// not end the transaction with a ROLLBACK on that session and reuse it:
// the ROLLBACK ends the transaction, and the abandoned COPY then runs in
// autocommit and commits the batch's rows without its checkpoint, so the
// batch, replayed from the checkpoint, is written twice. The session has
// to be closed instead (Snowflake rolls back the transaction of a closed
// session, and refuses statements that arrive for it afterwards).
//
// The transport delivers the COPY just after what the writer sends next on
// its session: before the fix, a ROLLBACK, and the COPY committed five rows
// that the next writer wrote again (ids 5–9 twice).
func TestIntegrationAbandonedCopyCommitsNothing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := snowtest.Name("abandoned")
	p := flightsink.Pipeline{ID: table, Target: table}
	cfg := snowtest.Config(t)
	late := snowtest.NewLateStatement("COPY INTO")
	cfg.Transport = late
	sc := emulatorConfig(cfg)
	sc.RetryFor = time.Second
	s, err := snowflake.New(context.Background(), sc)
	require.NoError(t, err)
	defer s.Close()
	bg := context.Background()

	w1, _, err := s.Open(bg, p)
	require.NoError(t, err)
	first := sinktest.Batch(mem, 0, 5)
	defer first.Release()
	require.NoError(t, w1.WriteBatch(bg, first, sinktest.CP(5)))

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	late.Arm(cancel)
	second := sinktest.Batch(mem, 5, 10)
	defer second.Release()
	err = w1.WriteBatch(ctx, second, sinktest.CP(10))
	require.ErrorIs(t, err, context.Canceled)

	outcome, ok := late.Outcome(2 * time.Minute)
	require.True(t, ok, "the held COPY never completed")
	next := late.Next()
	t.Logf("sent on the session after the abandoned COPY: %q; the late COPY got: %s", next, outcome)

	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4}, snowtest.IDs(t, table),
		"the abandoned COPY committed rows outside its transaction")

	w2, cp, err := s.Open(bg, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(5)), string(cp))
	require.NoError(t, w2.WriteBatch(bg, second, sinktest.CP(10)))
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, snowtest.IDs(t, table))
}
