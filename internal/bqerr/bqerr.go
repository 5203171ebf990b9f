// Package bqerr maps the errors of BigQuery's APIs (HTTP errors of the REST
// API, gRPC statuses of the Storage Read and Write APIs) to Flightline's
// error vocabulary, once for the BigQuery sink and source.
//
// The mapping (pinned by TestClassify):
//
//	HTTP 401, UNAUTHENTICATED             → ErrUnauthenticated
//	HTTP 403 not a rate or quota limit,
//	  PERMISSION_DENIED                   → ErrPermissionDenied
//	HTTP 404, NOT_FOUND                   → ErrNotFound
//	HTTP 400, INVALID_ARGUMENT            → ErrInvalidInput
//	HTTP 409, ALREADY_EXISTS              → ErrConflict
//	anything else                         → ErrUnavailable
//
// HTTP 400 is BigQuery's "invalid" of every kind (a query naming a column
// the table lacks, a value out of range, a row the table's schema refuses):
// a request that can never succeed as sent, so ErrInvalidInput. The sink
// refuses a batch whose schema does not fit the table as ErrSchemaMismatch
// itself, naming the column, before the service sees it.
package bqerr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
)

// Retryable reports whether err is a quota or transient server error worth
// retrying: HTTP 429 and 5xx, a 403 or other HTTP error whose reason is a
// rate or quota limit or a backend error, a transaction aborted by a
// concurrent update, and the gRPC codes UNAVAILABLE, RESOURCE_EXHAUSTED,
// ABORTED and INTERNAL (the Storage APIs' quota and transient errors).
func Retryable(err error) bool {
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
		// BigQuery says so only in the message: a multi-statement
		// transaction (the sink's MERGE) that lost a race with another.
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

// IsNotFound reports an HTTP 404 or a gRPC NOT_FOUND.
func IsNotFound(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code == http.StatusNotFound
	}
	return status.Code(err) == codes.NotFound
}

// IsAlreadyExists reports an HTTP 409 or a gRPC ALREADY_EXISTS.
func IsAlreadyExists(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code == http.StatusConflict
	}
	return status.Code(err) == codes.AlreadyExists
}

// known are the errors Classify passes through unchanged: already in
// Flightline's vocabulary, or the caller's own context.
var known = []error{
	flightline.ErrInvalidInput, flightline.ErrSchemaMismatch, flightline.ErrFenced,
	flightline.ErrFailedPrecondition, flightline.ErrConflict, flightline.ErrUnavailable,
	flightline.ErrUnauthenticated, flightline.ErrPermissionDenied, flightline.ErrNotFound,
	flightline.ErrInternal, context.Canceled, context.DeadlineExceeded,
}

// Classify wraps a BigQuery error in the Flightline error it means (see the
// package comment), as "KIND: who: what: err". The service's message is
// kept (it names the column or the table); credentials never appear in it.
// An error already classified, or a context's error, is returned as it is;
// nil is nil.
func Classify(err error, who, what string) error {
	if err == nil {
		return nil
	}
	for _, k := range known {
		if errors.Is(err, k) {
			return err
		}
	}
	kind := flightline.ErrUnavailable
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch {
		case ge.Code == http.StatusUnauthorized:
			kind = flightline.ErrUnauthenticated
		case ge.Code == http.StatusForbidden && !Retryable(err):
			kind = flightline.ErrPermissionDenied
		case ge.Code == http.StatusNotFound:
			kind = flightline.ErrNotFound
		case ge.Code == http.StatusBadRequest:
			kind = flightline.ErrInvalidInput
		case ge.Code == http.StatusConflict:
			kind = flightline.ErrConflict
		}
	} else {
		switch status.Code(err) {
		case codes.Unauthenticated:
			kind = flightline.ErrUnauthenticated
		case codes.PermissionDenied:
			kind = flightline.ErrPermissionDenied
		case codes.NotFound:
			kind = flightline.ErrNotFound
		case codes.InvalidArgument:
			kind = flightline.ErrInvalidInput
		case codes.AlreadyExists:
			kind = flightline.ErrConflict
		}
	}
	return fmt.Errorf("%w: %s: %s: %v", kind, who, what, err)
}
