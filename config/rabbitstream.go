package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/rabbitstream"
	"github.com/flightline/flightline/internal/spec"
)

// rabbitStreamConfig is the rabbitmq-stream: sink kind (RabbitMQ streams
// over the stream protocol). As with amqp:, the password never goes in
// the URL: it is read from the variable password_env names.
type rabbitStreamConfig struct {
	Stream         *string        `spec:"stream" doc:"stream of a pipeline without a target, when the URL's path names none (--target overrides it)"`
	Vhost          string         `spec:"vhost" default:"/" doc:"virtual host"`
	Declare        bool           `spec:"declare" default:"true" doc:"create a missing stream with the broker's defaults; false: a missing stream is an error"`
	PasswordEnv    string         `spec:"password_env" default:"RABBITMQ_STREAM_PASSWORD" doc:"environment variable holding the password"`
	ConfirmTimeout *time.Duration `spec:"confirm_timeout" doc:"longest wait for a batch's confirms, and for reading the stream back on open (default 30s)"`
}

var rabbitStreamSpec = spec.New[rabbitStreamConfig]("rabbitmq-stream", "rabbitmq-stream://USER@HOST:PORT/STREAM?vhost=V",
	"exactly-once: one JSON message per row; producer deduplication, a claim per writer fences older ones; the checkpoint read back from the stream", nil)

func init() {
	sinkKinds["rabbitmq-stream"] = sinkOf(rabbitStreamSpec, openRabbitStream).at("url", "rabbitmq-stream://USER@HOST:PORT/STREAM (no password: see password_env)")
}

func openRabbitStream(e env, u *url.URL, c rabbitStreamConfig) (flightsink.Sink, func(), error) {
	if u.Host == "" {
		return nil, nil, fmt.Errorf("rabbitmq-stream: want rabbitmq-stream://USER@HOST:PORT/STREAM, e.g. rabbitmq-stream://guest@127.0.0.1:5552/events")
	}
	if _, has := u.User.Password(); has {
		return nil, nil, fmt.Errorf("rabbitmq-stream: a password in the URL is refused (it would show in process lists); set %s", c.PasswordEnv)
	}
	b := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.User != nil {
		if pass, ok := os.LookupEnv(c.PasswordEnv); ok {
			b.User = url.UserPassword(u.User.Username(), pass)
		} else {
			b.User = url.User(u.User.Username())
		}
	}
	if c.Vhost != "/" {
		b.RawQuery = url.Values{"vhost": {c.Vhost}}.Encode()
	}
	cfg := rabbitstream.Config{URL: b.String(), NoDeclare: !c.Declare}
	if c.Stream != nil {
		if strings.Trim(u.Path, "/") != "" {
			return nil, nil, fmt.Errorf("rabbitmq-stream: the stream is named twice, in the URL's path and as stream")
		}
		cfg.Stream = *c.Stream
	}
	if c.ConfirmTimeout != nil {
		cfg.ConfirmTimeout = *c.ConfirmTimeout
	}
	s, err := rabbitstream.New(e.ctx, cfg, rabbitstream.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return rabbitStreamSink{s}, func() { _ = s.Close() }, nil
}

// rabbitStreamSink says on its `flightline check` line what it guarantees.
type rabbitStreamSink struct{ *rabbitstream.Sink }

func (s rabbitStreamSink) checkDetail(checkpoints string) string {
	return "exactly-once (producer deduplication; a claim message per writer fences older ones; a batch cut by a crash is completed when the source re-forms it, else its rows already written may repeat); " + checkpoints
}
