// Package flighterr maps Flightline's typed errors to gRPC status codes at the
// Flight boundary and back, so a remote endpoint fails exactly like a local
// one: errors.Is(err, flightline.ErrFenced) holds on both sides.
package flighterr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
)

// ToStatus converts err to a gRPC status error carrying its message. Errors
// that already are status errors keep their code.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	st := status.New(Code(err), clipMessage(err.Error()))
	if r := reason(err); r != "" {
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Domain: Domain, Reason: r}); derr == nil {
			st = d
		}
	}
	return st.Err()
}

// Domain is the ErrorInfo domain of the reasons Flightline attaches.
const Domain = "flightline"

// Reasons attached as google.rpc.ErrorInfo where a gRPC code alone is
// ambiguous. They are part of the wire contract (docs/protocol.md).
const (
	ReasonSchemaMismatch = "SCHEMA_MISMATCH"
	ReasonFenced         = "FENCED"
	// ReasonReplaced tells flightline.ErrReplaced (a rejoin refused: a
	// newer coordinator claimed the pipeline) from a plain ErrFenced.
	ReasonReplaced = "REPLACED"
	ReasonConflict = "CHECKPOINT_CONFLICT"
	// ReasonPrecondition tells flightline.ErrFailedPrecondition from
	// ErrFenced, which share FailedPrecondition.
	ReasonPrecondition = "PRECONDITION"
	// ReasonInternalBug marks an Internal status that is not retryable: the
	// endpoint recovered from a bug (a panic) handling the call.
	ReasonInternalBug = "INTERNAL_BUG"
)

func reason(err error) string {
	switch {
	case errors.Is(err, flightline.ErrSchemaMismatch):
		return ReasonSchemaMismatch
	case errors.Is(err, flightline.ErrReplaced):
		return ReasonReplaced
	case errors.Is(err, flightline.ErrFenced):
		return ReasonFenced
	case errors.Is(err, flightline.ErrConflict):
		return ReasonConflict
	case errors.Is(err, flightline.ErrFailedPrecondition):
		return ReasonPrecondition
	case errors.Is(err, flightline.ErrInternal):
		return ReasonInternalBug
	}
	return ""
}

// Code returns the gRPC code for err.
func Code(err error) codes.Code {
	switch {
	case errors.Is(err, flightline.ErrInvalidInput), errors.Is(err, flightline.ErrSchemaMismatch):
		return codes.InvalidArgument
	case errors.Is(err, flightline.ErrFenced), errors.Is(err, flightline.ErrFailedPrecondition):
		return codes.FailedPrecondition
	case errors.Is(err, flightline.ErrConflict):
		return codes.Aborted
	case errors.Is(err, flightline.ErrUnavailable):
		return codes.Unavailable
	case errors.Is(err, flightline.ErrUnauthenticated):
		return codes.Unauthenticated
	case errors.Is(err, flightline.ErrPermissionDenied):
		return codes.PermissionDenied
	case errors.Is(err, flightline.ErrNotFound):
		return codes.NotFound
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	return codes.Internal // ErrInternal and everything unclassified
}

// remote is an error received from a Flight peer: it keeps the peer's message
// and unwraps to the matching sentinel.
type remote struct {
	code     codes.Code
	msg      string
	sentinel error
}

func (e *remote) Error() string { return e.msg }
func (e *remote) Unwrap() error { return e.sentinel }

// GRPCStatus lets status.FromError see through the wrapper.
func (e *remote) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

// FromStatus converts an error received from a Flight peer into one that
// wraps the sentinel its code stands for. prefix says which call failed.
func FromStatus(prefix string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var sentinel error
	switch st.Code() {
	case codes.InvalidArgument:
		sentinel = flightline.ErrInvalidInput
		if hasReason(st, ReasonSchemaMismatch) {
			sentinel = flightline.ErrSchemaMismatch
		}
	case codes.FailedPrecondition:
		sentinel = flightline.ErrFenced
		if hasReason(st, ReasonPrecondition) {
			sentinel = flightline.ErrFailedPrecondition
		} else if hasReason(st, ReasonReplaced) {
			sentinel = flightline.ErrReplaced
		}
	case codes.Aborted:
		sentinel = flightline.ErrConflict
	case codes.Unavailable:
		sentinel = flightline.ErrUnavailable
	case codes.ResourceExhausted:
		// A message over the peer's size limit (gRPC refuses it before
		// any handler runs): the same batch is refused again however
		// often it is sent, so it is not retryable (docs/protocol.md).
		sentinel = flightline.ErrInvalidInput
	case codes.Unauthenticated:
		sentinel = flightline.ErrUnauthenticated
	case codes.PermissionDenied:
		sentinel = flightline.ErrPermissionDenied
	case codes.NotFound:
		sentinel = flightline.ErrNotFound
	case codes.Canceled:
		sentinel = context.Canceled
	case codes.DeadlineExceeded:
		sentinel = context.DeadlineExceeded
	case codes.Internal:
		if !hasReason(st, ReasonInternalBug) {
			return &remote{code: st.Code(), msg: prefix + ": " + st.Message()}
		}
		sentinel = flightline.ErrInternal
	default:
		return &remote{code: st.Code(), msg: prefix + ": " + st.Message()}
	}
	return &remote{code: st.Code(), msg: prefix + ": " + st.Message(), sentinel: sentinel}
}

func hasReason(st *status.Status, r string) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain && info.GetReason() == r {
			return true
		}
	}
	return false
}

// MaxEcho is how many bytes of a client-supplied string (a name, an action
// type, a message quoting one) Clip keeps.
const MaxEcho = 256

// Clip returns s cut to MaxEcho bytes on a UTF-8 boundary, with the number
// of bytes cut appended, for status messages and log lines that echo what a
// client sent: a 1 MiB stream name must not become a 1 MiB trailer or log
// line.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d more bytes)", s[:cut], len(s)-cut)
}

// maxMessage bounds a status message: it travels in a gRPC trailer, and
// clients refuse trailers over a few KiB (grpc-go: 16 KiB), turning the
// error into a bare INTERNAL.
const maxMessage = 2048

func clipMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d more bytes)", s[:cut], len(s)-cut)
}

// Recover, deferred directly by a Flight handler or a goroutine serving
// one, turns a panic into an error wrapping flightline.ErrInternal in
// *errp (INTERNAL with reason INTERNAL_BUG on the wire: not retryable) and
// logs the panic and its stack; the panic's message stays out of the
// status. call names the call for both; it is evaluated after the panic.
// Deferred functions registered after Recover (closing the writer,
// releasing the batch) have run by then.
func Recover(log *slog.Logger, call func() string, errp *error) {
	r := recover()
	if r == nil {
		return
	}
	c := call()
	log.Error(c+" panicked; the call fails with INTERNAL", "panic", Clip(fmt.Sprint(r)), "stack", string(debug.Stack()))
	*errp = fmt.Errorf("%w: %s", flightline.ErrInternal, c)
}
