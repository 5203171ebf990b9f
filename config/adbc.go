package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/flightline/flightline"

	"github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/flightsink"
	adbcsink "github.com/flightline/flightline/flightsink/adbc"
	"github.com/flightline/flightline/flightsrc"
	adbcsrc "github.com/flightline/flightline/flightsrc/adbc"
	"github.com/flightline/flightline/internal/spec"
)

// The ADBC endpoints name the driver after the scheme and the database in
// uri= (percent-encoded when it has a query of its own):
//
//	adbc:/path/libadbc_driver_postgresql.so?uri=postgresql://u@h/db&table=t
//	adbc:postgresql?uri=…            (a driver manifest found through ADBC_DRIVER_PATH)
//	adbc:flightsql?uri=grpc://host:port&table=t
//
// C drivers need a binary built with cgo; flightsql is always there.

// adbcDB are the options every ADBC endpoint shares.
type adbcDB struct {
	URI      string  `spec:"uri" doc:"database URI in the driver's form (postgresql://…, file:/path.db, grpc://host:port)"`
	Username *string `spec:"username" doc:"user name, where the driver takes it apart from the URI"`
	Password *string `spec:"password" secret:"true" doc:"password, where the driver takes it apart from the URI"`
	Dialect  *string `spec:"dialect" enum:"postgres,sqlite,generic" doc:"SQL dialect (default: inferred from the driver's vendor name)"`
}

// adbcSinkConfig is the adbc: sink kind.
type adbcSinkConfig struct {
	adbcDB
	Table           *string  `spec:"table" doc:"[SCHEMA.]TABLE written when the pipeline names no target (--target overrides it)"`
	CheckpointTable string   `spec:"checkpoint_table" default:"__flightline_checkpoints" doc:"table holding the checkpoints"`
	AtLeastOnce     bool     `spec:"at_least_once" default:"false" doc:"accept a driver without transactions: no checkpoint, replays write again"`
	Mode            *string  `spec:"mode" enum:"append,upsert" doc:"append (ingest every row, the default) or upsert (apply rows as changes by key through a temporary stage: the key's rows deleted, its last change inserted unless _op=delete; no unique key needed; _op, _lsn, _commit_time not written; needs transactions)"`
	Key             []string `spec:"key" doc:"key columns of mode upsert"`
}

// adbcSourceConfig is the adbc: source kind.
type adbcSourceConfig struct {
	adbcDB
	Table     string         `spec:"table" doc:"[SCHEMA.]TABLE to read; the stream has its name (required)"`
	Cursor    string         `spec:"cursor" doc:"column that grows with every insert or update (required)"`
	Tiebreak  string         `spec:"tiebreak" doc:"column making (cursor, tiebreak) unique; the cursor itself when unique (required)"`
	Poll      *time.Duration `spec:"poll" doc:"pause between polls once caught up (default 1s)"`
	BatchRows *int           `spec:"batch_rows" doc:"rows per query page at most (default 10000)"`
}

var (
	adbcSinkSpec = spec.New[adbcSinkConfig]("adbc", "adbc:DRIVER?uri=URI&table=[SCHEMA.]TABLE&…",
		"any database with an ADBC driver (DRIVER: a .so path, a manifest name, or flightsql); exactly-once where the driver has transactions", nil)
	adbcSourceSpec = spec.New[adbcSourceConfig]("adbc", "adbc:DRIVER?uri=URI&table=…&cursor=COL&tiebreak=COL&…",
		"incremental reads through an ADBC driver, ordered by (cursor, tiebreak)", nil)
)

// adbcConfig turns the spec into a Config: the driver is what follows the
// scheme.
func adbcConfig(u *url.URL, c adbcDB) (adbc.Config, error) {
	drv := u.Opaque
	if drv == "" {
		drv = u.Path
	}
	if drv == "" {
		return adbc.Config{}, fmt.Errorf("%w: adbc: no driver: want adbc:DRIVER?uri=… (a .so path, a manifest name, or flightsql)", flightline.ErrInvalidInput)
	}
	cfg := adbc.Config{Driver: drv, URI: c.URI, Options: map[string]string{}}
	if c.Username != nil {
		cfg.Options["username"] = *c.Username
	}
	if c.Password != nil {
		cfg.Options["password"] = *c.Password
	}
	if c.Dialect != nil {
		cfg.Dialect = *c.Dialect
	}
	return cfg, nil
}

func openAdbcSink(e env, u *url.URL, c adbcSinkConfig) (flightsink.Sink, func(), error) {
	cfg, err := adbcConfig(u, c.adbcDB)
	if err != nil {
		return nil, nil, err
	}
	// The Config reads "" as the default; an empty checkpoint_table=
	// written is refused, as before.
	if c.CheckpointTable == "" {
		return nil, nil, fmt.Errorf("%w: adbc sink: checkpoint_table=\"\": empty table name", flightline.ErrInvalidInput)
	}
	sc := adbcsink.Config{Config: cfg, CheckpointTable: c.CheckpointTable, AtLeastOnce: c.AtLeastOnce, Key: c.Key}
	if c.Mode != nil {
		sc.Mode = *c.Mode
	}
	if c.Table != nil {
		sc.Table = *c.Table
	}
	s, err := adbcsink.New(e.ctx, sc, adbcsink.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func openAdbcSource(e env, u *url.URL, c adbcSourceConfig) (flightsrc.Source, func(), error) {
	if c.Table == "" || c.Cursor == "" || c.Tiebreak == "" {
		return nil, nil, fmt.Errorf("%w: adbc: the source needs table=, cursor= and tiebreak=", flightline.ErrInvalidInput)
	}
	cfg, err := adbcConfig(u, c.adbcDB)
	if err != nil {
		return nil, nil, err
	}
	sc := adbcsrc.Config{Config: cfg, Tables: []adbcsrc.Table{{Name: c.Table, Cursor: c.Cursor, Tiebreak: c.Tiebreak}}}
	// The Config reads 0 as the default; a 0 written is refused, as before.
	if c.Poll != nil {
		if *c.Poll <= 0 {
			return nil, nil, fmt.Errorf("%w: adbc source: poll %v: want a positive duration", flightline.ErrInvalidInput, *c.Poll)
		}
		sc.PollInterval = *c.Poll
	}
	if c.BatchRows != nil {
		if *c.BatchRows < 1 {
			return nil, nil, fmt.Errorf("%w: adbc source: batch_rows %d: want at least 1", flightline.ErrInvalidInput, *c.BatchRows)
		}
		sc.BatchRows = *c.BatchRows
	}
	s, err := adbcsrc.New(e.ctx, sc, adbcsrc.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func init() {
	sinkKinds["adbc"] = sinkOf(adbcSinkSpec, openAdbcSink).at("driver", "the driver: a .so or .toml path, a manifest name, or flightsql")
	sourceKinds["adbc"] = sourceOf(adbcSourceSpec, openAdbcSource).at("driver", "the driver: a .so or .toml path, a manifest name, or flightsql")
}
