package config

import (
	"fmt"
	"net/url"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/duckdb"
	"github.com/flightline/flightline/internal/spec"
)

// The DuckDB sink names its database file after the scheme:
//
//	duckdb:/data/lake.duckdb?table=orders
//	duckdb:md:analytics?table=orders     (MotherDuck; token in $motherduck_token)

// duckdbSinkConfig is the duckdb: sink kind.
type duckdbSinkConfig struct {
	Table           *string  `spec:"table" doc:"[SCHEMA.]TABLE written when the pipeline names no target (--target overrides it)"`
	CheckpointTable string   `spec:"checkpoint_table" default:"__flightline_checkpoints" doc:"table holding the checkpoints"`
	Library         *string  `spec:"library" doc:"path of DuckDB's libduckdb.so (default: $FLIGHTLINE_DUCKDB_LIB, else beside the flightline binary, else the copy integration/services/services.sh up duckdb caches)"`
	NewColumns      bool     `spec:"new_columns" default:"true" doc:"add a nullable column a batch brings to the table (false: refuse the batch)"`
	Mode            *string  `spec:"mode" enum:"append,upsert" doc:"append (every row, the default) or upsert (apply rows as changes by key, as the adbc sink's mode upsert: _op=delete deletes; _op, _lsn, _commit_time not written)"`
	Key             []string `spec:"key" doc:"key columns of mode upsert"`
}

var duckdbSpec = spec.New[duckdbSinkConfig]("duckdb", "duckdb:PATH?table=[SCHEMA.]TABLE",
	"a DuckDB database file, or md:NAME for MotherDuck (not run against the service); exactly-once, one transaction per batch", nil)

func init() {
	sinkKinds["duckdb"] = sinkOf(duckdbSpec, openDuckDB).at("path", "the database file (created if absent), or md:NAME for a MotherDuck database")
}

func openDuckDB(e env, u *url.URL, c duckdbSinkConfig) (flightsink.Sink, func(), error) {
	path := location(u)
	if path == "" {
		return nil, nil, fmt.Errorf("%w: duckdb: want duckdb:PATH (a database file) or duckdb:md:NAME", flightline.ErrInvalidInput)
	}
	cfg := duckdb.Config{Path: path, CheckpointTable: c.CheckpointTable, NoNewColumns: !c.NewColumns, Key: c.Key}
	if c.Mode != nil {
		cfg.Mode = *c.Mode
	}
	if c.Table != nil {
		cfg.Table = *c.Table
	}
	if c.Library != nil {
		cfg.Library = *c.Library
	}
	s, err := duckdb.New(e.ctx, cfg, duckdb.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return duckdbSink{Sink: s, path: path}, func() { _ = s.Close() }, nil
}

// duckdbSink says in `flightline check` which file it opened.
type duckdbSink struct {
	*duckdb.Sink
	path string
}

func (s duckdbSink) checkDetail(checkpoints string) string {
	return "DuckDB database " + s.path + " opened for writing (no other process holds it); " + checkpoints
}
