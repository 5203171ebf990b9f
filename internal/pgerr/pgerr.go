// Package pgerr classifies PostgreSQL and pgx errors into Flightline's error
// vocabulary and keeps passwords out of error text and logs. It is shared by
// the PostgreSQL sink and source.
package pgerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flightline/flightline"
)

// Error is a classified, redacted PostgreSQL error. errors.Is finds both its
// Kind (a flightline sentinel, when classified) and the underlying error.
type Error struct {
	Kind error // flightline.Err…, or nil when unclassified
	Err  error
	text string
}

func (e *Error) Error() string { return e.text }

func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// Kind returns the flightline sentinel err belongs to, or nil.
func Kind(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		c := pe.Code
		switch {
		case c == "28P01" || c == "28000":
			return flightline.ErrUnauthenticated
		case c == "42501":
			return flightline.ErrPermissionDenied
		case c == "3D000" || c == "3F000" || c == "42P01":
			return flightline.ErrNotFound
		case c == "40001" || c == "40P01":
			return flightline.ErrConflict
		case c == "42703" || c == "42804":
			return flightline.ErrSchemaMismatch
		case strings.HasPrefix(c, "22") || strings.HasPrefix(c, "23"):
			return flightline.ErrInvalidInput
		case strings.HasPrefix(c, "08") || strings.HasPrefix(c, "53") || strings.HasPrefix(c, "57P"):
			return flightline.ErrUnavailable
		}
		return nil
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) {
		return flightline.ErrUnavailable
	}
	return nil
}

// Wrap classifies err and returns it with a message "<what>: <cause>" in
// which every occurrence of password is replaced. It returns nil for nil and
// leaves errors that already are *Error alone.
func Wrap(err error, password, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	kind := Kind(err)
	msg := fmt.Sprintf(format, args...) + ": " + describe(err, kind)
	return &Error{Kind: kind, Err: err, text: Redact(msg, password)}
}

func describe(err error, kind error) string {
	var pe *pgconn.PgError
	cause := err.Error()
	if errors.As(err, &pe) {
		cause = fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
		if pe.Detail != "" {
			cause += ": " + pe.Detail
		}
	}
	switch kind {
	case flightline.ErrUnauthenticated:
		return "authentication failed: " + cause
	case flightline.ErrPermissionDenied:
		return "permission denied: " + cause
	case flightline.ErrUnavailable:
		return "server unavailable: " + cause
	}
	return cause
}

// Redact replaces every occurrence of password in s.
func Redact(s, password string) string {
	if password == "" {
		return s
	}
	return strings.ReplaceAll(s, password, "xxxxx")
}

// Describe names a connection target for logs and errors without its
// password: "user@host:port/database".
func Describe(c *pgconn.Config) string {
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// ParseError turns a DSN parse error into ErrInvalidInput. pgx redacts
// the password in its message; the password is also removed here, as far as
// the malformed DSN still shows one.
func ParseError(err error, dsn string) error {
	msg := err.Error()
	if u, perr := url.Parse(dsn); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			msg = Redact(msg, pw)
		}
	}
	for _, kv := range strings.Fields(dsn) { // key=value form
		if pw, ok := strings.CutPrefix(kv, "password="); ok {
			msg = Redact(msg, strings.Trim(pw, "'"))
		}
	}
	return &Error{Kind: flightline.ErrInvalidInput, Err: err, text: "postgres: invalid DSN: " + msg}
}
