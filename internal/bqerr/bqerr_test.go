package bqerr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/bqerr"
)

func httpErr(code int, reason, msg string) error {
	ge := &googleapi.Error{Code: code, Message: msg}
	if reason != "" {
		ge.Errors = []googleapi.ErrorItem{{Reason: reason}}
	}
	return fmt.Errorf("call: %w", ge)
}

// The agreed mapping, for the sink and the source alike.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		kind      error
		retryable bool
	}{
		{"HTTP 400", httpErr(400, "invalid", "Unrecognized name: nope"), flightline.ErrInvalidInput, false},
		{"INVALID_ARGUMENT", status.Error(codes.InvalidArgument, "bad row"), flightline.ErrInvalidInput, false},
		{"HTTP 401", httpErr(401, "", "no"), flightline.ErrUnauthenticated, false},
		{"UNAUTHENTICATED", status.Error(codes.Unauthenticated, "no"), flightline.ErrUnauthenticated, false},
		{"HTTP 403", httpErr(403, "accessDenied", "no"), flightline.ErrPermissionDenied, false},
		{"HTTP 403 quota", httpErr(403, "quotaExceeded", "slow down"), flightline.ErrUnavailable, true},
		{"HTTP 403 rate", httpErr(403, "rateLimitExceeded", "slow down"), flightline.ErrUnavailable, true},
		{"PERMISSION_DENIED", status.Error(codes.PermissionDenied, "no"), flightline.ErrPermissionDenied, false},
		{"HTTP 404", httpErr(404, "notFound", "Not found: Table p:d.t"), flightline.ErrNotFound, false},
		{"NOT_FOUND", status.Error(codes.NotFound, "gone"), flightline.ErrNotFound, false},
		{"HTTP 409", httpErr(409, "duplicate", "Already Exists"), flightline.ErrConflict, false},
		{"ALREADY_EXISTS", status.Error(codes.AlreadyExists, "there"), flightline.ErrConflict, false},
		{"HTTP 400 concurrent update", httpErr(400, "invalidQuery", "Transaction is aborted due to concurrent update"), flightline.ErrInvalidInput, true},
		{"HTTP 429", httpErr(429, "", "slow down"), flightline.ErrUnavailable, true},
		{"HTTP 500", httpErr(500, "backendError", "oops"), flightline.ErrUnavailable, true},
		{"HTTP 503", httpErr(503, "", "down"), flightline.ErrUnavailable, true},
		{"UNAVAILABLE", status.Error(codes.Unavailable, "down"), flightline.ErrUnavailable, true},
		{"RESOURCE_EXHAUSTED", status.Error(codes.ResourceExhausted, "quota"), flightline.ErrUnavailable, true},
		{"ABORTED", status.Error(codes.Aborted, "retry"), flightline.ErrUnavailable, true},
		{"INTERNAL", status.Error(codes.Internal, "oops"), flightline.ErrUnavailable, true},
		{"unknown", io.ErrUnexpectedEOF, flightline.ErrUnavailable, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := bqerr.Classify(c.err, "bigquery", "reading")
			if !errors.Is(got, c.kind) {
				t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.kind)
			}
			if !strings.HasPrefix(got.Error(), c.kind.Error()+": bigquery: reading: ") {
				t.Errorf("Classify(%v) = %q, want the kind, who and what first", c.err, got)
			}
			if r := bqerr.Retryable(c.err); r != c.retryable {
				t.Errorf("Retryable(%v) = %v, want %v", c.err, r, c.retryable)
			}
		})
	}
}

func TestClassifyPassesThrough(t *testing.T) {
	for _, err := range []error{
		nil,
		fmt.Errorf("%w: column %q", flightline.ErrSchemaMismatch, "a"),
		fmt.Errorf("%w: x", flightline.ErrInvalidInput),
		fmt.Errorf("%w: x", flightline.ErrPermissionDenied),
		context.Canceled,
		fmt.Errorf("waiting: %w", context.DeadlineExceeded),
	} {
		if got := bqerr.Classify(err, "bigquery", "x"); got != err {
			t.Errorf("Classify(%v) = %v, want it unchanged", err, got)
		}
	}
}

func TestIsNotFoundAlreadyExists(t *testing.T) {
	if !bqerr.IsNotFound(httpErr(404, "", "")) || !bqerr.IsNotFound(status.Error(codes.NotFound, "")) || bqerr.IsNotFound(httpErr(409, "", "")) {
		t.Error("IsNotFound")
	}
	if !bqerr.IsAlreadyExists(httpErr(409, "", "")) || !bqerr.IsAlreadyExists(status.Error(codes.AlreadyExists, "")) || bqerr.IsAlreadyExists(httpErr(404, "", "")) {
		t.Error("IsAlreadyExists")
	}
}
