package duckdb

import (
	"context"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/flightsink"
	adbcsink "github.com/flightline/flightline/flightsink/adbc"
)

// Config is what a duckdb sink is given in its URL or YAML.
type Config struct {
	// Path is the database file (created if absent), or "md:NAME" for a
	// MotherDuck database. Required.
	Path string
	// Table is the default target table ("table" or "schema.table");
	// Pipeline.Target overrides it when not empty.
	Table string
	// CheckpointTable is the checkpoint table (default
	// sqlcheckpoint.DefaultTable, "__flightline_checkpoints").
	CheckpointTable string
	// Library is the path of libduckdb.so (default: FindLibrary's search).
	Library string
	// NoNewColumns refuses a batch with a column the table lacks
	// (ErrSchemaMismatch) instead of adding it (the default).
	NoNewColumns bool
	// Mode and Key are the adbc sink's (adbcsink.Config): "upsert" with
	// key columns applies a change stream (_op) by key in each batch's
	// transaction; "" or "append" appends.
	Mode string
	Key  []string
}

// Option configures a Sink beyond its Config.
type Option func(*options)

type options struct {
	sink []adbcsink.Option
}

// Logger sets the logger; nil means slog.Default().
func Logger(l *slog.Logger) Option {
	return func(o *options) { o.sink = append(o.sink, adbcsink.Logger(l)) }
}

// Allocator sets the allocator of the columns converted before ingest; nil
// means memory.DefaultAllocator.
func Allocator(mem memory.Allocator) Option {
	return func(o *options) { o.sink = append(o.sink, adbcsink.Allocator(mem)) }
}

// Sink writes to one DuckDB database. It is safe for concurrent use; each
// Writer holds a connection of its own.
type Sink struct {
	*adbcsink.Sink
	release func() error
}

// New opens the database at cfg.Path (created if absent; "md:NAME" for
// MotherDuck) at construction, shared with the other Sinks of this process
// on the same file, and returns a Sink writing to it. It fails with
// ErrNoLibrary without libduckdb.so, ErrLocked when another process holds
// the file, and ErrUnauthenticated for an md: path without a token in the
// environment. Close releases the database once no other Sink of this
// process uses it.
func New(ctx context.Context, cfg Config, opts ...Option) (*Sink, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	sh, release, err := openShared(ctx, cfg.Path, cfg.Library)
	if err != nil {
		return nil, err
	}
	sopts := append(o.sink, adbcsink.Serialize(&sh.mu))
	if !cfg.NoNewColumns {
		sopts = append(sopts, adbcsink.AddColumns())
	}
	s, err := adbcsink.NewOn(sh.db, adbcsink.Config{Table: cfg.Table, CheckpointTable: cfg.CheckpointTable,
		Mode: cfg.Mode, Key: cfg.Key}, sopts...)
	if err != nil {
		_ = release()
		return nil, err
	}
	return &Sink{Sink: s, release: release}, nil
}

// Close releases the Sink, and the database once no other Sink of this
// process uses it. Close the Writers first.
func (s *Sink) Close() error {
	err := s.Sink.Close()
	if rerr := s.release(); err == nil {
		err = rerr
	}
	return err
}

var (
	_ flightsink.Sink       = (*Sink)(nil)
	_ flightsink.Guaranteer = (*Sink)(nil)
)
