package snowflake_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink/snowflake"
)

// The transactions a claim aborts: every batch transaction of its own
// pipeline and target, of any epoch, and nothing of other targets, other
// programs or unnamed transactions.
func TestDeadTxns(t *testing.T) {
	batch := snowflake.TxnName("orders", "", 7)
	older := snowflake.TxnName("orders", "", 3)
	other := snowflake.TxnName("orders", `"DB"."S"."T"`, 7) // same pipeline id, another target
	require.Regexp(t, regexp.MustCompile(`^FLIGHTLINE_[0-9A-F]{16}_E7$`), batch, "an unquoted identifier Snowflake keeps as written")
	require.NotEqual(t, batch, other)
	prefix := batch[:len(batch)-len("_E7")]
	rows := []snowflake.DeadTxn{
		{ID: 1, Name: batch},
		{ID: 2, Name: older},
		{ID: 3, Name: other},
		{ID: 4, Name: "9f1c4a3e-0b8d-4d55-a8a1-1f0e6c2b7d11"}, // unnamed
		{ID: 5, Name: batch + "X"},
		{ID: 6, Name: prefix + "_E"},
		{ID: 7, Name: prefix + "_CLAIM"},
		{ID: 8, Name: prefix + "_E-1"},
	}
	require.Equal(t, []int64{1, 2}, snowflake.DeadTxns(rows, "orders", ""))
}
