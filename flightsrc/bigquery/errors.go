package bigquery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
)

// retryable reports whether err is a quota or transient server error worth
// retrying: HTTP 429 and 5xx, a 403 whose reason is a rate or quota limit,
// the gRPC codes UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED and INTERNAL, and
// a read behind its bound query.
func retryable(err error) bool {
	if errors.As(err, new(behind)) {
		return true
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		if ge.Code == http.StatusTooManyRequests || ge.Code >= 500 {
			return true
		}
		for _, e := range ge.Errors {
			switch e.Reason {
			case "rateLimitExceeded", "quotaExceeded", "backendError", "internalError", "jobBackendError":
				return true
			}
		}
		return false
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Internal:
			return true
		}
	}
	return false
}

// behind is a read that returned fewer rows than its bound query counted
// under the bound: the read session's snapshot is older than the query's
// view. Retried; never emitted.
type behind struct{ error }

func (b behind) Unwrap() error { return b.error }

func isNotFound(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code == http.StatusNotFound
	}
	return status.Code(err) == codes.NotFound
}

// classify wraps a BigQuery error in the flightline error it means (errors
// already classified pass through). The service's message is kept; the
// credentials never appear in it.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	for _, known := range []error{flightline.ErrInvalidInput, flightline.ErrNotFound, flightline.ErrConflict,
		flightline.ErrUnavailable, flightline.ErrInternal, flightline.ErrPermissionDenied, context.Canceled} {
		if errors.Is(err, known) {
			return err
		}
	}
	kind := flightline.ErrUnavailable
	var ge *googleapi.Error
	switch {
	case errors.As(err, &ge):
		switch {
		case ge.Code == http.StatusUnauthorized:
			kind = flightline.ErrUnauthenticated
		case ge.Code == http.StatusForbidden && !retryable(err):
			kind = flightline.ErrPermissionDenied
		case ge.Code == http.StatusNotFound:
			kind = flightline.ErrNotFound
		case ge.Code == http.StatusBadRequest:
			kind = flightline.ErrInvalidInput
		}
	default:
		switch status.Code(err) {
		case codes.Unauthenticated:
			kind = flightline.ErrUnauthenticated
		case codes.PermissionDenied:
			kind = flightline.ErrPermissionDenied
		case codes.NotFound:
			kind = flightline.ErrNotFound
		case codes.InvalidArgument:
			kind = flightline.ErrInvalidInput
		}
	}
	return fmt.Errorf("%w: bigquery source: %s: %v", kind, what, err)
}

// emulatorBusy reports an error of the emulator's one SQLite database held
// by another writer ("database is locked"; it comes back as HTTP 400 or a
// gRPC error without a useful code). Only retried against an emulator.
func emulatorBusy(err error) bool {
	return strings.Contains(err.Error(), "database is locked")
}

// retry runs f until it succeeds, fails with an error that is not
// retryable, or has run s.o.retries times, each attempt bounded by
// s.o.attempt, with jittered backoff doubling from s.o.backoff (capped at
// 10s). An attempt that timed out while ctx is live counts as retryable: the
// clients retry some errors by themselves until their context ends. A
// retryable error on the last attempt is ErrUnavailable.
func (s *Source) retry(ctx context.Context, what string, f func(context.Context) error) error {
	wait := s.o.backoff
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, s.o.attempt)
		err := f(actx)
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bigquery source: %s: %w (last error: %v)", what, ctx.Err(), err)
		}
		if !timedOut && !retryable(err) && !(s.conn != nil && emulatorBusy(err)) {
			return classify(err, what)
		}
		if attempt >= s.o.retries {
			return fmt.Errorf("%w: bigquery source: %s: still failing after %d attempts: %v", flightline.ErrUnavailable, what, attempt, err)
		}
		s.o.log.Warn("bigquery source: retrying", "what", what, "attempt", attempt, "err", err)
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("bigquery source: %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 10*time.Second)
	}
}
