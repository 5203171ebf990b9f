package flighterr

import "testing"

// TestPrefaceFailures: a plaintext client's connection dropped by a TLS
// server reads EOF or, when the server closed with the client's preface
// unread, ECONNRESET; both get the retried hint, nothing else does.
func TestPrefaceFailures(t *testing.T) {
	for msg, want := range map[string]bool{
		`connection error: desc = "error reading server preface: EOF"`:                                                               true,
		`connection error: desc = "error reading server preface: connection reset by peer"`:                                          true,
		`connection error: desc = "error reading server preface: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"`: true,
		`connection error: desc = "error reading server preface: http2: frame too large"`:                                            false,
		`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`:               false,
	} {
		hint, misconfigured := tlsHandshake(msg)
		if got := hint != ""; got != want || misconfigured {
			t.Errorf("%s: hint %q, misconfigured %v; want a hint: %v, not misconfigured", msg, hint, misconfigured, want)
		}
	}
}
