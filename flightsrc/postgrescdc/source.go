// Package postgrescdc is Flightline's PostgreSQL change-data-capture
// source: an initial consistent snapshot of a table, then every insert,
// update and delete committed to it, read from a logical replication slot
// with the pgoutput plugin (github.com/jackc/pglogrepl).
//
// One Source reads one table through one publication and one slot, named
// or created (Publication, Slot; by default flightline_<table>). Its one
// stream is named after the table. A read with no checkpoint (a pipeline
// whose sink holds nothing) starts with a snapshot of the table: when the
// slot does not exist it is created, exporting its snapshot, which is read
// in primary-key order, BatchRows rows a batch, and streaming then starts
// at the slot's consistent point. When the slot exists, the table is read
// in a snapshot of now and streaming starts at the slot's confirmed
// position, with the filter of Checkpoint so no change is applied twice;
// the slot is never dropped by the source. A read after a checkpoint
// continues where the checkpoint says (see Checkpoint), in the snapshot or
// in the stream.
//
// Batches hold the table's columns and three more: _op ("insert",
// "update", "delete"; snapshot rows are inserts), _lsn (the commit LSN of
// the change's transaction; the slot's consistent point for snapshot rows)
// and _commit_time (null for snapshot rows). An update that changes the
// primary key is a delete of the old key followed by an update of the new
// row. Delete rows carry the key (all columns under REPLICA IDENTITY FULL)
// and nulls. A batch ends at a transaction's commit, except when one
// transaction holds more than BatchRows changes: it is then sent in several
// batches whose checkpoints name the position inside the transaction.
//
// The slot's confirmed flush position moves only on Commit, which the
// coordinator calls once the sink made a checkpoint durable: the reader
// reports it in its standby status updates (every StatusInterval and when
// the server asks), and without a reader Commit advances the slot with
// pg_replication_slot_advance. The server so keeps every change a sink has
// not committed, and releases WAL as sinks commit, also while the table is
// idle (keepalives move the checkpoint past WAL that held no change of the
// table).
//
// Requirements, checked by Read with errors saying what to do:
// wal_level=logical; a primary key of integer or text columns; REPLICA
// IDENTITY DEFAULT or FULL; column types of the binary map (internal/pgarrow).
// An unchanged TOASTed value in an update needs REPLICA IDENTITY FULL (the
// old row supplies it); without it the update is refused with an error.
// A column added to the table while a reader runs ends the read with
// ErrSchemaMismatch: the next Read takes the new schema (older changes
// read null in the new column). A dropped slot, or one confirmed past the
// checkpoint, is ErrFailedPrecondition: the changes in between are gone
// from the WAL, and only a new snapshot (reset the pipeline's checkpoint)
// recovers.
package postgrescdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/pgarrow"
	"github.com/flightline/flightline/internal/pgerr"
)

// The change columns every batch has after the table's columns.
const (
	ColOp         = "_op"
	ColLSN        = "_lsn"
	ColCommitTime = "_commit_time"
)

// The values of ColOp.
const (
	OpInsert = "insert"
	OpUpdate = "update"
	OpDelete = "delete"
)

// Config is what a Source reads: the keys of the postgres-cdc: kind. The
// zero value of an optional field means its default.
type Config struct {
	// DSN is the connection string, a postgres:// URL or libpq key=value
	// pairs. Required.
	DSN string
	// Table is the table to read ("t" or "schema.t"). Required.
	Table string
	// Slot names the replication slot (default flightline_<table>). It is
	// created when missing, and re-created by a read with no checkpoint.
	Slot string
	// Publication names the publication (default flightline_<table>). It
	// is created FOR TABLE the table when missing; an existing one must
	// publish the table.
	Publication string
	// BatchRows is the maximum rows per batch. Default 10000.
	BatchRows int
	// PollInterval is how long an idle reader waits before it sends a
	// heartbeat. Default 1s.
	PollInterval time.Duration
	// StatusInterval is the period of standby status updates to the server
	// (the slot's confirmed position, and proof the reader is alive).
	// Default 10s; keep it well under the server's wal_sender_timeout.
	StatusInterval time.Duration
}

// Option configures a Source beyond its Config: allocator, logger,
// metrics registerer. Options apply only in New.
type Option func(*options) error

type options struct {
	table       string
	slot        string
	publication string
	batch       int
	poll        time.Duration
	status      time.Duration
	mem         memory.Allocator
	log         *slog.Logger
	reg         prometheus.Registerer
}

// Allocator sets the allocator of the batches; nil means
// memory.DefaultAllocator.
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.mem = mem
		return nil
	}
}

// Logger sets the logger; nil means slog.Default().
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.log = l
		return nil
	}
}

// Source reads the changes of one table. Safe for concurrent use; a slot
// serves one reader at a time (a second Read waits for the first to close,
// then fails with ErrUnavailable after a few seconds).
type Source struct {
	o        options
	cfg      *pgx.ConnConfig // replication connections use a copy with replication=database
	password string
	server   string
	id       pgx.Identifier

	lag *prometheus.GaugeVec // nil without Registerer

	mu     sync.Mutex
	active *reader // the open reader, which reports Commit to the server
}

// New returns a Source for cfg.Table of the database at cfg.DSN. It
// validates cfg and the options, parses the DSN and registers the lag gauge
// with the Registerer, if any, but does not connect: ctx is not used today,
// and the slot and publication are checked or created by Read. Options
// apply only here. Close releases nothing today (a Reader holds its own
// replication connection) and returns nil.
func New(ctx context.Context, cfg Config, opts ...Option) (*Source, error) {
	o := options{table: cfg.Table, slot: cfg.Slot, publication: cfg.Publication,
		batch: 10000, poll: time.Second, status: 10 * time.Second, mem: memory.DefaultAllocator, log: slog.Default()}
	for _, f := range []struct {
		name string
		v    int64
		set  func()
	}{
		{"BatchRows", int64(cfg.BatchRows), func() { o.batch = cfg.BatchRows }},
		{"PollInterval", int64(cfg.PollInterval), func() { o.poll = cfg.PollInterval }},
		{"StatusInterval", int64(cfg.StatusInterval), func() { o.status = cfg.StatusInterval }},
	} {
		if f.v < 0 {
			return nil, fmt.Errorf("%w: postgres-cdc source: %s %d < 0", flightline.ErrInvalidInput, f.name, f.v)
		}
		if f.v > 0 {
			f.set()
		}
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.table == "" {
		return nil, fmt.Errorf("%w: postgres-cdc source: no table", flightline.ErrInvalidInput)
	}
	id, err := pgerr.ParseIdent(o.table)
	if err != nil {
		return nil, err
	}
	def := "flightline_" + identPart(id[len(id)-1])
	if o.slot == "" {
		o.slot = def
	}
	if o.publication == "" {
		o.publication = def
	}
	if !validSlot(o.slot) {
		return nil, fmt.Errorf("%w: slot name %q: only lower-case letters, digits and _ (at most 63)", flightline.ErrInvalidInput, o.slot)
	}
	pcfg, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, pgerr.ParseError(err, cfg.DSN)
	}
	if pcfg.RuntimeParams["application_name"] == "" {
		pcfg.RuntimeParams["application_name"] = "flightline-cdc"
	}
	pcfg.RuntimeParams["TimeZone"] = "UTC"
	lag, err := newLagGauge(o.reg)
	if err != nil {
		return nil, err
	}
	return &Source{o: o, cfg: pcfg, password: pcfg.Password, server: pgerr.Describe(&pcfg.Config), id: id, lag: lag}, nil
}

// Close implements io.Closer for symmetry with the other sources: the
// Source holds no connection of its own (each Reader closes its
// replication connection), so it returns nil. The lag gauge stays
// registered: a second source on the same registry shares it. Call Close
// once, after every Reader is closed.
func (s *Source) Close() error { return nil }

func identPart(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if len(out) > 50 {
		out = out[:50]
	}
	return out
}

func validSlot(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// Name returns the stream's name: the table as configured.
func (s *Source) Name() string { return s.o.table }

// SlotName returns the replication slot's name.
func (s *Source) SlotName() string { return s.o.slot }

func (s *Source) wrap(err error, format string, args ...any) error {
	return pgerr.Wrap(err, s.password, format, args...)
}

func (s *Source) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, s.cfg)
	if err != nil {
		return nil, s.wrap(err, "postgres-cdc source: connect to %s", s.server)
	}
	return c, nil
}

func (s *Source) connectReplication(ctx context.Context) (*pgconn.PgConn, error) {
	cfg := s.cfg.Config.Copy()
	cfg.RuntimeParams["replication"] = "database"
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, s.wrap(err, "postgres-cdc source: replication connection to %s", s.server)
	}
	return c, nil
}

// Streams implements flightsrc.Source: the table's stream.
func (s *Source) Streams(ctx context.Context) ([]flightsrc.Stream, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	l, err := s.describe(ctx, c)
	if err != nil {
		return nil, err
	}
	return []flightsrc.Stream{{Name: s.o.table, Description: fmt.Sprintf("changes of %s (slot %s, publication %s)", s.id.Sanitize(), s.o.slot, s.o.publication), Schema: l.schema}}, nil
}

// SlotInfo is what Inspect reports.
type SlotInfo struct {
	WALLevel string
	Exists   bool
	Active   bool
	// Confirmed is the slot's confirmed flush LSN; Lag the bytes of WAL
	// from it to the server's current position.
	Confirmed string
	Lag       int64
}

// Inspect reads wal_level and the slot's state, for flightline check and
// status pages.
func (s *Source) Inspect(ctx context.Context) (SlotInfo, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return SlotInfo{}, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	conn := c
	var in SlotInfo
	if err := conn.QueryRow(ctx, `SHOW wal_level`).Scan(&in.WALLevel); err != nil {
		return in, s.wrap(err, "postgres-cdc source %s: wal_level", s.server)
	}
	var confirmed *string
	var lag *int64
	err = conn.QueryRow(ctx, `SELECT active, confirmed_flush_lsn::text, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, s.o.slot).Scan(&in.Active, &confirmed, &lag)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return in, nil
	case err != nil:
		return in, s.wrap(err, "postgres-cdc source %s: slot %s", s.server, s.o.slot)
	}
	in.Exists = true
	if confirmed != nil {
		in.Confirmed = *confirmed
	}
	if lag != nil {
		in.Lag = *lag
	}
	return in, nil
}

// Commit implements flightsrc.Source: the sink has durably committed
// req.Checkpoint, so the slot may confirm it. The open reader reports it
// in its next standby status update; without one the slot is advanced
// directly. A snapshot checkpoint confirms nothing (the slot stays at its
// consistent point until the snapshot is done).
func (s *Source) Commit(ctx context.Context, req flightsrc.CommitRequest) error {
	if req.Stream != s.o.table {
		return fmt.Errorf("%w: stream %q", flightline.ErrNotFound, req.Stream)
	}
	st, err := parseState(req.Checkpoint)
	if err != nil {
		return err
	}
	if st.snap != nil {
		return nil
	}
	s.mu.Lock()
	r := s.active
	s.mu.Unlock()
	if r != nil {
		r.confirm(st.lsn)
		return nil
	}
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	_, err = c.Exec(ctx, `SELECT pg_replication_slot_advance(slot_name, $2::pg_lsn) FROM pg_replication_slots
		WHERE slot_name = $1 AND NOT active AND confirmed_flush_lsn < $2::pg_lsn`, s.o.slot, st.lsn.String())
	if err != nil && sqlState(err) != "55006" { // 55006: a reader took the slot meanwhile; it confirms
		return s.wrap(err, "postgres-cdc source %s: advance slot %s", s.server, s.o.slot)
	}
	return nil
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// column is one column of the table.
type column struct {
	name   string
	oid    uint32
	typmod int32
	key    int // position in the primary key, -1 when not in it
}

// layout is the table as read.
type layout struct {
	oid      uint32
	cols     []column
	keys     []int // indices into cols, in key order
	keyInt   []bool
	schema   *arrow.Schema
	decoders []pgarrow.Decoder
	ident    byte // relreplident
	// The snapshot's page query, for COPY (…) TO STDOUT (FORMAT binary):
	// sel + " WHERE " + keyRow + " > (" + the last key's literals + ")" +
	// tail, or without the WHERE for the first page. COPY takes no
	// parameters, so the key is written as literals (see literal).
	sel, keyRow, tail string
}

func (s *Source) describe(ctx context.Context, c *pgx.Conn) (*layout, error) {
	tbl := s.id.Sanitize()
	var oid *uint32
	var ident *string
	if err := c.QueryRow(ctx, `SELECT to_regclass($1)::oid, (SELECT relreplident::text FROM pg_class WHERE oid = to_regclass($1))`, tbl).Scan(&oid, &ident); err != nil {
		return nil, s.wrap(err, "postgres-cdc source %s: look up %s", s.server, tbl)
	}
	if oid == nil {
		return nil, fmt.Errorf("%w: postgres-cdc source %s: table %s does not exist", flightline.ErrNotFound, s.server, tbl)
	}
	l := &layout{oid: *oid, ident: (*ident)[0]}
	if l.ident != 'd' && l.ident != 'f' {
		return nil, fmt.Errorf("%w: postgres-cdc source: table %s has REPLICA IDENTITY %s: deletes and key changes need DEFAULT (the primary key) or FULL: ALTER TABLE %s REPLICA IDENTITY DEFAULT",
			flightline.ErrFailedPrecondition, tbl, map[byte]string{'n': "NOTHING", 'i': "USING INDEX"}[l.ident], tbl)
	}
	rows, err := c.Query(ctx, `SELECT a.attname, a.atttypid, a.atttypmod, coalesce(array_position(i.indkey::int2[], a.attnum) - array_lower(i.indkey::int2[], 1), -1)
		FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, *oid)
	if err != nil {
		return nil, s.wrap(err, "postgres-cdc source %s: columns of %s", s.server, tbl)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		var pos int32
		err := r.Scan(&c.name, &c.oid, &c.typmod, &pos)
		c.key = int(pos)
		return c, err
	})
	if err != nil {
		return nil, s.wrap(err, "postgres-cdc source %s: columns of %s", s.server, tbl)
	}
	l.cols = cols
	var fields []arrow.Field
	var sel, order []string
	nkeys := 0
	for _, c := range cols {
		if c.key >= 0 {
			nkeys++
		}
	}
	l.keys = make([]int, nkeys)
	l.keyInt = make([]bool, nkeys)
	for i, c := range cols {
		dt, binary := pgarrow.ForPostgres(c.oid, c.typmod)
		if !binary {
			return nil, fmt.Errorf("%w: postgres-cdc source: table %s column %q: type oid %d is not in the binary type map (internal/pgarrow); change data capture reads binary values only",
				flightline.ErrInvalidInput, tbl, c.name, c.oid)
		}
		dec, err := pgarrow.NewDecoder(c.oid, dt)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", flightline.ErrInvalidInput, c.name, err)
		}
		l.decoders = append(l.decoders, dec)
		fields = append(fields, arrow.Field{Name: c.name, Type: dt, Nullable: c.key < 0})
		sel = append(sel, "src."+pgx.Identifier{c.name}.Sanitize())
		if c.key >= 0 {
			l.keys[c.key] = i
			q := "src." + pgx.Identifier{c.name}.Sanitize()
			switch c.oid {
			case pgarrow.OIDInt2, pgarrow.OIDInt4, pgarrow.OIDInt8:
				l.keyInt[c.key] = true
			case pgarrow.OIDText, pgarrow.OIDVarchar:
				q += ` COLLATE "C"` // byte order, as the stream compares keys
			default:
				return nil, fmt.Errorf("%w: postgres-cdc source: table %s: primary key column %q must be an integer or text (type oid %d)", flightline.ErrInvalidInput, tbl, c.name, c.oid)
			}
			order = append(order, q)
		}
	}
	if nkeys == 0 {
		return nil, fmt.Errorf("%w: postgres-cdc source: table %s has no primary key (the snapshot is read in key order and changes are applied by key)", flightline.ErrFailedPrecondition, tbl)
	}
	fields = append(fields,
		arrow.Field{Name: ColOp, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColLSN, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColCommitTime, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true})
	l.schema = arrow.NewSchema(fields, nil)
	l.sel = "SELECT " + strings.Join(sel, ", ") + " FROM " + tbl + " AS src"
	l.keyRow = "(" + strings.Join(order, ", ") + ")"
	l.tail = fmt.Sprintf(" ORDER BY %s LIMIT %d", strings.Join(order, ", "), s.o.batch)
	return l, nil
}

// check verifies the server and the publication, creating the publication
// when missing.
func (s *Source) check(ctx context.Context, c *pgx.Conn) error {
	var wal string
	if err := c.QueryRow(ctx, `SHOW wal_level`).Scan(&wal); err != nil {
		return s.wrap(err, "postgres-cdc source %s: wal_level", s.server)
	}
	if wal != "logical" {
		return fmt.Errorf("%w: postgres-cdc source %s: wal_level is %s; logical decoding needs wal_level = logical (ALTER SYSTEM SET wal_level = logical, then restart the server)", flightline.ErrFailedPrecondition, s.server, wal)
	}
	var exists, publishes bool
	err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1),
		EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid WHERE p.pubname = $1 AND r.prrelid = to_regclass($2))
		OR EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1 AND puballtables)`, s.o.publication, s.id.Sanitize()).Scan(&exists, &publishes)
	if err != nil {
		return s.wrap(err, "postgres-cdc source %s: publication %s", s.server, s.o.publication)
	}
	if !exists {
		_, err := c.Exec(ctx, `CREATE PUBLICATION `+pgx.Identifier{s.o.publication}.Sanitize()+` FOR TABLE `+s.id.Sanitize())
		if err != nil && sqlState(err) != "42710" { // 42710: created concurrently
			return s.wrap(err, "postgres-cdc source %s: create publication %s", s.server, s.o.publication)
		}
		return nil
	}
	if !publishes {
		return fmt.Errorf("%w: postgres-cdc source %s: publication %s does not publish %s (ALTER PUBLICATION %s ADD TABLE %s)",
			flightline.ErrFailedPrecondition, s.server, s.o.publication, s.id.Sanitize(), s.o.publication, s.id.Sanitize())
	}
	return nil
}

var _ flightsrc.Source = (*Source)(nil)

// lsnMax returns the greater LSN.
func lsnMax(a, b pglogrepl.LSN) pglogrepl.LSN {
	if a > b {
		return a
	}
	return b
}

// CheckDetail is what flightline check prints for the source: wal_level,
// the slot's state and its lag. wal_level other than logical is
// ErrFailedPrecondition.
func (s *Source) CheckDetail(ctx context.Context) (string, error) {
	in, err := s.Inspect(ctx)
	if err != nil {
		return "", err
	}
	if in.WALLevel != "logical" {
		return "", fmt.Errorf("%w: postgres-cdc source %s: wal_level is %s; logical decoding needs wal_level = logical (ALTER SYSTEM SET wal_level = logical, then restart the server)", flightline.ErrFailedPrecondition, s.server, in.WALLevel)
	}
	if !in.Exists {
		return fmt.Sprintf("wal_level=logical; slot %s not created yet (the first read creates it)", s.o.slot), nil
	}
	state := "idle"
	if in.Active {
		state = "in use"
	}
	return fmt.Sprintf("wal_level=logical; slot %s %s, confirmed %s, lag %d bytes", s.o.slot, state, in.Confirmed, in.Lag), nil
}

// pageSQL is the COPY of the snapshot's page after key after (the first
// page when after is empty). The key's values are checked (integers must
// parse) and written as quoted literals, which PostgreSQL types as the key
// columns, as it did the parameters of a prepared query.
func (l *layout) pageSQL(after []string) (string, error) {
	if len(after) == 0 {
		return "COPY (" + l.sel + l.tail + ") TO STDOUT (FORMAT binary)", nil
	}
	if len(after) != len(l.keys) {
		return "", fmt.Errorf("%w: checkpoint key %q has %d values, the table's primary key %d columns", flightline.ErrInvalidInput, after, len(after), len(l.keys))
	}
	lits := make([]string, len(after))
	for i, v := range after {
		if l.keyInt[i] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return "", fmt.Errorf("%w: checkpoint key %q: %v", flightline.ErrInvalidInput, after, err)
			}
			v = strconv.FormatInt(n, 10)
		}
		lit, err := literal(v)
		if err != nil {
			return "", fmt.Errorf("%w: checkpoint key %q: %v", flightline.ErrInvalidInput, after, err)
		}
		lits[i] = lit
	}
	return "COPY (" + l.sel + " WHERE " + l.keyRow + " > (" + strings.Join(lits, ", ") + ")" + l.tail + ") TO STDOUT (FORMAT binary)", nil
}

// literal quotes s as an escape string constant (E'…'), whose meaning does
// not depend on standard_conforming_strings. Text cannot hold NUL.
func literal(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", errors.New("a NUL byte")
	}
	var b strings.Builder
	b.Grow(len(s) + 3)
	b.WriteString("E'")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '\'':
			b.WriteByte(c)
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String(), nil
}

// lastKey returns the primary key of rec's last row as text, as the
// checkpoint names it (integers in decimal, text as is).
func (l *layout) lastKey(rec arrow.RecordBatch) []string {
	n := int(rec.NumRows()) - 1
	out := make([]string, len(l.keys))
	for k, ci := range l.keys {
		switch a := rec.Column(ci).(type) {
		case *array.Int16:
			out[k] = strconv.FormatInt(int64(a.Value(n)), 10)
		case *array.Int32:
			out[k] = strconv.FormatInt(int64(a.Value(n)), 10)
		case *array.Int64:
			out[k] = strconv.FormatInt(a.Value(n), 10)
		case *array.String:
			out[k] = strings.Clone(a.Value(n)) // Value aliases the batch's buffer
		}
	}
	return out
}
