package snowflake_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink/snowflake"
)

// The transactions a claim aborts: every batch transaction of its own
// pipeline, another writer's claim of it only once that is older than two
// minutes, and nothing of other pipelines or other programs.
func TestDeadTxns(t *testing.T) {
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	batch, claim := snowflake.TxnNames("orders", "", 7)
	otherBatch, otherClaim := snowflake.TxnNames("orders", `"DB"."S"."T"`, 7) // same pipeline id, another target
	older, _ := snowflake.TxnNames("orders", "", 3)
	ident := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	for _, n := range []string{batch, claim, otherBatch, otherClaim} {
		require.Regexp(t, ident, n, "an unquoted identifier Snowflake keeps as written")
	}
	require.NotEqual(t, batch, otherBatch)
	rows := []snowflake.DeadTxn{
		{ID: 1, Name: batch, Started: now.Add(-time.Second)},
		{ID: 2, Name: older, Started: now.Add(-time.Hour)},
		{ID: 3, Name: claim, Started: now.Add(-10 * time.Second)}, // a live claim beside ours
		{ID: 4, Name: claim, Started: now.Add(-3 * time.Minute)},  // a dead one
		{ID: 5, Name: claim}, // no start known: left alone
		{ID: 6, Name: otherBatch, Started: now.Add(-time.Hour)},
		{ID: 7, Name: otherClaim, Started: now.Add(-time.Hour)},
		{ID: 8, Name: "9f1c4a3e-0b8d-4d55-a8a1-1f0e6c2b7d11", Started: now.Add(-time.Hour)}, // unnamed
		{ID: 9, Name: batch + "X", Started: now.Add(-time.Hour)},
		{ID: 10, Name: claim[:len(claim)-len("_CLAIM")] + "_E", Started: now.Add(-time.Hour)},
	}
	require.Equal(t, []int64{1, 2, 4}, snowflake.DeadTxns(rows, "orders", "", now))
}
