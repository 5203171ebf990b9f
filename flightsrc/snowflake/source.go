// Package snowflake is Flightline's incremental Snowflake source (kind
// snowflake: on the source side).
//
// Each stream is one table read in (cursor, tiebreak) order: a cursor
// column that grows with every new row (an id, an ingestion timestamp) and
// a tiebreak column that makes (cursor, tiebreak) unique. Each batch is the
// next page of rows after the checkpoint:
//
//	SELECT … FROM t WHERE cursor > :c OR (cursor = :c AND tiebreak > :k)
//	ORDER BY cursor, tiebreak LIMIT Config.BatchRows
//
// and the checkpoint is the (cursor, tiebreak) of the page's last row, as
// JSON of their text forms: {"cursor":"41","tiebreak":"7"}, or
// {"cursor":null,"tiebreak":null} before the first row.
//
// The tie rule: rows with equal cursor values are ordered by the tiebreak
// column, and a checkpoint in the middle of a run of ties resumes with the
// next tiebreak value of that run, so ties are neither lost nor repeated.
// When the cursor alone is unique, give it as its own tiebreak. Page
// boundaries are deterministic: two reads from one checkpoint return the
// same batches.
//
// Results are read as Arrow through gosnowflake's Arrow batches
// (WithArrowBatches), not row by row. The Arrow types (Snowflake → Arrow):
// NUMBER(p,0) with p ≤ 19 → int64, NUMBER(p,0) wider → decimal128(p,0),
// NUMBER(p,s) → decimal128(p,s), FLOAT → float64, VARCHAR → utf8,
// BINARY → binary, BOOLEAN → bool, DATE → date32, TIME → time64[ns],
// TIMESTAMP_NTZ → timestamp[ns], TIMESTAMP_LTZ and _TZ → timestamp[ns,
// UTC], VARIANT, OBJECT and ARRAY → utf8 (JSON). The schema comes from the
// result's column metadata, so it is known before any row exists; each
// Arrow chunk is cast to it.
//
// Cursor and tiebreak columns must be integers (NUMBER scale 0), strings,
// dates or timestamps. Pitfalls of cursor reading: rows whose cursor is
// NULL are never read; deletes and updates that do not move the cursor
// are not seen; a transaction that commits a cursor value below one already
// read is missed (use a cursor assigned in commit order, or read with a
// lag).
package snowflake

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	sf "github.com/snowflakedb/gosnowflake"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/incsrc"
	"github.com/flightline/flightline/internal/snowconn"
)

// Config is what a Source reads: the keys of the snowflake: source kind.
// The zero value of an optional field means its default.
type Config struct {
	// Config is the account: user, credentials, database, schema,
	// warehouse, role, endpoint and timeouts (shared with the sink).
	snowconn.Config
	// Tables are the streams, one per table. At least one is required.
	Tables []Table
	// PollInterval is how long an idle reader waits between polls (and so
	// the heartbeat period). 0: the default, 1s.
	PollInterval time.Duration
	// BatchRows is the rows per batch at most. 0: the default, 10000.
	BatchRows int
}

// Table is one stream: Name ("t", "s.t" or "db.s.t"; unquoted parts
// upper-cased, quoted kept), read by the Cursor column and the Tiebreak
// column (exact, case-sensitive column names as Snowflake reports them:
// ID for an unquoted id), all three required. The stream's name is Name as
// given.
type Table struct {
	Name, Cursor, Tiebreak string
}

// Option configures a Source beyond its Config: allocator, logger. Options
// apply only in New.
type Option func(*options) error

// The options every incremental SQL source shares (internal/incsrc).
type (
	options  = incsrc.Options[[]string]
	tableCfg = incsrc.Table[[]string]
)

// settings turns cfg into incsrc options, applied before opts.
func (cfg Config) settings() []Option {
	var opts []Option
	for _, t := range cfg.Tables {
		opts = append(opts, Option(incsrc.AddTable(t.Name, t.Cursor, t.Tiebreak, snowconn.ParseIdent, "a cursor and a tiebreak column")))
	}
	if cfg.PollInterval != 0 {
		opts = append(opts, Option(incsrc.PollInterval[[]string](cfg.PollInterval)))
	}
	if cfg.BatchRows != 0 {
		opts = append(opts, Option(incsrc.BatchRows[[]string](cfg.BatchRows)))
	}
	return opts
}

// Allocator sets the allocator of the batches (nil: the default).
func Allocator(mem memory.Allocator) Option { return Option(incsrc.Allocator[[]string](mem)) }

// Logger sets the logger (nil: slog.Default()).
func Logger(l *slog.Logger) Option { return Option(incsrc.Logger[[]string](l)) }

// Source reads Snowflake tables incrementally. Safe for concurrent use;
// each Read holds one session of the pool while it queries.
type Source struct {
	o   options
	cfg snowconn.Config
	db  *sql.DB
}

// New returns a Source reading the tables of cfg on the account cfg
// names. It validates cfg (at least one table) and the options and sets up
// the session pool but does not connect: ctx is not used today (the first
// Streams or Read logs in and reports an unreachable account). Options
// apply only here. Close releases the pool's sessions.
func New(ctx context.Context, cfg Config, opts ...Option) (*Source, error) {
	o, err := incsrc.New("snowflake source", append(cfg.settings(), opts...))
	if err != nil {
		return nil, err
	}
	s := &Source{o: o, cfg: cfg.Config}
	if s.db, err = snowconn.Open(&s.cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the source's sessions. Call it once, after every Reader is
// closed.
func (s *Source) Close() error { return s.db.Close() }

func (s *Source) wrap(err error, format string, args ...any) error {
	return s.cfg.Wrap(err, "snowflake source "+s.cfg.Describe()+": "+format, args...)
}

// Commit implements flightsrc.Source: Snowflake has no consumer position.
func (s *Source) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

// Streams implements flightsrc.Source.
func (s *Source) Streams(ctx context.Context) ([]flightsrc.Stream, error) {
	var out []flightsrc.Stream
	for _, t := range s.o.Tables {
		l, err := s.describe(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, flightsrc.Stream{Name: t.Name, Schema: l.schema,
			Description: fmt.Sprintf("table %s by (%s, %s)", snowconn.QuoteParts(t.ID), t.Cursor, t.Tiebreak)})
	}
	return out, nil
}

// layout is how one table is read.
type layout struct {
	schema       *arrow.Schema
	first, next  string
	cursorAt     int // column index of the cursor
	tiebreakAt   int
	cursorKind   kind
	tiebreakKind kind
}

// kind is how a cursor or tiebreak value is written in a checkpoint and
// bound back.
type kind int

const (
	kindInt kind = iota
	kindString
	kindDate
	kindTimestamp
)

func (s *Source) describe(ctx context.Context, t tableCfg) (*layout, error) {
	tbl := snowconn.QuoteParts(t.ID)
	rows, err := s.db.QueryContext(ctx, `SELECT * FROM `+tbl+` LIMIT 0`)
	if err != nil {
		return nil, s.wrap(err, "describe %s", tbl)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, s.wrap(err, "describe %s", tbl)
	}
	l := &layout{cursorAt: -1, tiebreakAt: -1}
	fields := make([]arrow.Field, len(cts))
	for i, ct := range cts {
		dt, err := arrowType(ct)
		if err != nil {
			return nil, fmt.Errorf("%w: snowflake source: %s column %q: %v", flightline.ErrInvalidInput, tbl, ct.Name(), err)
		}
		nullable, ok := ct.Nullable()
		fields[i] = arrow.Field{Name: ct.Name(), Type: dt, Nullable: nullable || !ok}
		switch ct.Name() {
		case t.Cursor:
			l.cursorAt = i
		}
		if ct.Name() == t.Tiebreak {
			l.tiebreakAt = i
		}
	}
	if l.cursorAt < 0 || l.tiebreakAt < 0 {
		return nil, fmt.Errorf("%w: snowflake source: table %s has no column %q or %q (cursor, tiebreak)", flightline.ErrInvalidInput, tbl, t.Cursor, t.Tiebreak)
	}
	if l.cursorKind, err = kindOf(fields[l.cursorAt].Type); err != nil {
		return nil, fmt.Errorf("%w: snowflake source: cursor %q: %v", flightline.ErrInvalidInput, t.Cursor, err)
	}
	if l.tiebreakKind, err = kindOf(fields[l.tiebreakAt].Type); err != nil {
		return nil, fmt.Errorf("%w: snowflake source: tiebreak %q: %v", flightline.ErrInvalidInput, t.Tiebreak, err)
	}
	l.schema = arrow.NewSchema(fields, nil)
	c, k := snowconn.Quote(t.Cursor), snowconn.Quote(t.Tiebreak)
	order := fmt.Sprintf(" ORDER BY %s, %s LIMIT %d", c, k, s.o.Batch)
	l.first = `SELECT * FROM ` + tbl + ` WHERE ` + c + ` IS NOT NULL` + order
	l.next = `SELECT * FROM ` + tbl + ` WHERE ` + c + ` > ? OR (` + c + ` = ? AND ` + k + ` > ?)` + order
	return l, nil
}

// arrowType is the source's type map (see the package documentation).
func arrowType(ct *sql.ColumnType) (arrow.DataType, error) {
	switch t := strings.ToUpper(ct.DatabaseTypeName()); t {
	case "FIXED", "NUMBER":
		p, s, ok := ct.DecimalSize()
		if !ok {
			p, s = 38, 0
		}
		if s == 0 && p <= 19 {
			return arrow.PrimitiveTypes.Int64, nil
		}
		return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(s)}, nil
	case "REAL", "FLOAT", "DOUBLE":
		return arrow.PrimitiveTypes.Float64, nil
	case "TEXT", "VARCHAR", "CHAR", "STRING", "VARIANT", "OBJECT", "ARRAY":
		return arrow.BinaryTypes.String, nil
	case "BINARY":
		return arrow.BinaryTypes.Binary, nil
	case "BOOLEAN":
		return arrow.FixedWidthTypes.Boolean, nil
	case "DATE":
		return arrow.FixedWidthTypes.Date32, nil
	case "TIME":
		return arrow.FixedWidthTypes.Time64ns, nil
	case "TIMESTAMP_NTZ":
		return arrow.FixedWidthTypes.Timestamp_ns, nil
	case "TIMESTAMP_LTZ", "TIMESTAMP_TZ":
		return &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, nil
	default:
		return nil, fmt.Errorf("type %s is not read by this source", t)
	}
}

func kindOf(dt arrow.DataType) (kind, error) {
	switch dt := dt.(type) {
	case *arrow.Int64Type:
		return kindInt, nil
	case *arrow.Decimal128Type:
		if dt.Scale == 0 {
			return kindInt, nil
		}
	case *arrow.StringType:
		return kindString, nil
	case *arrow.Date32Type:
		return kindDate, nil
	case *arrow.TimestampType:
		return kindTimestamp, nil
	}
	return 0, fmt.Errorf("type %s cannot be a cursor (want an integer, a string, a date or a timestamp)", dt)
}

// Checkpoint is the source's checkpoint: the (cursor, tiebreak) of the last
// row read, as text; nil fields before the first row. Timestamps are
// RFC 3339 with nanoseconds (UTC for zoned columns), dates YYYY-MM-DD.
// Encode gives its JSON, {"cursor":…,"tiebreak":…}.
type Checkpoint = incsrc.Checkpoint

// ParseCheckpoint decodes a checkpoint made by Encode; nil or empty means
// from the start.
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	return incsrc.ParseCheckpoint(b, "snowflake source")
}

// Read implements flightsrc.Source. ctx bounds only the table's
// description; the Reader lives until Close.
func (s *Source) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	t, err := s.o.Table(req.Stream)
	if err != nil {
		return nil, err
	}
	cp, err := ParseCheckpoint(req.After)
	if err != nil {
		return nil, err
	}
	l, err := s.describe(ctx, t)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	return &reader{s: s, t: t, l: l, cp: cp, ctx: rctx, cancel: cancel}, nil
}

type reader struct {
	s      *Source
	t      tableCfg
	l      *layout
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex // held by Next; Close waits for it
	cp     Checkpoint
	idle   bool
	closed bool
}

func (r *reader) Schema() *arrow.Schema { return r.l.schema }

// Next implements flightsrc.Reader. The caller owns (and Releases) the
// batch.
func (r *reader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, fmt.Errorf("%w: reader is closed", flightline.ErrInvalidInput)
	}
	ctx, stop := incsrc.MergeCancel(ctx, r.ctx)
	defer stop()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if r.idle {
		if err := incsrc.Sleep(ctx, r.s.o.Interval); err != nil {
			return nil, nil, err
		}
	}
	rec, err := r.fetch(ctx)
	if err != nil {
		return nil, nil, err
	}
	r.idle = rec.NumRows() < int64(r.s.o.Batch)
	return rec, r.cp.Encode(), nil
}

// fetch reads one page after r.cp as Arrow and advances r.cp to its last
// row.
func (r *reader) fetch(ctx context.Context) (arrow.RecordBatch, error) {
	s := r.s
	q, args := r.l.first, []driver.NamedValue(nil)
	if r.cp.Cursor != nil {
		c, k := r.bind(r.l.cursorKind, *r.cp.Cursor), r.bind(r.l.tiebreakKind, *r.cp.Tiebreak)
		q, args = r.l.next, []driver.NamedValue{{Ordinal: 1, Value: c}, {Ordinal: 2, Value: c}, {Ordinal: 3, Value: k}}
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, s.wrap(err, "connect")
	}
	defer conn.Close()
	var chunks []arrow.RecordBatch
	defer func() {
		for _, c := range chunks {
			c.Release()
		}
	}()
	qctx := sf.WithArrowAllocator(sf.WithHigherPrecision(sf.WithArrowBatches(ctx)), s.o.Mem)
	err = conn.Raw(func(x any) error {
		rows, err := x.(driver.QueryerContext).QueryContext(qctx, q, args)
		if err != nil {
			return err
		}
		defer rows.Close()
		batches, err := rows.(sf.SnowflakeRows).GetArrowBatches()
		if err != nil {
			return err
		}
		for _, b := range batches {
			recs, err := b.WithContext(ctx).Fetch()
			if err != nil {
				return err
			}
			for _, rec := range *recs {
				c, err := r.conform(ctx, rec)
				rec.Release()
				if err != nil {
					return err
				}
				chunks = append(chunks, c)
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, flightline.ErrInvalidInput) {
			return nil, err
		}
		return nil, s.wrap(err, "read %s", snowconn.QuoteParts(r.t.ID))
	}
	rec, err := concat(s.o.Mem, r.l.schema, chunks)
	if err != nil {
		return nil, err
	}
	if n := int(rec.NumRows()); n > 0 {
		c, err := valueText(rec.Column(r.l.cursorAt), n-1)
		if err != nil {
			rec.Release()
			return nil, err
		}
		k, err := valueText(rec.Column(r.l.tiebreakAt), n-1)
		if err != nil {
			rec.Release()
			return nil, err
		}
		r.cp = Checkpoint{Cursor: &c, Tiebreak: &k}
	}
	return rec, nil
}

// bind turns a checkpoint value back into a bind parameter Snowflake
// compares with the column: integers and strings as text (implicitly cast),
// timestamps as text with nine fractional digits.
func (r *reader) bind(k kind, v string) any {
	if k == kindTimestamp {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UTC().Format("2006-01-02 15:04:05.000000000")
		}
	}
	return v
}

// conform casts one Arrow chunk of gosnowflake to the stream's schema.
func (r *reader) conform(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	sc := r.l.schema
	if int(rec.NumCols()) != sc.NumFields() {
		return nil, fmt.Errorf("%w: snowflake source: %s returned %d columns, its description %d (table altered?)",
			flightline.ErrConflict, snowconn.QuoteParts(r.t.ID), rec.NumCols(), sc.NumFields())
	}
	cols := make([]arrow.Array, sc.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	cctx := compute.WithAllocator(ctx, r.s.o.Mem)
	for i, f := range sc.Fields() {
		col := rec.Column(i)
		if arrow.TypeEqual(col.DataType(), f.Type) {
			col.Retain()
			cols[i] = col
			continue
		}
		out, err := compute.CastArray(cctx, col, compute.SafeCastOptions(f.Type))
		if err != nil {
			return nil, fmt.Errorf("%w: snowflake source: column %q: %s to %s: %v", flightline.ErrInvalidInput, f.Name, col.DataType(), f.Type, err)
		}
		cols[i] = out
	}
	return array.NewRecordBatch(sc, cols, rec.NumRows()), nil
}

// concat joins a page's chunks into one batch from mem.
func concat(mem memory.Allocator, sc *arrow.Schema, chunks []arrow.RecordBatch) (arrow.RecordBatch, error) {
	switch len(chunks) {
	case 0:
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		return b.NewRecordBatch(), nil
	case 1:
		chunks[0].Retain()
		return chunks[0], nil
	}
	cols := make([]arrow.Array, sc.NumFields())
	var rows int64
	for _, c := range chunks {
		rows += c.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(chunks))
		for j, c := range chunks {
			parts[j] = c.Column(i)
		}
		a, err := array.Concatenate(parts, mem)
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, fmt.Errorf("snowflake source: concatenate chunks: %w", err)
		}
		cols[i] = a
	}
	rec := array.NewRecordBatch(sc, cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// valueText is the checkpoint text of row i of a cursor or tiebreak column.
func valueText(a arrow.Array, i int) (string, error) {
	if a.IsNull(i) {
		return "", fmt.Errorf("%w: snowflake source: NULL cursor or tiebreak value", flightline.ErrInvalidInput)
	}
	switch a := a.(type) {
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10), nil
	case *array.Decimal128:
		return a.Value(i).ToString(0), nil
	case *array.String:
		return a.Value(i), nil
	case *array.Date32:
		return a.Value(i).FormattedString(), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC().Format(time.RFC3339Nano), nil
	}
	return "", fmt.Errorf("%w: snowflake source: cursor type %s", flightline.ErrInvalidInput, a.DataType())
}

// Close implements flightsrc.Reader. It interrupts a running Next.
func (r *reader) Close() error {
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

var _ flightsrc.Source = (*Source)(nil)
