package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	pgsink "github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/flightsrc"
	pgsrc "github.com/flightline/flightline/flightsrc/postgres"
	"github.com/flightline/flightline/internal/spec"
)

// The PostgreSQL endpoints take the connection URL itself as the spec; the
// Flightline options are query keys removed before the URL reaches pgx:
//
//	postgres://user@host:5432/db?sslmode=disable&table=sales.orders
//
// Put the password in PGPASSWORD or ~/.pgpass (or passfile=) rather than
// on the command line, where other users can read it; the password key
// is for the config file, where it is written ${VAR}.

// pgConn are the libpq-style query keys passed through to pgx; any other
// key is an error, so a typo is not silently sent to the server.
var pgConn = &spec.Extra{
	Doc: "libpq connection keys, passed to the driver",
	Keys: []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslsni", "connect_timeout",
		"application_name", "target_session_attrs", "passfile", "search_path", "password"},
	Secret: []string{"sslpassword", "password"},
}

// pgSinkConfig is the postgres:// sink kind.
type pgSinkConfig struct {
	Table           *string           `spec:"table" doc:"[SCHEMA.]TABLE written when the pipeline names no target (--target overrides it)"`
	CheckpointTable string            `spec:"checkpoint_table" default:"__flightline_checkpoints" doc:"table holding the checkpoints"`
	MaxConns        *int              `spec:"max_conns" doc:"connection pool size (default: the driver's)"`
	Instance        *string           `spec:"instance" doc:"this writer's name among the pipeline's instances (scale-out: one per process of a consumer group); fencing is per instance, the checkpoint merged over them (default: the unnamed instance)"`
	Mode            *string           `spec:"mode" doc:"append (COPY every row, the default) or upsert (apply rows as changes by key: _op=delete deletes, others INSERT … ON CONFLICT DO UPDATE; _op, _lsn, _commit_time not written)"`
	Key             []string          `spec:"key" doc:"key columns of mode upsert (a created table gets them as primary key)"`
	Conn            map[string]string `spec:",extra"`
}

// pgSourceConfig is the postgres:// source kind.
type pgSourceConfig struct {
	Table     string            `spec:"table" doc:"[SCHEMA.]TABLE to read; the stream has its name (required)"`
	Watermark string            `spec:"watermark" doc:"column that grows with every insert or update (required)"`
	Key       string            `spec:"key" doc:"unique column ordering rows of equal watermark (required)"`
	Poll      *time.Duration    `spec:"poll" doc:"pause between polls once caught up (default 1s)"`
	BatchRows *int              `spec:"batch_rows" doc:"rows per batch at most (default 10000)"`
	Conn      map[string]string `spec:",extra"`
}

var (
	pgSinkSpec = spec.New[pgSinkConfig]("postgres", "postgres://USER@HOST:PORT/DB?table=[SCHEMA.]TABLE&…",
		"exactly-once PostgreSQL (binary COPY; password via PGPASSWORD or .pgpass)", pgConn)
	pgSourceSpec = spec.New[pgSourceConfig]("postgres", "postgres://USER@HOST:PORT/DB?table=…&watermark=COL&key=COL&…",
		"incremental PostgreSQL reads, ordered by (watermark, key)", pgConn)
)

// pgDSN is u with only the driver's keys in its query.
func pgDSN(u *url.URL, conn map[string]string) string {
	q := url.Values{}
	for k, v := range conn {
		q.Set(k, v)
	}
	d := *u
	d.RawQuery = q.Encode()
	return d.String()
}

func openPgSink(e env, u *url.URL, c pgSinkConfig) (flightsink.Sink, func(), error) {
	cfg := pgsink.Config{DSN: pgDSN(u, c.Conn), CheckpointTable: c.CheckpointTable, Key: c.Key}
	if c.Table != nil {
		cfg.Table = *c.Table
	}
	if c.MaxConns != nil {
		if *c.MaxConns < 1 {
			return nil, nil, fmt.Errorf("%w: MaxConns %d < 1", flightline.ErrInvalidInput, *c.MaxConns)
		}
		cfg.MaxConns = *c.MaxConns
	}
	if c.Instance != nil {
		if *c.Instance == "" { // the sink reads "" as the unnamed instance
			return nil, nil, fmt.Errorf("%w: empty instance name", flightline.ErrInvalidInput)
		}
		cfg.Instance = *c.Instance
	}
	if c.Mode != nil {
		cfg.Mode = *c.Mode
	}
	s, err := pgsink.New(e.ctx, cfg, pgsink.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func openPgSource(e env, u *url.URL, c pgSourceConfig) (flightsrc.Source, func(), error) {
	if c.Table == "" {
		return nil, nil, fmt.Errorf("postgres: the source needs table=")
	}
	cfg := pgsrc.Config{DSN: pgDSN(u, c.Conn), Tables: []pgsrc.Table{{Name: c.Table, Watermark: c.Watermark, Key: c.Key}}}
	// A bound given as a key must be a real one: 0 would mean the default.
	if c.Poll != nil {
		if *c.Poll <= 0 {
			return nil, nil, fmt.Errorf("%w: poll interval %v", flightline.ErrInvalidInput, *c.Poll)
		}
		cfg.PollInterval = *c.Poll
	}
	if c.BatchRows != nil {
		if *c.BatchRows < 1 {
			return nil, nil, fmt.Errorf("%w: batch rows %d", flightline.ErrInvalidInput, *c.BatchRows)
		}
		cfg.BatchRows = *c.BatchRows
	}
	s, err := pgsrc.New(e.ctx, cfg, pgsrc.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func init() {
	sinkKinds["postgres"] = sinkOf(pgSinkSpec, openPgSink).at("dsn", "postgres://USER@HOST:PORT/DB (its query may hold libpq keys)")
	sinkKinds["postgresql"] = sinkKind{spec: alias("postgresql://…  same as postgres://"), decl: sinkKinds["postgres"].decl, open: sinkKinds["postgres"].open}
	sourceKinds["postgres"] = sourceOf(pgSourceSpec, openPgSource).at("dsn", "postgres://USER@HOST:PORT/DB (its query may hold libpq keys)")
	sourceKinds["postgresql"] = sourceKind{spec: alias("postgresql://…  same as postgres://"), decl: sourceKinds["postgres"].decl, open: sourceKinds["postgres"].open}
}
