package rabbitstream

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
)

// Config is what a rabbitmq-stream sink is given in its URL or YAML.
type Config struct {
	// URL is rabbitmq-stream://user:password@host:port[/STREAM][?vhost=V].
	// The path, when given, is the default stream; the vhost defaults to
	// "/". (TLS is not offered yet.)
	URL string
	// Stream is the stream of a pipeline without a Target (overrides the
	// URL's path).
	Stream string
	// NoDeclare, when set, requires the streams to exist; otherwise Open
	// creates a missing stream with the broker's defaults.
	NoDeclare bool
	// ConfirmTimeout bounds the wait for a batch's confirms and for reading
	// the stream on Open and Checkpoint (default 30s).
	ConfirmTimeout time.Duration
}

// Option configures a Sink beyond its Config.
type Option func(*options)

type options struct {
	log *slog.Logger
}

// Logger sets the logger that receives the warning about a batch that
// came back different after a crash (default slog.Default()).
func Logger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// Sink appends rows to RabbitMQ streams. Safe for concurrent use; every
// Writer has its own connection.
type Sink struct {
	cfg               Config
	log               *slog.Logger
	host, port        string
	user, pass, vhost string
	stream            string
}

var (
	_ flightsink.Sink       = (*Sink)(nil)
	_ flightsink.Guaranteer = (*Sink)(nil)
)

// New returns a Sink for cfg. It does not contact the broker: an
// unreachable broker (flightline.ErrUnavailable) or refused credentials
// (flightline.ErrUnauthenticated) surface on Open, Checkpoint and Ping.
// It validates cfg.URL (scheme, host, known parameters). Close releases
// nothing: every Writer owns its connection.
func New(_ context.Context, cfg Config, opts ...Option) (*Sink, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: rabbitmq-stream sink: bad URL", flightline.ErrInvalidInput)
	}
	s := &Sink{cfg: cfg, host: u.Hostname(), port: u.Port(), vhost: "/"}
	if u.Scheme != "rabbitmq-stream" {
		return nil, fmt.Errorf("%w: rabbitmq-stream sink: scheme %q, want rabbitmq-stream", flightline.ErrInvalidInput, u.Scheme)
	}
	if s.host == "" {
		return nil, fmt.Errorf("%w: rabbitmq-stream sink: URL without a host", flightline.ErrInvalidInput)
	}
	if s.port == "" {
		s.port = "5552"
	}
	if u.User != nil {
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
	}
	if s.user == "" {
		s.user, s.pass = "guest", "guest"
	}
	q := u.Query()
	for k := range q {
		if k != "vhost" {
			return nil, fmt.Errorf("%w: rabbitmq-stream sink: unknown URL parameter %q (known: vhost)", flightline.ErrInvalidInput, k)
		}
	}
	if v := q.Get("vhost"); v != "" {
		s.vhost = v
	}
	s.stream = strings.Trim(u.Path, "/")
	if cfg.Stream != "" {
		s.stream = cfg.Stream
	}
	if cfg.ConfirmTimeout <= 0 {
		s.cfg.ConfirmTimeout = 30 * time.Second
	}
	s.log = o.log
	if s.log == nil {
		s.log = slog.Default()
	}
	return s, nil
}

// Close releases nothing (every Writer owns its connection and closes it)
// and returns nil.
func (s *Sink) Close() error { return nil }

// Guarantee implements flightsink.Guaranteer: exactly-once (see the
// package documentation for the one case where rows may repeat).
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// streamOf is the stream a pipeline writes: its Target, else the
// configured one.
func (s *Sink) streamOf(p flightsink.Pipeline) (string, error) {
	name := p.Target
	if name == "" {
		name = s.stream
	}
	if name == "" {
		return "", fmt.Errorf("%w: rabbitmq-stream sink: no stream: give one in the URL's path, as stream, or as the pipeline's target", flightline.ErrInvalidInput)
	}
	if len(name) > 255 {
		return "", fmt.Errorf("%w: rabbitmq-stream sink: stream name longer than 255 bytes", flightline.ErrInvalidInput)
	}
	return name, nil
}

// ProducerName is the producer name the sink publishes p's messages to
// stream with.
func ProducerName(p flightsink.Pipeline, streamName string) string {
	return "flightline/" + p.ID + "/" + streamName
}

// WriterTag is the <writer> part of the message-id of every message the
// sink publishes under producer name name.
func WriterTag(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:8])
}

// connect opens an Environment (one connection to the broker, more for
// producers and consumers), mapping refused credentials to
// ErrUnauthenticated and everything else to ErrUnavailable.
func (s *Sink) connect(ctx context.Context) (*stream.Environment, error) {
	opts := stream.NewEnvironmentOptions().SetHost(s.host).SetPort(atoiOr(s.port, 5552)).
		SetUser(s.user).SetPassword(s.pass).SetVHost(s.vhost).SetRPCTimeout(s.cfg.ConfirmTimeout).
		// The client's default socket buffers are 8 KiB (SO_RCVBUF and
		// SO_SNDBUF): reading a stream back ran at about one 100 KB chunk
		// a second on loopback. 0 leaves them to the kernel's autotuning
		// (2500 messages: 4.8 s → 13 ms).
		SetReadBuffer(0).SetWriteBuffer(0)
	// The client does not take a context: refuse early when the address
	// does not answer at all, so an unreachable broker fails fast.
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(s.host, s.port))
	if err != nil {
		return nil, fmt.Errorf("%w: rabbitmq-stream sink: %v", flightline.ErrUnavailable, err)
	}
	_ = c.Close()
	env, err := stream.NewEnvironment(opts)
	if err != nil {
		return nil, classify("connect", err)
	}
	return env, nil
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

// classify maps a client error to the flightline vocabulary. The client's
// errors do not carry the password.
func classify(what string, err error) error {
	switch {
	case errors.Is(err, stream.AuthenticationFailure), errors.Is(err, stream.AuthenticationFailureLoopbackError):
		return fmt.Errorf("%w: rabbitmq-stream sink: %s: %v", flightline.ErrUnauthenticated, what, err)
	case errors.Is(err, stream.VirtualHostAccessFailure), errors.Is(err, stream.CodeAccessRefused):
		return fmt.Errorf("%w: rabbitmq-stream sink: %s: %v", flightline.ErrPermissionDenied, what, err)
	case errors.Is(err, stream.StreamDoesNotExist):
		return fmt.Errorf("%w: rabbitmq-stream sink: %s: %v", flightline.ErrNotFound, what, err)
	case errors.Is(err, stream.PreconditionFailed):
		return fmt.Errorf("%w: rabbitmq-stream sink: %s: %v", flightline.ErrFailedPrecondition, what, err)
	}
	return fmt.Errorf("%w: rabbitmq-stream sink: %s: %v", flightline.ErrUnavailable, what, err)
}

// Ping connects to the broker and closes the connection.
func (s *Sink) Ping(ctx context.Context) error {
	env, err := s.connect(ctx)
	if err != nil {
		return err
	}
	return env.Close()
}

// Checkpoint returns the checkpoint of the last batch of p whose rows are
// all in the stream, or nil. It publishes nothing and fences no one.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	name, err := s.streamOf(p)
	if err != nil {
		return nil, err
	}
	env, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	if ok, err := env.StreamExists(name); err != nil {
		return nil, classify("stream exists", err)
	} else if !ok {
		return nil, nil
	}
	producer := ProducerName(p, name)
	last, err := env.QuerySequence(producer, name)
	if err != nil {
		return nil, classify("query sequence", err)
	}
	if last <= 0 {
		return nil, nil
	}
	st, err := scan(ctx, env, name, WriterTag(producer), last, s.cfg.ConfirmTimeout)
	if err != nil {
		return nil, err
	}
	return st.committed, nil
}

// Open claims p (see the package documentation) and returns a Writer and
// the checkpoint of p's last committed batch.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	name, err := s.streamOf(p)
	if err != nil {
		return nil, nil, err
	}
	env, err := s.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	w, err := s.open(ctx, env, p, name)
	if err != nil {
		_ = env.Close()
		return nil, nil, err
	}
	return w, w.st.committed, nil
}

func (s *Sink) open(ctx context.Context, env *stream.Environment, p flightsink.Pipeline, name string) (*Writer, error) {
	ok, err := env.StreamExists(name)
	if err != nil {
		return nil, classify("stream exists", err)
	}
	if !ok {
		if s.cfg.NoDeclare {
			return nil, fmt.Errorf("%w: rabbitmq-stream sink: stream %q does not exist (declare is off)", flightline.ErrNotFound, name)
		}
		if err := env.DeclareStream(name, stream.NewStreamOptions()); err != nil && !errors.Is(err, stream.StreamAlreadyExists) {
			return nil, classify("declare stream", err)
		}
	}
	producerName := ProducerName(p, name)
	last, err := env.QuerySequence(producerName, name)
	if err != nil {
		return nil, classify("query sequence", err)
	}
	epoch := last>>epochShift + 1
	if epoch >= 1<<(63-epochShift) {
		return nil, fmt.Errorf("%w: rabbitmq-stream sink: producer %q has used every epoch", flightline.ErrInternal, producerName)
	}
	prod, err := env.NewProducer(name, stream.NewProducerOptions().SetProducerName(producerName).
		SetConfirmationTimeOut(s.cfg.ConfirmTimeout).SetClientProvidedName("flightline"))
	if err != nil {
		return nil, classify("new producer", err)
	}
	w := &Writer{s: s, p: p, env: env, prod: prod, stream: name, name: producerName, tag: WriterTag(producerName),
		box: newConfirmBox(prod.NotifyPublishConfirmation()), token: newToken()}
	fail := func(err error) (*Writer, error) {
		_ = prod.Close()
		return nil, err
	}
	claimID := epoch << epochShift
	if err := w.publish(ctx, []*pending{w.claim(claimID)}); err != nil {
		return fail(err)
	}
	now, err := env.QuerySequence(producerName, name)
	if err != nil {
		return fail(classify("query sequence", err))
	}
	st, err := scan(ctx, env, name, w.tag, now, s.cfg.ConfirmTimeout)
	if err != nil {
		return fail(err)
	}
	if st.claim != w.token {
		return fail(fmt.Errorf("%w: rabbitmq-stream sink: another writer claimed %s on stream %q at the same time", flightline.ErrConflict, p.ID, name))
	}
	if now != claimID {
		// Our claim is the last claim and yet the name moved on: only an
		// older writer's messages with higher ids could do that, and ids
		// only grow. Refuse rather than guess.
		return fail(fmt.Errorf("%w: rabbitmq-stream sink: producer %q moved to id %d past this writer's claim %d", flightline.ErrConflict, producerName, now, claimID))
	}
	w.st = st
	w.last = claimID
	return w, nil
}

// epochShift splits a publishing id into epoch (high bits) and sequence.
const epochShift = 40

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
