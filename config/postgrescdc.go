package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgrescdc"
	"github.com/flightline/flightline/internal/spec"
)

// pgCDCSourceConfig is the postgres-cdc:// source kind.
type pgCDCSourceConfig struct {
	Table          string            `spec:"table" doc:"[SCHEMA.]TABLE whose changes are read; the stream has its name (required; it needs a primary key)"`
	Slot           *string           `spec:"slot" doc:"logical replication slot, created when missing (default flightline_TABLE)"`
	Publication    *string           `spec:"publication" doc:"publication, created FOR TABLE when missing (default flightline_TABLE)"`
	BatchRows      *int              `spec:"batch_rows" doc:"rows per batch at most (default 10000)"`
	Poll           *time.Duration    `spec:"poll" doc:"idle time before a heartbeat batch (default 1s)"`
	StatusInterval *time.Duration    `spec:"status_interval" doc:"period of the standby status updates that confirm the committed position to the server (default 10s)"`
	Conn           map[string]string `spec:",extra"`
}

var pgCDCSourceSpec = spec.New[pgCDCSourceConfig]("postgres-cdc", "postgres-cdc://USER@HOST:PORT/DB?table=[SCHEMA.]TABLE&…",
	"PostgreSQL change data capture: a snapshot, then every insert, update and delete (logical replication, pgoutput)", pgConn)

func openPgCDCSource(e env, u *url.URL, c pgCDCSourceConfig) (flightsrc.Source, func(), error) {
	if c.Table == "" {
		return nil, nil, fmt.Errorf("postgres-cdc: the source needs table=")
	}
	cfg := postgrescdc.Config{Table: c.Table}
	if c.Slot != nil {
		cfg.Slot = *c.Slot
	}
	if c.Publication != nil {
		cfg.Publication = *c.Publication
	}
	// A bound given as a key must be a real one: 0 would mean the default.
	if c.BatchRows != nil {
		if *c.BatchRows < 1 {
			return nil, nil, fmt.Errorf("%w: BatchRows %d < 1", flightline.ErrInvalidInput, *c.BatchRows)
		}
		cfg.BatchRows = *c.BatchRows
	}
	if c.Poll != nil {
		if *c.Poll <= 0 {
			return nil, nil, fmt.Errorf("%w: PollInterval %s <= 0", flightline.ErrInvalidInput, *c.Poll)
		}
		cfg.PollInterval = *c.Poll
	}
	if c.StatusInterval != nil {
		if *c.StatusInterval <= 0 {
			return nil, nil, fmt.Errorf("%w: StatusInterval %s <= 0", flightline.ErrInvalidInput, *c.StatusInterval)
		}
		cfg.StatusInterval = *c.StatusInterval
	}
	opts := []postgrescdc.Option{postgrescdc.Logger(e.log)}
	if e.reg != nil {
		opts = append(opts, postgrescdc.Registerer(e.reg))
	}
	// postgres-cdc://… on the command line; in the config file the dsn key
	// holds a postgres:// URL (then u is postgres-cdc:postgres://…).
	d := *u
	if d.Opaque != "" {
		inner, err := url.Parse(d.Opaque)
		if err != nil {
			return nil, nil, fmt.Errorf("postgres-cdc: dsn: %w", err)
		}
		d = *inner
		for k, v := range d.Query() { // the dsn's own libpq keys (sslmode=…)
			if _, ok := c.Conn[k]; !ok && len(v) > 0 {
				if c.Conn == nil {
					c.Conn = map[string]string{}
				}
				c.Conn[k] = v[0]
			}
		}
	}
	if d.Scheme == "postgres-cdc" {
		d.Scheme = "postgres"
	}
	cfg.DSN = pgDSN(&d, c.Conn)
	s, err := postgrescdc.New(e.ctx, cfg, opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func init() {
	sourceKinds["postgres-cdc"] = sourceOf(pgCDCSourceSpec, openPgCDCSource).at("dsn", "postgres://USER@HOST:PORT/DB (its query may hold libpq keys)")
}
