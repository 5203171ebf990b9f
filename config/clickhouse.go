package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	chsink "github.com/flightline/flightline/flightsink/clickhouse"
	"github.com/flightline/flightline/internal/spec"
)

// chSinkConfig is the clickhouse:// sink kind: ClickHouse's HTTP
// interface (port 8123, 8443 with secure=true). The password never goes in
// the URL: it is read from the variable password_env names (default
// CLICKHOUSE_PASSWORD).
type chSinkConfig struct {
	Table           *string `spec:"table" doc:"[DB.]TABLE written when the pipeline names no target (--target overrides it)"`
	OrderBy         string  `spec:"order_by" default:"tuple()" doc:"ORDER BY of tables the sink creates (SQL)"`
	DedupWindow     int     `spec:"dedup_window" default:"1000" doc:"non_replicated_deduplication_window of tables the sink creates: how many recent insert blocks a replay is deduplicated against"`
	CheckpointTable string  `spec:"checkpoint_table" default:"flightline_checkpoints" doc:"ReplacingMergeTree table holding the checkpoints"`
	PasswordEnv     string  `spec:"password_env" default:"CLICKHOUSE_PASSWORD" doc:"environment variable holding the password"`
	Secure          bool    `spec:"secure" doc:"HTTPS instead of HTTP"`
}

var chSinkSpec = spec.New[chSinkConfig]("clickhouse", "clickhouse://USER@HOST:PORT/DB?table=T&order_by=…",
	"ClickHouse over HTTP, INSERT … FORMAT ArrowStream; exactly-once by insert deduplication within the dedup window (see docs/sinks/clickhouse.md)", nil)

func init() {
	sinkKinds["clickhouse"] = sinkOf(chSinkSpec, openClickHouse).at("url", "clickhouse://USER@HOST:PORT/DB (the HTTP port; no password: see password_env)")
}

func openClickHouse(e env, u *url.URL, c chSinkConfig) (flightsink.Sink, func(), error) {
	if u.Host == "" {
		return nil, nil, fmt.Errorf("clickhouse: want clickhouse://USER@HOST:PORT/DB, e.g. clickhouse://default@127.0.0.1:8123/default")
	}
	if _, has := u.User.Password(); has {
		return nil, nil, fmt.Errorf("clickhouse: a password in the URL is refused (it would show in process lists); set %s", c.PasswordEnv)
	}
	scheme := "http"
	if c.Secure {
		scheme = "https"
	}
	user := "default"
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	if c.DedupWindow < 1 { // the sink reads 0 as its default; a URL's 0 is a mistake
		return nil, nil, fmt.Errorf("%w: dedup window %d < 1", flightline.ErrInvalidInput, c.DedupWindow)
	}
	if c.CheckpointTable == "" {
		return nil, nil, fmt.Errorf("%w: empty checkpoint table", flightline.ErrInvalidInput)
	}
	cfg := chsink.Config{Endpoint: scheme + "://" + u.Host, User: user, Password: os.Getenv(c.PasswordEnv),
		OrderBy: c.OrderBy, DedupWindow: c.DedupWindow, CheckpointTable: c.CheckpointTable,
		Database: strings.Trim(location(u), "/")}
	if c.Table != nil {
		cfg.Table = *c.Table
	}
	s, err := chsink.New(e.ctx, cfg, chsink.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return chSink{s}, func() { _ = s.Close() }, nil
}

// chSink says on its `flightline check` line what it contacted and
// guarantees.
type chSink struct{ *chsink.Sink }

func (s chSink) checkDetail(line string) string {
	return line + " (connected with the configured credentials; exactly-once within the dedup window: see docs/sinks/clickhouse.md)"
}
