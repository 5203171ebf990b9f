package duckdb

import (
	"context"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/flightsink"
	adbcsink "github.com/flightline/flightline/flightsink/adbc"
)

// Option configures a Sink.
type Option func(*options)

type options struct {
	lib    string
	sink   []adbcsink.Option
	noEvol bool
}

// Library sets the path of libduckdb.so (default: FindLibrary's search).
func Library(path string) Option { return func(o *options) { o.lib = path } }

// Table sets the default target table ("table" or "schema.table");
// Pipeline.Target overrides it when not empty.
func Table(name string) Option {
	return func(o *options) { o.sink = append(o.sink, adbcsink.Table(name)) }
}

// CheckpointTable sets the checkpoint table (default
// sqlcheckpoint.DefaultTable, "__flightline_checkpoints").
func CheckpointTable(name string) Option {
	return func(o *options) { o.sink = append(o.sink, adbcsink.CheckpointTable(name)) }
}

// NoNewColumns refuses a batch with a column the table lacks
// (ErrSchemaMismatch) instead of adding it.
func NoNewColumns() Option { return func(o *options) { o.noEvol = true } }

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

// New opens the database at path (created if absent; "md:NAME" for
// MotherDuck) and returns a Sink writing to it. It fails with ErrNoLibrary
// without libduckdb.so, ErrLocked when another process holds the file, and
// ErrUnauthenticated for an md: path without a token in the environment.
func New(ctx context.Context, path string, opts ...Option) (*Sink, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	sh, release, err := openShared(ctx, path, o.lib)
	if err != nil {
		return nil, err
	}
	sopts := append(o.sink, adbcsink.Serialize(&sh.mu))
	if !o.noEvol {
		sopts = append(sopts, adbcsink.AddColumns())
	}
	s, err := adbcsink.NewOn(sh.db, sopts...)
	if err != nil {
		_ = release()
		return nil, err
	}
	return &Sink{Sink: s, release: release}, nil
}

// Close closes the Sink, and the database once no other Sink of this
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
