package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	sfsink "github.com/flightline/flightline/flightsink/snowflake"
	"github.com/flightline/flightline/flightsrc"
	sfsrc "github.com/flightline/flightline/flightsrc/snowflake"
	"github.com/flightline/flightline/internal/snowconn"
	"github.com/flightline/flightline/internal/spec"
)

// The Snowflake endpoints are written
//
//	snowflake://USER@ACCOUNT/DATABASE[/SCHEMA]?warehouse=WH&role=R&table=T&…
//
// Secrets never go in the URL: the password is read from the variable
// password_env names (default SNOWFLAKE_PASSWORD), the OAuth token from
// token_file or SNOWFLAKE_TOKEN, the private key from private_key_file and
// its passphrase from SNOWFLAKE_PRIVATE_KEY_PASSPHRASE.

// snowConn is the connection part of a snowflake: spec.
type snowConn struct {
	Warehouse      string         `spec:"warehouse" doc:"virtual warehouse COPY and queries run on"`
	Role           string         `spec:"role" doc:"role of the session (default: the user's default role)"`
	Auth           string         `spec:"auth" enum:"password,keypair,oauth" doc:"authentication; default: oauth with a token, keypair with private_key_file, else password"`
	PasswordEnv    string         `spec:"password_env" default:"SNOWFLAKE_PASSWORD" doc:"environment variable holding the password"`
	PrivateKeyFile string         `spec:"private_key_file" doc:"PEM file of the RSA key for key-pair (JWT) auth; passphrase in SNOWFLAKE_PRIVATE_KEY_PASSPHRASE"`
	TokenFile      string         `spec:"token_file" doc:"file holding the OAuth access token (or set SNOWFLAKE_TOKEN)"`
	Host           string         `spec:"host" doc:"endpoint host, when not derived from the account (private link, emulator)"`
	Port           int            `spec:"port" doc:"endpoint port (with host)"`
	Protocol       string         `spec:"protocol" enum:"https,http" doc:"endpoint protocol (with host; default https)"`
	Timeout        *time.Duration `spec:"timeout" doc:"bound on one login or request, the driver's retries included (default 60s)"`
	Retries        *int           `spec:"retries" doc:"the driver's retries of one HTTP request (default 2)"`
	LockTimeout    *time.Duration `spec:"lock_timeout" doc:"session LOCK_TIMEOUT (default 60s)"`
}

// config resolves u and c into a snowconn.Config, secrets from the
// environment or files.
func (c snowConn) config(u *url.URL) (snowconn.Config, error) {
	cfg := snowconn.Config{
		Account: u.Host, User: u.User.Username(),
		Warehouse: c.Warehouse, Role: c.Role, Auth: snowconn.Auth(c.Auth),
		Host: c.Host, Port: c.Port, Protocol: c.Protocol,
		PrivateKeyFile: c.PrivateKeyFile,
	}
	if _, has := u.User.Password(); has {
		return cfg, fmt.Errorf("snowflake: a password in the URL is refused (it would show in process lists); set %s", c.PasswordEnv)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) > 2 || parts[0] == "" {
		return cfg, fmt.Errorf("snowflake: the path is /DATABASE or /DATABASE/SCHEMA, not %q", u.Path)
	}
	cfg.Database = parts[0]
	if len(parts) == 2 {
		cfg.Schema = parts[1]
	}
	if c.Timeout != nil {
		cfg.Timeout = *c.Timeout
	}
	if c.Retries != nil {
		cfg.Retries = *c.Retries
	}
	if c.LockTimeout != nil {
		cfg.LockTimeout = *c.LockTimeout
	}
	if c.TokenFile != "" {
		tok, err := ReadToken("token_file", c.TokenFile, "")
		if err != nil {
			return cfg, fmt.Errorf("snowflake: %w", err)
		}
		cfg.Token = tok
	} else {
		cfg.Token = os.Getenv("SNOWFLAKE_TOKEN")
	}
	cfg.Passphrase = os.Getenv("SNOWFLAKE_PRIVATE_KEY_PASSPHRASE")
	cfg.Password = os.Getenv(c.PasswordEnv)
	return cfg, nil
}

// sfSinkConfig is the snowflake: sink kind.
type sfSinkConfig struct {
	snowConn
	Table           *string        `spec:"table" doc:"[[DB.]SCHEMA.]TABLE written when the pipeline names no target"`
	CheckpointTable string         `spec:"checkpoint_table" default:"__flightline_checkpoints" doc:"table holding the checkpoints (created if absent)"`
	Stage           string         `spec:"stage" default:"FLIGHTLINE_STAGE" doc:"internal stage batches are PUT to (created if absent)"`
	Match           string         `spec:"match" enum:"case_sensitive,case_insensitive" default:"case_sensitive" doc:"COPY's MATCH_BY_COLUMN_NAME"`
	RetryFor        *time.Duration `spec:"retry_for" doc:"how long session and network failures are retried before UNAVAILABLE (default 2m)"`
	MaxConns        *int           `spec:"max_conns" doc:"sessions at most (default 8)"`
}

var sfSinkSpec = spec.New[sfSinkConfig]("snowflake", "snowflake://USER@ACCOUNT/DATABASE[/SCHEMA]?warehouse=WH&table=T&…",
	"exactly-once Snowflake (Parquet PUT, then COPY and checkpoint in one transaction)", nil)

func openSfSink(e env, u *url.URL, c sfSinkConfig) (flightsink.Sink, func(), error) {
	cfg, err := c.config(u)
	if err != nil {
		return nil, nil, err
	}
	// The Config reads "" and 0 as the default; an empty stage= or
	// checkpoint_table= and a max_conns=0 written are refused, as before.
	if c.Stage == "" || c.CheckpointTable == "" {
		return nil, nil, fmt.Errorf("%w: snowflake sink: stage=%q checkpoint_table=%q: empty name", flightline.ErrInvalidInput, c.Stage, c.CheckpointTable)
	}
	sc := sfsink.Config{Config: cfg, CheckpointTable: quoteIfPlain(c.CheckpointTable), Stage: c.Stage, Match: c.Match}
	if c.Table != nil {
		sc.Table = *c.Table
	}
	if c.RetryFor != nil {
		sc.RetryFor = *c.RetryFor // 0 keeps the default, as it did
	}
	if c.MaxConns != nil {
		if *c.MaxConns < 2 {
			return nil, nil, fmt.Errorf("%w: snowflake sink: max_conns %d < 2 (a batch's PUT needs a second session beside its transaction)", flightline.ErrInvalidInput, *c.MaxConns)
		}
		sc.MaxConns = *c.MaxConns
	}
	s, err := sfsink.New(e.ctx, sc, sfsink.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

// quoteIfPlain keeps the default checkpoint table's lower-case name, which
// Snowflake would upper-case unquoted.
func quoteIfPlain(name string) string {
	if name == "__flightline_checkpoints" {
		return `"` + name + `"`
	}
	return name
}

// sfSourceConfig is the snowflake: source kind.
type sfSourceConfig struct {
	snowConn
	Table     string         `spec:"table" doc:"[[DB.]SCHEMA.]TABLE to read; the stream has its name (required)"`
	Cursor    string         `spec:"cursor" doc:"column that grows with every new row, as Snowflake names it (ID for an unquoted id) (required)"`
	Tiebreak  string         `spec:"tiebreak" doc:"column making (cursor, tiebreak) unique; the cursor itself when it is unique (required)"`
	Poll      *time.Duration `spec:"poll" doc:"pause between polls once caught up (default 1s)"`
	BatchRows *int           `spec:"batch_rows" doc:"rows per batch at most (default 10000)"`
}

var sfSourceSpec = spec.New[sfSourceConfig]("snowflake", "snowflake://USER@ACCOUNT/DATABASE[/SCHEMA]?warehouse=WH&table=T&cursor=C&tiebreak=K&…",
	"incremental Snowflake reads by (cursor, tiebreak), as Arrow", nil)

func openSfSource(e env, u *url.URL, c sfSourceConfig) (flightsrc.Source, func(), error) {
	if c.Table == "" || c.Cursor == "" || c.Tiebreak == "" {
		return nil, nil, fmt.Errorf("snowflake: the source needs table=, cursor= and tiebreak=")
	}
	cfg, err := c.config(u)
	if err != nil {
		return nil, nil, err
	}
	sc := sfsrc.Config{Config: cfg, Tables: []sfsrc.Table{{Name: c.Table, Cursor: c.Cursor, Tiebreak: c.Tiebreak}}}
	// The Config reads 0 as the default; a 0 written is refused, as before.
	if c.Poll != nil {
		if *c.Poll <= 0 {
			return nil, nil, fmt.Errorf("%w: snowflake source: poll %v: want a positive duration", flightline.ErrInvalidInput, *c.Poll)
		}
		sc.PollInterval = *c.Poll
	}
	if c.BatchRows != nil {
		if *c.BatchRows < 1 {
			return nil, nil, fmt.Errorf("%w: snowflake source: batch_rows %d: want at least 1", flightline.ErrInvalidInput, *c.BatchRows)
		}
		sc.BatchRows = *c.BatchRows
	}
	s, err := sfsrc.New(e.ctx, sc, sfsrc.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func init() {
	sinkKinds["snowflake"] = sinkOf(sfSinkSpec, openSfSink)
	sourceKinds["snowflake"] = sourceOf(sfSourceSpec, openSfSource)
}
