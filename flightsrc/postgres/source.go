// Package postgres is Flightline's incremental PostgreSQL source.
//
// Each stream is one table read in (watermark, key) order: a watermark
// column that only grows for new or changed rows (updated_at, a serial id)
// and a tie-breaker key that makes (watermark, key) unique. Reading starts
// with a snapshot of every row after the checkpoint, in pages of BatchRows
// rows (keyset pagination: WHERE (wm, key) > (…) ORDER BY wm, key LIMIT n),
// then polls at PollInterval; an idle poll yields a heartbeat, a zero-row
// batch carrying the unchanged checkpoint.
//
// The checkpoint is the last (watermark, key) returned, as JSON with both
// values in PostgreSQL's text form:
//
//	{"watermark":"2026-01-02 03:04:05.123456+00","key":"42"}
//
// and {"watermark":null,"key":null} before the first row. Resuming after a
// checkpoint reads exactly the rows with (wm, key) > (watermark, key), so ties
// on the watermark are neither lost nor repeated.
//
// Pitfalls (inherent to watermark reading, documented in
// docs/sources/postgres.md): rows whose watermark is NULL are never read;
// deletes are not seen; a transaction that commits a row with a watermark
// below one already read (a sequence value taken before a concurrent,
// earlier-committed transaction's) is missed. Use a watermark assigned at
// commit order, or poll with a safety lag, where that matters.
//
// Column types map to Arrow with the shared type map (internal/pgarrow).
package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/incsrc"
	"github.com/flightline/flightline/internal/pgarrow"
	"github.com/flightline/flightline/internal/pgerr"
)

// Config is what a Source reads: the keys of the postgres: source kind.
// The zero value of an optional field means its default.
type Config struct {
	// DSN is the connection string, a postgres:// URL or libpq key=value
	// pairs. Required.
	DSN string
	// Tables are the streams, one per table. At least one is required.
	Tables []Table
	// PollInterval is how long an idle reader waits between polls (and so
	// the heartbeat period). Default 1s.
	PollInterval time.Duration
	// BatchRows is the maximum rows per batch. Default 10000.
	BatchRows int
}

// Table is one stream: Name ("t" or "schema.t", quoted parts allowed),
// read by the Watermark column and the tie-breaker Key column (exact
// column names, both required). The stream's name is Name as given.
type Table struct {
	Name, Watermark, Key string
}

// Option configures a Source beyond its Config: allocator, logger. Options
// apply only in New.
type Option func(*options) error

// The options every incremental SQL source shares (internal/incsrc).
type (
	options  = incsrc.Options[pgx.Identifier]
	tableCfg = incsrc.Table[pgx.Identifier]
)

// settings turns cfg into incsrc options, applied before opts.
func (cfg Config) settings() []Option {
	var opts []Option
	for _, t := range cfg.Tables {
		opts = append(opts, Option(incsrc.AddTable(t.Name, t.Watermark, t.Key, pgerr.ParseIdent, "a watermark and a key column")))
	}
	if cfg.PollInterval != 0 {
		opts = append(opts, Option(incsrc.PollInterval[pgx.Identifier](cfg.PollInterval)))
	}
	if cfg.BatchRows != 0 {
		opts = append(opts, Option(incsrc.BatchRows[pgx.Identifier](cfg.BatchRows)))
	}
	return opts
}

// Allocator sets the allocator of the batches; nil means
// memory.DefaultAllocator, the default.
func Allocator(mem memory.Allocator) Option { return Option(incsrc.Allocator[pgx.Identifier](mem)) }

// Logger sets the logger; nil means slog.Default(), the default.
func Logger(l *slog.Logger) Option { return Option(incsrc.Logger[pgx.Identifier](l)) }

// Source reads tables incrementally. Safe for concurrent use; each Read
// opens its own connection.
type Source struct {
	o        options
	cfg      *pgx.ConnConfig
	password string
	server   string
}

// New returns a Source for the database at cfg.DSN. It validates cfg (at
// least one table) and the options and parses the DSN, but does not connect:
// ctx is not used today, and each Streams and Read opens (and closes) a
// connection of its own. Options apply only here. Close releases nothing
// today.
func New(ctx context.Context, cfg Config, opts ...Option) (*Source, error) {
	o, err := incsrc.New("postgres source", append(cfg.settings(), opts...))
	if err != nil {
		return nil, err
	}
	pcfg, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, pgerr.ParseError(err, cfg.DSN)
	}
	// Fixed session settings make the text form of watermarks stable.
	for k, v := range map[string]string{"DateStyle": "ISO", "TimeZone": "UTC", "extra_float_digits": "3", "IntervalStyle": "postgres"} {
		pcfg.RuntimeParams[k] = v
	}
	if pcfg.RuntimeParams["application_name"] == "" {
		pcfg.RuntimeParams["application_name"] = "flightline-source"
	}
	return &Source{o: o, cfg: pcfg, password: pcfg.Password, server: pgerr.Describe(&pcfg.Config)}, nil
}

// Close implements io.Closer for symmetry with the other sources: the
// Source holds no connection between calls (each Reader closes its own),
// so it returns nil. Call it once, after every Reader is closed.
func (s *Source) Close() error { return nil }

func (s *Source) wrap(err error, format string, args ...any) error {
	return pgerr.Wrap(err, s.password, format, args...)
}

func (s *Source) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, s.cfg)
	if err != nil {
		return nil, s.wrap(err, "postgres source: connect to %s", s.server)
	}
	return c, nil
}

// Streams implements flightsrc.Source: one stream per Table, with the
// schema read from the catalog.
func (s *Source) Streams(ctx context.Context) ([]flightsrc.Stream, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var out []flightsrc.Stream
	for _, t := range s.o.Tables {
		l, err := s.describe(ctx, c, t)
		if err != nil {
			return nil, err
		}
		out = append(out, flightsrc.Stream{
			Name:        t.Name,
			Description: fmt.Sprintf("table %s by (%s, %s)", t.ID.Sanitize(), t.Cursor, t.Tiebreak),
			Schema:      l.schema,
		})
	}
	return out, nil
}

// Commit implements flightsrc.Source; PostgreSQL has no consumer position
// to report to.
func (s *Source) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

// layout is how one table is read.
type layout struct {
	schema   *arrow.Schema
	decoders []pgarrow.Decoder
	first    string // query without a position
	next     string // query after ($1, $2)
}

func (s *Source) describe(ctx context.Context, c *pgx.Conn, t tableCfg) (*layout, error) {
	var oid *uint32
	if err := c.QueryRow(ctx, `SELECT to_regclass($1)::oid`, t.ID.Sanitize()).Scan(&oid); err != nil {
		return nil, s.wrap(err, "postgres source %s: look up %s", s.server, t.ID.Sanitize())
	}
	if oid == nil {
		return nil, fmt.Errorf("%w: postgres source %s: table %s does not exist", flightline.ErrNotFound, s.server, t.ID.Sanitize())
	}
	rows, err := c.Query(ctx, `SELECT attname, atttypid, atttypmod, attnotnull FROM pg_attribute
		WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, *oid)
	if err != nil {
		return nil, s.wrap(err, "postgres source %s: columns of %s", s.server, t.ID.Sanitize())
	}
	type col struct {
		name    string
		oid     uint32
		typmod  int32
		notNull bool
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (col, error) {
		var c col
		return c, r.Scan(&c.name, &c.oid, &c.typmod, &c.notNull)
	})
	if err != nil {
		return nil, s.wrap(err, "postgres source %s: columns of %s", s.server, t.ID.Sanitize())
	}
	l := &layout{}
	var fields []arrow.Field
	var sel []string
	haveWM, haveKey := false, false
	for _, c := range cols {
		dt, binary := pgarrow.ForPostgres(c.oid, c.typmod)
		q := "src." + pgx.Identifier{c.name}.Sanitize()
		decOID := c.oid
		if !binary {
			q += "::text"
			decOID = pgarrow.OIDText
		}
		dec, err := pgarrow.NewDecoder(decOID, dt)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", flightline.ErrInvalidInput, c.name, err)
		}
		fields = append(fields, arrow.Field{Name: c.name, Type: dt, Nullable: !c.notNull})
		sel = append(sel, q)
		l.decoders = append(l.decoders, dec)
		haveWM = haveWM || c.name == t.Cursor
		haveKey = haveKey || c.name == t.Tiebreak
	}
	if !haveWM || !haveKey {
		return nil, fmt.Errorf("%w: table %s has no column %q or %q (watermark, key)", flightline.ErrInvalidInput, t.ID.Sanitize(), t.Cursor, t.Tiebreak)
	}
	l.schema = arrow.NewSchema(fields, nil)
	// Qualified names refer to the table's columns, never to the output
	// columns (which may be ::text casts of them).
	wm, key := "src."+pgx.Identifier{t.Cursor}.Sanitize(), "src."+pgx.Identifier{t.Tiebreak}.Sanitize()
	base := "SELECT " + strings.Join(sel, ", ") + ", " + wm + "::text, " + key + "::text FROM " + t.ID.Sanitize() + " AS src"
	order := fmt.Sprintf(" ORDER BY %s, %s LIMIT %d", wm, key, s.o.Batch)
	l.first = base + " WHERE " + wm + " IS NOT NULL" + order
	// Parameters are sent as text and take the columns' types by inference
	// from the row comparison.
	l.next = base + " WHERE (" + wm + ", " + key + ") > ($1, $2)" + order
	return l, nil
}

// Checkpoint is the source's checkpoint: the last (watermark, key) read,
// in PostgreSQL's text form; nil fields before the first row.
type Checkpoint struct {
	Watermark *string `json:"watermark"`
	Key       *string `json:"key"`
}

// Encode returns the checkpoint's JSON, fields in the documented order.
func (c Checkpoint) Encode() []byte {
	b, _ := json.Marshal(c) // cannot fail: two *string fields
	return b
}

// ParseCheckpoint decodes a checkpoint made by Encode. nil or empty means
// "from the start".
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	var c Checkpoint
	if len(b) == 0 {
		return c, nil
	}
	if !incsrc.DecodeCheckpoint(b, &c) || (c.Watermark == nil) != (c.Key == nil) {
		return Checkpoint{}, fmt.Errorf("%w: not a postgres source checkpoint: %q", flightline.ErrInvalidInput, b)
	}
	return c, nil
}

// Read implements flightsrc.Source. The Reader owns a connection of its own
// until Close; ctx bounds only the connect and catalog reads.
func (s *Source) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	t, err := s.o.Table(req.Stream)
	if err != nil {
		return nil, err
	}
	cp, err := ParseCheckpoint(req.After)
	if err != nil {
		return nil, err
	}
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.describe(ctx, c, t)
	if err != nil {
		c.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	return &reader{s: s, t: t, l: l, conn: c, cp: cp, ctx: rctx, cancel: cancel}, nil
}

type reader struct {
	s      *Source
	t      tableCfg
	l      *layout
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex // held by Next; Close waits for it
	conn   *pgx.Conn  // nil after a connection failure: reconnect on Next
	cp     Checkpoint
	idle   bool // the last page was short: wait before polling again
	closed bool
}

func (r *reader) Schema() *arrow.Schema { return r.l.schema }

// Next implements flightsrc.Reader. The caller owns (and Releases) the
// returned batch.
func (r *reader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, fmt.Errorf("%w: reader is closed", flightline.ErrInvalidInput)
	}
	ctx, stop := incsrc.MergeCancel(ctx, r.ctx)
	defer stop()
	if r.idle {
		if err := incsrc.Sleep(ctx, r.s.o.Interval); err != nil {
			return nil, nil, err
		}
	}
	rec, n, err := r.fetch(ctx)
	if err != nil {
		return nil, nil, err
	}
	r.idle = n < r.s.o.Batch
	return rec, r.cp.Encode(), nil
}

// fetch reads one page after r.cp and advances r.cp to its last row.
func (r *reader) fetch(ctx context.Context) (arrow.RecordBatch, int, error) {
	if r.conn == nil {
		c, err := r.s.connect(ctx)
		if err != nil {
			return nil, 0, err
		}
		r.conn = c
	}
	sql, args := r.l.first, []any{}
	if r.cp.Watermark != nil {
		sql, args = r.l.next, []any{*r.cp.Watermark, *r.cp.Key}
	}
	formats := make(pgx.QueryResultFormats, len(r.l.decoders)+2)
	for i := range formats {
		formats[i] = pgx.BinaryFormatCode
	}
	rows, err := r.conn.Query(ctx, sql, append([]any{formats}, args...)...)
	if err != nil {
		return nil, 0, r.fail(err)
	}
	defer rows.Close()
	b := array.NewRecordBuilder(r.s.o.Mem, r.l.schema)
	defer b.Release()
	n := 0
	var wm, key string
	for rows.Next() {
		vals := rows.RawValues()
		for i, dec := range r.l.decoders {
			if err := dec(b.Field(i), vals[i]); err != nil {
				return nil, 0, fmt.Errorf("%w: %s column %q: %v", flightline.ErrInvalidInput, r.t.ID.Sanitize(), r.l.schema.Field(i).Name, err)
			}
		}
		k := len(r.l.decoders)
		wm, key = string(vals[k]), string(vals[k+1])
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, 0, r.fail(err)
	}
	if n > 0 {
		r.cp = Checkpoint{Watermark: &wm, Key: &key}
	}
	return b.NewRecordBatch(), n, nil
}

func (r *reader) fail(err error) error {
	if r.conn != nil && (r.conn.IsClosed() || pgconn.SafeToRetry(err) || pgerr.Kind(err) == flightline.ErrUnavailable) {
		r.conn.Close(context.Background())
		r.conn = nil
	}
	return r.s.wrap(err, "postgres source %s: read %s", r.s.server, r.t.ID.Sanitize())
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
	if r.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.conn.Close(ctx)
		r.conn = nil
	}
	return nil
}

var _ flightsrc.Source = (*Source)(nil)
