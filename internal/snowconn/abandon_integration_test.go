package snowconn_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/snowconn"
	"github.com/flightline/flightline/internal/testkit/snowtest"
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

// resend is an HTTP transport that sends every query request whose SQL
// contains match twice, the second time as gosnowflake resends a request
// after a timeout or a 5xx answer (the same requestId, a new request_guid,
// retryCount=1), and answers with the second response.
type resend struct{ match string }

func (r resend) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/queries/v1/query-request") || req.Body == nil {
		return http.DefaultTransport.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(r.match)) {
		return http.DefaultTransport.RoundTrip(req)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // the first answer is dropped
	resp.Body.Close()
	again := req.Clone(req.Context())
	q := again.URL.Query()
	q.Set("request_guid", q.Get("request_guid")+"-retry")
	q.Set("retryCount", "1")
	q.Set("retryReason", "0")
	again.URL.RawQuery = q.Encode()
	again.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(again)
}

// The emulator runs a query request id once, as Snowflake does: gosnowflake
// resends a statement whose request timed out or got a 5xx answer with the
// same requestId, and fakesnow ran it again (an INSERT resent stored its
// row twice; a COPY resent inside a transaction loaded its file twice).
// The tests' emulator wrapper (integration/services/fakesnow_server.py)
// answers a resend with the first run's outcome; this pins that down, so
// that a duplicate in the kill tests is the sink's and not the emulator's.
func TestIntegrationEmulatorRunsRequestIDOnce(t *testing.T) {
	cfg := snowtest.Config(t)
	table := snowtest.Name("resend")
	cfg.Transport = resend{match: "INSERT INTO"}
	db, err := snowconn.Open(&cfg)
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	_, err = db.ExecContext(ctx, `CREATE TABLE `+table+` (id INT)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO `+table+` VALUES (1)`)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n))
	require.Equal(t, 1, n, "a resent request id ran twice")
}
