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
	"strings"
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
		if hint, misconfigured := tlsHandshake(st.Message()); misconfigured {
			// The transport's own verdict on this connection's TLS
			// handshake: retrying meets the same certificate again.
			sentinel = flightline.ErrInvalidInput
			return &remote{code: st.Code(), msg: prefix + ": " + st.Message() + ": " + hint, sentinel: sentinel}
		} else if hint != "" {
			return &remote{code: st.Code(), msg: prefix + ": " + st.Message() + " " + hint, sentinel: sentinel}
		}
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

// handshakeFailed is how grpc-go's client transport introduces the error of
// its own TLS handshake with the server: the status message of the call it
// fails is the transport's ConnectionError ("connection error: desc = %q")
// whose Desc is "transport: authentication handshake failed: %v". Matching
// it at the start of the message tells this client's own connection from a
// peer that relays some other connection's failure in its message.
const (
	handshakeFailed = `connection error: desc = "transport: authentication handshake failed: `
	prefaceFailed   = `connection error: desc = "error reading server preface: `
)

// tlsHandshake reads msg, the message of an UNAVAILABLE status this client
// received, and reports whether it is a TLS configuration problem that no
// retry cures, with what to do about it (misconfigured), or else a hint to
// append to a retryable error ("" for none).
//
// Only the texts grpc-go writes for this connection's own TLS handshake
// count, and only the failures a configuration change alone cures:
//
//   - "x509: certificate signed by unknown authority"
//     (x509.UnknownAuthorityError): no configured CA trusts the server's
//     certificate, e.g. one replaced by a certificate from another CA;
//   - "x509: certificate is valid for …, not …" and "x509: certificate is
//     not valid for any names" (x509.HostnameError): the certificate is for
//     another name than the one connected to;
//   - "tls: first record does not look like a TLS handshake"
//     (tls.RecordHeaderError): grpc+tls:// against a plaintext server.
//
// A text match is the only way: grpc-go turns the handshake's typed error
// into text (transport.ConnectionError's Desc, then a status.Status with
// codes.Unavailable), and neither the status nor what FromStatus receives
// wraps the x509 or tls error (errors.As finds neither; TestTLSClassified
// checks it). The texts are those of crypto/x509 and crypto/tls, stable for
// many Go releases, and each is checked against a real TLS Flight server
// in TestTLSClassified, so a change of wording fails a test rather than
// silently turning a configuration error back into retries.
//
// Not classified, and so still retried: "error reading server preface:
// EOF", which a grpc:// client reaching a TLS server sees, but so does any
// client whose server (or a proxy in front of it) accepts a connection and
// closes it, as a restarting server can — the text cannot tell them apart,
// so it only gains a hint; an expired or not-yet-valid certificate (a
// renewal, or a clock, may cure it); refused or reset connections.
func tlsHandshake(msg string) (hint string, misconfigured bool) {
	cause, ok := strings.CutPrefix(msg, handshakeFailed)
	if !ok {
		// A TLS server drops a plaintext client's connection: the client
		// reads EOF, or ECONNRESET when the server closed with the
		// client's preface unread (seen under load).
		if rest, ok := strings.CutPrefix(msg, prefaceFailed); ok && (rest == `EOF"` || strings.HasSuffix(rest, `connection reset by peer"`)) {
			return "(retried: a restarting server closes connections this way; if it persists, the server may speak TLS: reach it with grpc+tls://)", false
		}
		return "", false
	}
	const notRetried = "a TLS configuration error, not retried"
	switch {
	case strings.Contains(cause, "x509: certificate signed by unknown authority"):
		return notRetried + ": the endpoint's certificate is signed by a CA this client does not trust: give the CA that signed it (--source-tls-ca, --sink-tls-ca or --transform-tls-ca; tls_ca in a config file)", true
	case strings.Contains(cause, "x509: certificate is valid for "), strings.Contains(cause, "x509: certificate is not valid for any names"):
		return notRetried + ": the endpoint's certificate is not for the name or address connected to: connect by a name or IP it holds, or set the name to check (--source-tls-server-name, --sink-tls-server-name or --transform-tls-server-name; tls_server_name in a config file)", true
	case strings.Contains(cause, "tls: first record does not look like a TLS handshake"):
		return notRetried + ": the endpoint does not speak TLS: reach it with grpc://, or serve it with a certificate", true
	}
	return "", false
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
