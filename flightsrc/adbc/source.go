// Package adbc is Flightline's incremental source for any database with an
// ADBC driver (package adbc at the repository root opens it).
//
// Each stream is one table read in (cursor, tiebreak) order with
// adbc.Incremental: pages of Config.BatchRows rows strictly after the last
// (cursor, tiebreak) read, then polls at Config.PollInterval once caught up; an
// idle poll yields a heartbeat, a zero-row batch carrying the unchanged
// checkpoint. The data stays Arrow from the driver to the batch (copied
// once into the source's allocator, so a batch outlives its reader).
//
// The tie rule: (cursor, tiebreak) must be unique and never NULL; rows
// sharing a cursor value are read in tiebreak order, and a resume neither
// repeats nor skips any of them. A unique cursor can be its own tiebreak.
// Rows with a NULL cursor are never read, deletes are not seen, and a row
// committed with a cursor below one already read is missed.
//
// The checkpoint is adbc.Position's JSON: the last (cursor, tiebreak) read,
// with their types.
package adbc

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/incsrc"
)

// Config is what a Source reads: the keys of the adbc: source kind. The
// zero value of an optional field means its default.
type Config struct {
	// Config is the database: the driver, its URI and options, the
	// dialect (shared with the adbc sink; adbc.Open opens it).
	fadbc.Config
	// Tables are the streams, one per table. At least one is required.
	Tables []Table
	// PollInterval is how long an idle reader waits between polls (and so
	// the heartbeat period). 0: the default, 1s.
	PollInterval time.Duration
	// BatchRows is the rows per query page (a page may arrive as several
	// batches). 0: the default, 10000.
	BatchRows int
}

// Table is one stream: Name ("t" or "schema.t") read by the Cursor column
// and the Tiebreak column (exact names; the same column when the cursor is
// unique), all three required. The stream's name is Name as given.
type Table struct {
	Name, Cursor, Tiebreak string
}

// Option configures a Source beyond its Config: allocator, logger. Options
// apply only in New.
type Option func(*options) error

// The options every incremental SQL source shares (internal/incsrc).
type (
	options  = incsrc.Options[fadbc.Table]
	tableCfg = incsrc.Table[fadbc.Table]
)

// settings turns cfg into incsrc options, applied before opts.
func (cfg Config) settings() []Option {
	var opts []Option
	for _, t := range cfg.Tables {
		opts = append(opts, Option(incsrc.AddTable(t.Name, t.Cursor, t.Tiebreak, fadbc.ParseTable, "a cursor and a tiebreak column")))
	}
	if cfg.PollInterval != 0 {
		opts = append(opts, Option(incsrc.PollInterval[fadbc.Table](cfg.PollInterval)))
	}
	if cfg.BatchRows != 0 {
		opts = append(opts, Option(incsrc.BatchRows[fadbc.Table](cfg.BatchRows)))
	}
	return opts
}

// Allocator sets the allocator of the batches; nil means
// memory.DefaultAllocator.
func Allocator(mem memory.Allocator) Option { return Option(incsrc.Allocator[fadbc.Table](mem)) }

// Logger sets the logger; nil means slog.Default().
func Logger(l *slog.Logger) Option { return Option(incsrc.Logger[fadbc.Table](l)) }

// Source reads tables of one ADBC database incrementally. It is safe for
// concurrent use; each Reader holds a connection of its own.
type Source struct {
	o  options
	db *fadbc.DB
}

// New validates cfg (at least one table) and the options, then loads the
// driver of cfg, opens its database and probes it on one connection
// (adbc.Open): a driver that cannot load or a server that refuses the
// connection fails here. Options apply only here. Close releases the
// database.
func New(ctx context.Context, cfg Config, opts ...Option) (*Source, error) {
	o, err := incsrc.New("adbc source", append(cfg.settings(), opts...))
	if err != nil {
		return nil, err
	}
	db, err := fadbc.Open(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	return &Source{o: o, db: db}, nil
}

// Close closes the database New opened. Call it once, after every Reader
// is closed.
func (s *Source) Close() error { return s.db.Close() }

// schema is the stream's schema: the table's columns as the driver maps
// them.
func (s *Source) schema(ctx context.Context, c *fadbc.Conn, t tableCfg) (*arrow.Schema, error) {
	sc, err := c.TableSchema(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, fmt.Errorf("%w: adbc source: table %s does not exist", flightline.ErrNotFound, t.ID)
	}
	if len(sc.FieldIndices(t.Cursor)) != 1 || len(sc.FieldIndices(t.Tiebreak)) != 1 {
		return nil, fmt.Errorf("%w: table %s has no column %q or %q (cursor, tiebreak)", flightline.ErrInvalidInput, t.ID, t.Cursor, t.Tiebreak)
	}
	return sc, nil
}

// Streams implements flightsrc.Source: one stream per table of Config.
func (s *Source) Streams(ctx context.Context) ([]flightsrc.Stream, error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []flightsrc.Stream
	for _, t := range s.o.Tables {
		sc, err := s.schema(ctx, c, t)
		if err != nil {
			return nil, err
		}
		out = append(out, flightsrc.Stream{
			Name:        t.Name,
			Description: fmt.Sprintf("table %s by (%s, %s)", t.ID, t.Cursor, t.Tiebreak),
			Schema:      sc,
		})
	}
	return out, nil
}

// Commit implements flightsrc.Source; a database has no consumer position.
func (s *Source) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

// Read implements flightsrc.Source. The Reader owns a connection until
// Close; ctx bounds only the connect and the schema lookup.
func (s *Source) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	t, err := s.o.Table(req.Stream)
	if err != nil {
		return nil, err
	}
	pos, err := fadbc.ParsePosition(req.After)
	if err != nil {
		return nil, err
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := s.schema(ctx, c, t)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	q := fadbc.Incremental{Table: t.ID, Cursor: t.Cursor, Tiebreak: t.Tiebreak, Limit: s.o.Batch, Placeholder: c.Caps().Placeholder}
	if c.PrefersLiterals() {
		q.Inline = fadbc.InlineInt // integer positions need no binding
	}
	names := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		names[i] = f.Name
	}
	q.Columns = names
	rctx, cancel := context.WithCancel(context.Background())
	return &reader{s: s, q: q, schema: sc, conn: c, pos: pos, ctx: rctx, cancel: cancel}, nil
}

type reader struct {
	s      *Source
	q      fadbc.Incremental
	schema *arrow.Schema
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex // held by Next; Close waits for it
	conn    *fadbc.Conn
	pos     fadbc.Position
	pending *fadbc.Page // batches of the last page not yet returned
	idle    bool        // the last page was short: wait before polling again
	closed  bool
}

func (r *reader) Schema() *arrow.Schema { return r.schema }

// Next implements flightsrc.Reader. The caller owns (and Releases) the
// returned batch.
func (r *reader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, fmt.Errorf("%w: reader is closed", flightline.ErrInvalidInput)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if r.pending == nil || len(r.pending.Batches) == 0 {
		ctx, stop := incsrc.MergeCancel(ctx, r.ctx)
		defer stop()
		if r.idle {
			if err := incsrc.Sleep(ctx, r.s.o.Interval); err != nil {
				return nil, nil, err
			}
		}
		page, err := r.q.ReadPage(ctx, r.conn, r.s.o.Mem, r.schema, r.pos)
		if err != nil {
			// A driver may report the deadline (gRPC's own timer) a moment
			// before ctx's timer fires: the caller is owed ctx.Err().
			if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
				<-ctx.Done()
			}
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, err
		}
		r.idle = page.Rows < r.q.Limit
		if len(page.Batches) == 0 { // a heartbeat
			b := array.NewRecordBuilder(r.s.o.Mem, r.schema)
			defer b.Release()
			return b.NewRecordBatch(), r.pos.Encode(), nil
		}
		r.pending = page
	}
	rec, pos := r.pending.Batches[0], r.pending.Positions[0]
	r.pending.Batches, r.pending.Positions = r.pending.Batches[1:], r.pending.Positions[1:]
	r.pos = pos
	return rec, pos.Encode(), nil
}

// Close implements flightsrc.Reader. It interrupts a running Next.
func (r *reader) Close() error {
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.pending != nil {
		r.pending.Release()
	}
	return r.conn.Close()
}

var _ flightsrc.Source = (*Source)(nil)
