package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/flightline/flightline/flightsink"
	amqpsink "github.com/flightline/flightline/flightsink/amqp"
	"github.com/flightline/flightline/internal/spec"
)

// amqpSinkConfig is the amqp: sink kind (AMQP 0-9-1, RabbitMQ). The
// password never goes in the URL: it is read from the variable
// password_env names (default AMQP_PASSWORD); in YAML, ${VAR} works too
// through password_env's variable.
type amqpSinkConfig struct {
	Exchange         string         `spec:"exchange" doc:"exchange every message is published to (default: the default exchange)"`
	RoutingKey       string         `spec:"routing_key" doc:"routing key when the pipeline names no target (--target overrides it)"`
	RoutingKeyColumn *string        `spec:"routing_key_column" doc:"utf8 column holding each row's routing key (overrides target and routing_key)"`
	Headers          *string        `spec:"headers" doc:"comma-separated columns copied into each message's headers"`
	PasswordEnv      string         `spec:"password_env" default:"AMQP_PASSWORD" doc:"environment variable holding the password"`
	ConfirmTimeout   *time.Duration `spec:"confirm_timeout" doc:"longest wait for a batch's publisher confirms (default 30s)"`
}

var amqpSpec = spec.New[amqpSinkConfig]("amqp", "amqp://USER@HOST:PORT/VHOST?exchange=X&routing_key=K",
	"at-least-once: one JSON message per row, publisher confirms, mandatory; a deterministic message_id per row for consumer dedup", nil)

func init() {
	sinkKinds["amqp"] = sinkOf(amqpSpec, openAMQP).at("url", "amqp://USER@HOST:PORT/VHOST (no password: see password_env)")
	sinkKinds["amqps"] = sinkKinds["amqp"]
}

// amqpURL builds the broker URL from u (amqp:// or amqps://, without a
// password) and the password from the environment.
func (c amqpSinkConfig) amqpURL(u *url.URL) (string, error) {
	if u.Host == "" {
		return "", fmt.Errorf("amqp: want amqp://USER@HOST:PORT/VHOST, e.g. amqp://guest@127.0.0.1:5672/")
	}
	if _, has := u.User.Password(); has {
		return "", fmt.Errorf("amqp: a password in the URL is refused (it would show in process lists); set %s", c.PasswordEnv)
	}
	b := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if b.Scheme != "amqps" {
		b.Scheme = "amqp"
	}
	if u.User != nil {
		if pass, ok := os.LookupEnv(c.PasswordEnv); ok {
			b.User = url.UserPassword(u.User.Username(), pass)
		} else {
			b.User = url.User(u.User.Username())
		}
	}
	return b.String(), nil
}

func openAMQP(e env, u *url.URL, c amqpSinkConfig) (flightsink.Sink, func(), error) {
	addr, err := c.amqpURL(u)
	if err != nil {
		return nil, nil, err
	}
	cfg := amqpsink.Config{URL: addr, Exchange: c.Exchange, RoutingKey: c.RoutingKey}
	if c.RoutingKeyColumn != nil {
		cfg.RoutingKeyColumn = *c.RoutingKeyColumn
	}
	if c.Headers != nil {
		for _, h := range strings.Split(*c.Headers, ",") {
			if h = strings.TrimSpace(h); h != "" {
				cfg.Headers = append(cfg.Headers, h)
			}
		}
	}
	if c.ConfirmTimeout != nil {
		cfg.ConfirmTimeout = *c.ConfirmTimeout
	}
	s, err := amqpsink.New(e.ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return amqpSink{s}, func() { _ = s.Close() }, nil
}

// amqpSink says on its `flightline check` line what it guarantees.
type amqpSink struct{ *amqpsink.Sink }

func (s amqpSink) checkDetail(string) string {
	return "connected with the configured credentials; at-least-once (publisher confirms; no checkpoint in the broker: the source's committed position is the resume authority; message_id per row for consumer dedup)"
}
