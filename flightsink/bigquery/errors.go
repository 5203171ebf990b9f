package bigquery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
)

// retryable reports whether err is a quota or transient server error worth
// retrying: HTTP 429 and 5xx, a 403 whose reason is a rate or quota limit,
// a concurrent-update abort of a transaction, and the gRPC codes
// UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED and INTERNAL.
func retryable(err error) bool {
	if errors.As(err, new(transient)) {
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
		return strings.Contains(ge.Message, "concurrent update")
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Internal:
			return true
		}
	}
	return false
}

func isNotFound(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code == http.StatusNotFound
	}
	return status.Code(err) == codes.NotFound
}

func isAlreadyExists(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code == http.StatusConflict
	}
	return status.Code(err) == codes.AlreadyExists
}

// classify wraps a BigQuery error in the flightline error it means. The
// service's message is kept (it names the column of a schema error); the
// credentials never appear in it.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, flightline.ErrInvalidInput) || errors.Is(err, flightline.ErrSchemaMismatch) ||
		errors.Is(err, flightline.ErrUnavailable) || errors.Is(err, flightline.ErrInternal) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
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
			kind = flightline.ErrSchemaMismatch
		case ge.Code == http.StatusConflict:
			kind = flightline.ErrConflict
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
			kind = flightline.ErrSchemaMismatch
		case codes.AlreadyExists:
			kind = flightline.ErrConflict
		}
	}
	return fmt.Errorf("%w: bigquery: %s: %v", kind, what, err)
}

// retry runs f until it succeeds, fails with an error that is not
// retryable, or has failed s.o.retries times with backoff doubling from
// s.o.backoff (capped at 10s); a retryable error that outlasts the
// attempts is ErrUnavailable. Every error is classified.
func (s *Sink) retry(ctx context.Context, what string, f func() error) error {
	wait := s.o.backoff
	for attempt := 1; ; attempt++ {
		if s.conn != nil {
			emulatorMu.Lock()
		}
		err := f()
		if s.conn != nil {
			emulatorMu.Unlock()
		}
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return classify(err, what)
		}
		if attempt >= s.o.retries {
			return fmt.Errorf("%w: bigquery: %s: still failing after %d attempts: %v", flightline.ErrUnavailable, what, attempt, err)
		}
		s.o.logger.Warn("bigquery: retrying", "what", what, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("bigquery: %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(wait/2 + rand.N(wait)): // jittered: concurrent writers spread out
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// transient marks an error the sink knows is safe and worth retrying (a
// stream whose batch commit failed: nothing of it is visible).
type transient struct{ error }

func (t transient) Unwrap() error { return t.error }

// emulatorMu serializes every call of every Sink pointed at an emulator
// (Emulator): the emulator keeps its tables in one SQLite database and
// fails concurrent writers with "database is locked" — as an HTTP 400 for
// a query job, so it cannot be told from a real error. BigQuery itself
// takes concurrent calls; there, a MERGE that loses a race with another
// transaction is retried (retryable).
var emulatorMu sync.Mutex
