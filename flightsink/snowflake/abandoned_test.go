package snowflake_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/flightsink/snowflake"
	"github.com/flightline/flightline/internal/snowtest"
)

// lateStatement is an HTTP transport that delivers one statement late: the
// first query request whose SQL contains match, once armed, is held back,
// the caller's context is cancelled and the client is answered with that
// cancellation; the held request reaches the server only after the next
// request the client sends on the same session (other than the abort of
// the held one) has been answered, or after a bound, whichever is first.
//
// It is what a client that abandons a statement cannot rule out: the
// statement it gave up on may still run at the server after whatever it
// sends next on that session. Requests on separate connections arrive in
// any order; and the emulator runs a request to its end whether or not its
// client is still waiting, concurrently with the session's next request,
// so a COPY it is still loading and a ROLLBACK sent after the client gave
// up on it interleave.
type lateStatement struct {
	base  http.RoundTripper
	match string

	mu      sync.Mutex
	cancel  context.CancelFunc // armed when not nil
	token   string             // the held request's session
	release chan struct{}
	next    string // what was sent on the session after the held request
	done    chan string
}

func newLateStatement(match string) *lateStatement {
	return &lateStatement{base: http.DefaultTransport, match: match, release: make(chan struct{}), done: make(chan string, 1)}
}

// arm holds the next matching statement and cancels with cancel.
func (l *lateStatement) arm(cancel context.CancelFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel = cancel
}

func (l *lateStatement) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	auth := req.Header.Get("Authorization")
	l.mu.Lock()
	if l.cancel != nil && strings.HasSuffix(req.URL.Path, "/queries/v1/query-request") && bytes.Contains(body, []byte(l.match)) {
		cancel := l.cancel
		l.cancel, l.token = nil, auth
		l.mu.Unlock()
		held := req.Clone(context.Background())
		held.Body = io.NopCloser(bytes.NewReader(body))
		go func() {
			select {
			case <-l.release:
			case <-time.After(10 * time.Second):
			}
			resp, err := l.base.RoundTrip(held)
			if err != nil {
				l.done <- "error: " + err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			l.done <- fmt.Sprintf("HTTP %d %.300s", resp.StatusCode, b)
		}()
		cancel()
		return nil, context.Canceled
	}
	// A request whose context is already cancelled never leaves the
	// process (the base transport refuses it): it does not count.
	follows := l.token != "" && auth == l.token && l.next == "" && !strings.Contains(req.URL.Path, "abort-request") &&
		req.Context().Err() == nil
	l.mu.Unlock()
	resp, err := l.base.RoundTrip(req)
	if follows {
		l.mu.Lock()
		l.next = req.URL.Path
		if q := req.URL.Query().Get("delete"); q != "" {
			l.next += " (close)"
		} else if i := bytes.Index(body, []byte(`"sqlText":"`)); i >= 0 {
			l.next += " " + string(body[i+11:min(len(body), i+40)])
		}
		l.mu.Unlock()
		close(l.release)
	}
	return resp, err
}

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
	late := newLateStatement("COPY INTO")
	cfg.Transport = late
	s, err := snowflake.New(cfg, emulatorOpts(snowflake.RetryFor(time.Second))...)
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
	late.arm(cancel)
	second := sinktest.Batch(mem, 5, 10)
	defer second.Release()
	err = w1.WriteBatch(ctx, second, sinktest.CP(10))
	require.ErrorIs(t, err, context.Canceled)

	var outcome string
	select {
	case outcome = <-late.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the held COPY never completed")
	}
	late.mu.Lock()
	next := late.next
	late.mu.Unlock()
	t.Logf("sent on the session after the abandoned COPY: %q; the late COPY got: %s", next, outcome)

	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4}, snowtest.IDs(t, table),
		"the abandoned COPY committed rows outside its transaction")

	w2, cp, err := s.Open(bg, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(5)), string(cp))
	require.NoError(t, w2.WriteBatch(bg, second, sinktest.CP(10)))
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, snowtest.IDs(t, table))
}
