// Package kafkaconn is the connection plumbing Flightline's Kafka source and
// sink share: one connection Config and the kgo options it makes, SASL
// mechanisms, the kgo logger adapter and the mapping of franz-go errors
// onto flightline's sentinels.
package kafkaconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/flightline/flightline"
)

// Config is how a Kafka client of Flightline connects: the source and the
// sink fill one each from their options and take their kgo options from
// Opts, so the two sides cannot drift apart.
type Config struct {
	// Brokers are the bootstrap servers, host:port each.
	Brokers []string
	// ClientID is the Kafka client id.
	ClientID string
	// TLS, when set, connects over TLS.
	TLS *tls.Config
	// SASL, when set, authenticates; SASLName names it in credential
	// errors (see Classify).
	SASL     sasl.Mechanism
	SASLName string
	// Dial, when set, dials broker connections (tests cut the network
	// with it).
	Dial func(ctx context.Context, network, host string) (net.Conn, error)
}

// RequestRetries and RetryTimeout bound kgo's own retries of a retriable
// request (metadata, offsets, transaction control; not produce requests),
// on both sides. Past them the error reaches Flightline, which classifies
// it (usually ErrUnavailable) and lets the pipeline retry from the sink's
// checkpoint.
const (
	RequestRetries = 5
	RetryTimeout   = 10 * time.Second
)

// Opts returns the kgo options of a client with this configuration, logging
// kgo's warnings and errors to log (nil: slog.Default()). Callers append
// their own (consumer, producer) options.
func (c Config) Opts(log *slog.Logger) []kgo.Opt {
	if log == nil {
		log = slog.Default()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.RequestRetries(RequestRetries),
		kgo.RetryTimeout(RetryTimeout),
		kgo.WithLogger(Logger{L: log}),
	}
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	if c.Dial != nil {
		opts = append(opts, kgo.Dialer(c.Dial))
	}
	return opts
}

// UseTLS connects over TLS with cfg (nil: plaintext). The Kafka source and
// sink call it with their Config's TLS.
func (c *Config) UseTLS(cfg *tls.Config) { c.TLS = cfg }

// UseSASLPlain authenticates with SASL/PLAIN as user. The Kafka source and
// sink call it for their Config's SASL "PLAIN".
func (c *Config) UseSASLPlain(user, pass string) {
	c.SASL, c.SASLName = plain.Auth{User: user, Pass: pass}.AsMechanism(), "PLAIN"
}

// UseSASLScram authenticates with the SASL/SCRAM mechanism named
// mechanism ("SCRAM-SHA-256" or "SCRAM-SHA-512") as user; another name is
// ErrInvalidInput and leaves c as it was. The Kafka source and sink call
// it for their Config's other SASL mechanisms.
func (c *Config) UseSASLScram(mechanism, user, pass string) error {
	a := scram.Auth{User: user, Pass: pass}
	var m sasl.Mechanism
	switch mechanism {
	case "SCRAM-SHA-256":
		m = a.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = a.AsSha512Mechanism()
	default:
		return fmt.Errorf("%w: SASL mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", flightline.ErrInvalidInput, mechanism)
	}
	c.SASL, c.SASLName = m, mechanism
	return nil
}

// UseSASL authenticates with the SASL mechanism named mechanism (any
// letter case) as user: "" for none, "PLAIN", or a SCRAM mechanism
// (UseSASLScram, whose error it returns). The Kafka source and sink call
// it with their Config's SASL, User and Password.
func (c *Config) UseSASL(mechanism, user, pass string) error {
	switch m := strings.ToUpper(mechanism); m {
	case "":
		return nil
	case "PLAIN":
		c.UseSASLPlain(user, pass)
		return nil
	default:
		return c.UseSASLScram(m, user, pass)
	}
}

// UseDialer dials broker connections with fn (tests cut the network with
// it).
func (c *Config) UseDialer(fn func(ctx context.Context, network, host string) (net.Conn, error)) {
	c.Dial = fn
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
