// Package kafkaconn is the connection plumbing Flightline's Kafka source and
// sink share: SASL mechanisms, the kgo logger adapter and the mapping of
// franz-go errors onto flightline's sentinels.
package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/flightline/flightline"
)

// SASLPlain returns the SASL/PLAIN mechanism for user and pass.
func SASLPlain(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

// SASLScram returns the SASL/SCRAM mechanism named mechanism
// ("SCRAM-SHA-256" or "SCRAM-SHA-512").
func SASLScram(mechanism, user, pass string) (sasl.Mechanism, error) {
	a := scram.Auth{User: user, Pass: pass}
	switch mechanism {
	case "SCRAM-SHA-256":
		return a.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return a.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: SASL mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", flightline.ErrInvalidInput, mechanism)
}

// Classify wraps err with the flightline sentinel callers branch on.
// saslName names the configured SASL mechanism in credential errors. Errors
// already carrying a sentinel are returned unchanged; unknown errors too.
func Classify(err error, saslName string) error {
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flightline.ErrNotFound), errors.Is(err, flightline.ErrUnavailable),
		errors.Is(err, flightline.ErrUnauthenticated), errors.Is(err, flightline.ErrPermissionDenied),
		errors.Is(err, flightline.ErrInvalidInput), errors.Is(err, flightline.ErrFenced),
		errors.Is(err, flightline.ErrConflict),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState),
		errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("%w: Kafka rejected the credentials (SASL %s): %w", flightline.ErrUnauthenticated, saslName, err)
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.GroupAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return fmt.Errorf("%w: %w", flightline.ErrPermissionDenied, err)
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
		return fmt.Errorf("%w: %w", flightline.ErrFenced, err)
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return fmt.Errorf("%w: %w", flightline.ErrNotFound, err)
	case errors.As(err, &ne), errors.Is(err, kgo.ErrClientClosed), IsRetriableKerr(err):
		return fmt.Errorf("%w: %w", flightline.ErrUnavailable, err)
	case strings.Contains(err.Error(), "unable to dial"):
		// kgo's dial errors are not typed; the broker address is in the text.
		return fmt.Errorf("%w: %w", flightline.ErrUnavailable, err)
	}
	return err
}

// IsRetriableKerr reports whether err is a Kafka protocol error the broker
// marks retriable.
func IsRetriableKerr(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable
}

// Logger forwards kgo's warnings and errors to l; its info and debug
// chatter stays out of the pipeline's log.
type Logger struct{ L *slog.Logger }

// Level implements kgo.Logger.
func (k Logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// Log implements kgo.Logger.
func (k Logger) Log(level kgo.LogLevel, msg string, kv ...any) {
	switch level {
	case kgo.LogLevelError:
		k.L.Error("kgo: "+msg, kv...)
	case kgo.LogLevelWarn:
		k.L.Warn("kgo: "+msg, kv...)
	}
}
