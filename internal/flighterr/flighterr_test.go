package flighterr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{flightline.ErrInvalidInput, codes.InvalidArgument},
		{flightline.ErrSchemaMismatch, codes.InvalidArgument},
		{flightline.ErrFenced, codes.FailedPrecondition},
		{flightline.ErrFailedPrecondition, codes.FailedPrecondition},
		{flightline.ErrConflict, codes.Aborted},
		{flightline.ErrUnavailable, codes.Unavailable},
		{flightline.ErrUnauthenticated, codes.Unauthenticated},
		{flightline.ErrPermissionDenied, codes.PermissionDenied},
		{flightline.ErrNotFound, codes.NotFound},
		{context.Canceled, codes.Canceled},
		{flightline.ErrInternal, codes.Internal},
	} {
		wrapped := fmt.Errorf("writing batch 3: %w", tc.err)
		st := ToStatus(wrapped)
		require.Equal(t, tc.code, status.Code(st), tc.err)
		back := FromStatus("DoPut", st)
		require.Truef(t, errors.Is(back, tc.err), "%v -> %v", tc.err, back)
		require.Contains(t, back.Error(), "writing batch 3")
		require.Equal(t, tc.code, status.Code(back), "the code survives a second hop")
	}
}

func TestFailedPreconditionIsNotFenced(t *testing.T) {
	back := FromStatus("x", ToStatus(fmt.Errorf("table t is MANAGED: %w", flightline.ErrFailedPrecondition)))
	require.ErrorIs(t, back, flightline.ErrFailedPrecondition)
	require.NotErrorIs(t, back, flightline.ErrFenced)
	require.False(t, flightline.IsRetryable(back))
	// Without the reason (an older peer) FailedPrecondition stays fenced.
	require.ErrorIs(t, FromStatus("x", status.Error(codes.FailedPrecondition, "old")), flightline.ErrFenced)
}

// RESOURCE_EXHAUSTED is a message over the peer's size limit: sending it
// again cannot succeed (docs/protocol.md), so it is not retryable.
func TestResourceExhaustedIsNotRetryable(t *testing.T) {
	back := FromStatus("DoPut", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (600 vs. 500)"))
	require.ErrorIs(t, back, flightline.ErrInvalidInput)
	require.False(t, flightline.IsRetryable(back))
	require.Equal(t, codes.ResourceExhausted, status.Code(back), "the code survives a second hop")
}

func TestUnknownIsInternal(t *testing.T) {
	st := ToStatus(errors.New("disk on fire"))
	require.Equal(t, codes.Internal, status.Code(st))
	back := FromStatus("x", st)
	require.True(t, flightline.IsRetryable(back))
}

func TestInternalBugIsNotRetryable(t *testing.T) {
	st := ToStatus(fmt.Errorf("DoPut of %q: %w", "p", flightline.ErrInternal))
	require.Equal(t, codes.Internal, status.Code(st))
	back := FromStatus("x", st)
	require.ErrorIs(t, back, flightline.ErrInternal)
	require.False(t, flightline.IsRetryable(back))
}

// Each text tlsHandshake classifies, as grpc-go writes it for this
// client's own handshake, and texts that look alike but must stay
// retryable.
func TestTLSHandshakeClassification(t *testing.T) {
	const hs = `connection error: desc = "transport: authentication handshake failed: `
	for _, tc := range []struct {
		name, msg     string
		misconfigured bool
		hint          string
	}{
		{"unknown CA", hs + `tls: failed to verify certificate: x509: certificate signed by unknown authority"`, true, "give the CA that signed it (--source-tls-ca"},
		{"unknown CA, with the candidate", hs + `tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of \"x509: ECDSA verification failure\" while trying to verify candidate authority certificate \"ca\")"`, true, "give the CA that signed it"},
		{"another name", hs + `tls: failed to verify certificate: x509: certificate is valid for 10.9.9.9, not 127.0.0.1"`, true, "connect by a name or IP it holds"},
		{"no names", hs + `tls: failed to verify certificate: x509: certificate is not valid for any names, but wanted to match localhost"`, true, "tls_server_name"},
		{"TLS to plaintext", hs + `tls: first record does not look like a TLS handshake"`, true, "the endpoint does not speak TLS: reach it with grpc://"},
		{"plaintext to TLS, or a restart", `connection error: desc = "error reading server preface: EOF"`, false, "if it persists, the server may speak TLS"},
		{"expired", hs + `tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time …"`, false, ""},
		{"reset during the handshake", hs + `read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"`, false, ""},
		{"refused", `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`, false, ""},
		{"a peer relaying another connection's failure", `adbc: flightsql: ` + hs + `tls: failed to verify certificate: x509: certificate signed by unknown authority"`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hint, misconfigured := tlsHandshake(tc.msg)
			require.Equal(t, tc.misconfigured, misconfigured)
			if tc.hint == "" {
				require.Empty(t, hint)
			} else {
				require.Contains(t, hint, tc.hint)
			}
			err := FromStatus("DoPut", status.Error(codes.Unavailable, tc.msg))
			require.Equal(t, !tc.misconfigured, flightline.IsRetryable(err), err)
			require.Equal(t, tc.misconfigured, errors.Is(err, flightline.ErrInvalidInput), err)
			require.Equal(t, !tc.misconfigured, errors.Is(err, flightline.ErrUnavailable), err)
			require.Equal(t, codes.Unavailable, status.Code(err), "the code is the transport's")
			require.Contains(t, err.Error(), "DoPut: "+tc.msg)
		})
	}
}
