package snowtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// LateStatement is an HTTP transport (snowconn.Config.Transport) that
// delivers one statement late: the first query request whose SQL contains
// match, once armed, is held back, the caller's context is cancelled and
// the client is answered with that cancellation; the held request reaches
// the server only after the next request the client sends on the same
// session (other than the abort of the held one) has been answered, or
// after a bound, whichever is first.
//
// It is what a client that abandons a statement cannot rule out: the
// statement it gave up on may still run at the server after whatever it
// sends next on that session. Requests on separate connections arrive in
// any order; and the emulator runs a request to its end whether or not its
// client is still waiting, concurrently with the session's next request.
type LateStatement struct {
	base  http.RoundTripper
	match string

	mu      sync.Mutex
	cancel  context.CancelFunc // armed when not nil
	token   string             // the held request's session
	release chan struct{}
	next    string // what was sent on the session after the held request
	done    chan string
}

// NewLateStatement returns a LateStatement for statements containing match.
func NewLateStatement(match string) *LateStatement {
	return &LateStatement{base: http.DefaultTransport, match: match, release: make(chan struct{}), done: make(chan string, 1)}
}

// Arm holds the next matching statement and cancels with cancel.
func (l *LateStatement) Arm(cancel context.CancelFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel = cancel
}

// Next is what the client sent on the held statement's session after it:
// a request path with the start of its SQL, the path with " (close)" for
// the session's logout, or "" for nothing.
func (l *LateStatement) Next() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// Outcome waits up to timeout for the held statement to reach the server
// and returns what the server answered it ("HTTP <code> <body>" or
// "error: …"); ok is false if it never completed.
func (l *LateStatement) Outcome(timeout time.Duration) (outcome string, ok bool) {
	select {
	case outcome = <-l.done:
		return outcome, true
	case <-time.After(timeout):
		return "", false
	}
}

// RoundTrip implements http.RoundTripper.
func (l *LateStatement) RoundTrip(req *http.Request) (*http.Response, error) {
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
