package config

import (
	"fmt"
	"net/url"
	"time"

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
	opts := []postgrescdc.Option{postgrescdc.Table(c.Table), postgrescdc.Logger(e.log)}
	if c.Slot != nil {
		opts = append(opts, postgrescdc.Slot(*c.Slot))
	}
	if c.Publication != nil {
		opts = append(opts, postgrescdc.Publication(*c.Publication))
	}
	if c.BatchRows != nil {
		opts = append(opts, postgrescdc.BatchRows(*c.BatchRows))
	}
	if c.Poll != nil {
		opts = append(opts, postgrescdc.PollInterval(*c.Poll))
	}
	if c.StatusInterval != nil {
		opts = append(opts, postgrescdc.StatusInterval(*c.StatusInterval))
	}
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
	s, err := postgrescdc.New(pgDSN(&d, c.Conn), opts...)
	return s, func() {}, err
}

func init() {
	sourceKinds["postgres-cdc"] = sourceOf(pgCDCSourceSpec, openPgCDCSource).at("dsn", "postgres://USER@HOST:PORT/DB (its query may hold libpq keys)")
}
