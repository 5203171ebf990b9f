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
