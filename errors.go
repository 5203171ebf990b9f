// Package flightline holds the vocabulary shared by every Flightline source,
// sink and the coordinator: the errors, and the configuration of a client
// connection to an endpoint (ClientConfig).
//
// Callers branch on these sentinels with errors.Is; they are mapped to gRPC
// status codes only at the Flight boundary (see docs/protocol.md), and mapped
// back by the Flight clients, so a local and a remote endpoint fail alike.
package flightline

import (
	"context"
	"errors"
)

var (
	// ErrInvalidInput marks a request that can never succeed as sent: a
	// malformed ticket, descriptor or checkpoint, or a record the sink cannot
	// store. Retrying the same input fails the same way. gRPC: InvalidArgument.
	ErrInvalidInput = errors.New("flightline: invalid input")

	// ErrSchemaMismatch marks a batch whose schema does not fit the
	// destination. Nothing of the batch was written. gRPC: InvalidArgument.
	ErrSchemaMismatch = errors.New("flightline: schema mismatch")

	// ErrFenced marks a writer that has been superseded by a newer writer of
	// the same pipeline (a zombie). It must stop; it committed nothing with
	// the failing call. gRPC: FailedPrecondition.
	ErrFenced = errors.New("flightline: writer fenced by a newer writer")

	// ErrReplaced marks a coordinator that tried to rejoin its claim of a
	// pipeline (a retry after a broken stream) and found that a newer
	// coordinator has claimed the pipeline since: that one is now the
	// pipeline's, and this one must stop rather than claim it back.
	// errors.Is(err, ErrFenced) holds too. gRPC: FailedPrecondition with
	// the ErrorInfo reason REPLACED.
	ErrReplaced error = &subError{msg: "flightline: replaced by a newer coordinator", parent: ErrFenced}

	// ErrFailedPrecondition marks a destination or source that exists but
	// is of a kind the endpoint cannot work with, e.g. a Unity Catalog
	// table that is MANAGED (write credentials are vended for external
	// tables only), a view, or not Delta. Retrying does not help; changing
	// the table does. gRPC: FailedPrecondition with the ErrorInfo reason
	// PRECONDITION (FailedPrecondition without it is ErrFenced).
	ErrFailedPrecondition = errors.New("flightline: failed precondition")

	// ErrConflict marks a commit that lost a race or found the pipeline's
	// checkpoint moved since the writer read it. Re-read the checkpoint and
	// resume from it. gRPC: Aborted.
	ErrConflict = errors.New("flightline: concurrent commit conflict")

	// ErrUnavailable marks a transient outage of the destination or source.
	// Nothing was committed by the failing call; retry with backoff.
	// gRPC: Unavailable.
	ErrUnavailable = errors.New("flightline: endpoint unavailable")

	// ErrUnauthenticated marks missing or wrong credentials.
	// gRPC: Unauthenticated.
	ErrUnauthenticated = errors.New("flightline: unauthenticated")

	// ErrPermissionDenied marks credentials that are valid but lack a right.
	// gRPC: PermissionDenied.
	ErrPermissionDenied = errors.New("flightline: permission denied")

	// ErrNotFound marks an unknown stream, pipeline target or table.
	// gRPC: NotFound.
	ErrNotFound = errors.New("flightline: not found")

	// ErrInternal marks a bug an endpoint hit while handling a call (a
	// recovered panic): the call committed nothing, and the same input would
	// hit the same bug again, so it is not retryable. The details are in the
	// endpoint's log, not in the error. gRPC: Internal with the ErrorInfo
	// reason INTERNAL_BUG. (Internal without that reason is an unclassified
	// failure and stays retryable.)
	ErrInternal = errors.New("flightline: internal error (a bug; see the endpoint's log)")
)

// subError is a sentinel that is also another: errors.Is(sub, parent).
type subError struct {
	msg    string
	parent error
}

func (e *subError) Error() string { return e.msg }
func (e *subError) Unwrap() error { return e.parent }

// IsRetryable reports whether err may succeed when retried after a backoff,
// possibly after re-reading the sink's checkpoint. Errors caused by the input
// itself, by credentials or by fencing are not retryable: retrying them would
// loop forever or let a zombie keep writing.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrInvalidInput), errors.Is(err, ErrSchemaMismatch),
		errors.Is(err, ErrFenced), errors.Is(err, ErrFailedPrecondition), errors.Is(err, ErrUnauthenticated),
		errors.Is(err, ErrPermissionDenied), errors.Is(err, ErrNotFound),
		errors.Is(err, ErrInternal), errors.Is(err, context.Canceled):
		return false
	}
	// ErrConflict, ErrUnavailable, deadlines and unclassified I/O errors.
	return true
}
