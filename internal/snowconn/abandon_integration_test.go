package snowconn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/snowconn"
	"github.com/flightline/flightline/internal/snowtest"
)

// A statement the client gave up on (its context was cancelled) may still
// run at the server after the client's next request on that session. The
// pool must not hand the session out again: on the emulator the next
// statement failed with "connection is busy with another call" (a cancelled
// LIST of the Snowflake sink's stage, then a checkpoint read, in a kill
// run), and on Snowflake it would run behind or around the abandoned one.
// The session is closed instead, and the next statement logs in afresh.
//
// Before the fix, what followed the abandoned statement on its session was
// the next query.
func TestIntegrationAbandonedStatementClosesSession(t *testing.T) {
	cfg := snowtest.Config(t)
	late := snowtest.NewLateStatement("'abandoned'")
	cfg.Transport = late
	db, err := snowconn.Open(&cfg)
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1) // one session: reusing it would be the only choice
	bg := context.Background()
	require.NoError(t, snowconn.Ping(bg, db, &cfg))

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	late.Arm(cancel)
	_, err = db.QueryContext(ctx, `SELECT 'abandoned'`)
	require.ErrorIs(t, err, context.Canceled)

	var n int
	require.NoError(t, db.QueryRowContext(bg, `SELECT 2`).Scan(&n))
	require.Equal(t, 2, n)
	outcome, ok := late.Outcome(time.Minute)
	require.True(t, ok, "the held statement never completed")
	next := late.Next()
	t.Logf("sent on the session after the abandoned statement: %q; the late statement got: %s", next, outcome)
	require.False(t, strings.Contains(next, "query-request"),
		"the abandoned statement's session ran the next statement: %s", next)
}
