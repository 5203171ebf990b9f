// Package adbc is a Flightline sink writing to any database with an ADBC
// driver (package adbc at the repository root opens it): PostgreSQL and
// SQLite through their C drivers, Flight SQL servers through the Go-native
// driver, and others.
//
// On a driver with transactions the sink is exactly-once: each batch is one
// transaction of the database,
//
//	begin; lock the checkpoint row (fencing, replay); bulk ingest the rows
//	(or a prepared INSERT bound to the batch where the driver has no bulk
//	ingest); store the checkpoint with a compare-and-set on the writer's
//	epoch; commit
//
// with the checkpoint table and its fencing from internal/sqlcheckpoint,
// shared with the PostgreSQL and Snowflake sinks. A table missing at the
// first batch is created from the batch's Arrow schema inside that same
// transaction (by the driver's ingest in create mode, or CREATE TABLE with
// adbc.ColumnType's types), so it rolls back with the batch where the
// database's DDL is transactional (PostgreSQL, SQLite). Columns of types
// drivers do not take are converted first (adbc.Normalize): views to their
// plain forms, nested types (Kafka headers) to JSON text.
//
// A driver without transactions cannot commit data and checkpoint together:
// New refuses it with ErrInvalidInput unless Config.AtLeastOnce is set, and
// then the sink keeps no checkpoint (the source's position decides where a
// pipeline resumes, and a replay writes its rows again).
package adbc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/changes"
	"github.com/flightline/flightline/internal/sqlcheckpoint"
)

// Config is what a Sink reads: the keys of the adbc: sink kind. The zero
// value of an optional field means its default.
type Config struct {
	// Config is the database: the driver, its URI and options, the
	// dialect (shared with the adbc source; adbc.Open opens it). NewOn,
	// given an open database, does not read it.
	fadbc.Config
	// Table is the default target table ("table" or "schema.table").
	// Pipeline.Target overrides it when not empty. "": none, every
	// pipeline names its target.
	Table string
	// CheckpointTable is the checkpoint table ("table" or
	// "schema.table"). "": the default, sqlcheckpoint.DefaultTable.
	CheckpointTable string
	// AtLeastOnce accepts a driver without transactions: the sink then
	// keeps no checkpoint and a replayed batch is written again. On a
	// driver with transactions it also turns the checkpoint off (each
	// batch still commits as one transaction).
	AtLeastOnce bool
	// Mode is how rows reach the target: ModeAppend (the default) ingests
	// every row; ModeUpsert applies each row as a change by Key (package
	// internal/changes: a row whose _op is "delete" deletes the target's
	// rows of its key, every other row replaces them; the last change of
	// a key in a batch wins; _op, _lsn and _commit_time are never
	// written). ModeUpsert needs a driver with transactions.
	Mode string
	// Key are the key columns of ModeUpsert (required there, refused
	// otherwise). The table needs no unique constraint on them: the sink
	// deletes the key's rows before it inserts the new one.
	Key []string
}

// The modes of Config.Mode.
const (
	ModeAppend = "append"
	ModeUpsert = "upsert"
)

// Option configures a Sink beyond its Config: logger, allocator, and the
// AddColumns and Serialize hooks of the DuckDB sink. Options apply only in
// New and NewOn.
type Option func(*options) error

type options struct {
	table       string
	cpTable     string
	atLeastOnce bool
	upsert      bool
	key         []string
	addColumns  bool
	serial      *sync.Mutex
	logger      *slog.Logger
	mem         memory.Allocator
}

// AddColumns evolves the target table: a batch column the table lacks is
// added to it (ALTER TABLE … ADD COLUMN, with adbc.ColumnType's type) in
// the batch's own transaction, so it rolls back with the batch where the
// database's DDL is transactional. Only nullable columns are added (the
// table's existing rows have no value for them); a missing NOT NULL column
// is still ErrSchemaMismatch. Without it every such batch is refused.
func AddColumns() Option {
	return func(o *options) error { o.addColumns = true; return nil }
}

// Serialize runs every database call of the sink (Checkpoint, Open, each
// batch, Close) under mu, which Sinks sharing one database share. DuckDB's
// ADBC driver crashed the process (SIGSEGV in the driver manager's calls)
// with several connections of one database busy at once, and one writer at
// a time is what a DuckDB file takes anyway.
func Serialize(mu *sync.Mutex) Option {
	return func(o *options) error { o.serial = mu; return nil }
}

// Logger sets the logger; nil means slog.Default().
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.logger = l
		return nil
	}
}

// Allocator sets the allocator of the columns the sink converts before
// ingest (adbc.Normalize); nil means memory.DefaultAllocator.
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.mem = mem
		return nil
	}
}

// Sink writes to one ADBC database. It is safe for concurrent use; each
// Writer holds a connection of its own.
type Sink struct {
	db      *fadbc.DB
	caps    fadbc.Caps
	dialect sqlcheckpoint.Dialect
	cp      *sqlcheckpoint.Table
	cpName  string
	table   string
	exactly bool
	log     *slog.Logger
	mem     memory.Allocator
	// blobsAsText: the checkpoint is bound as base64 text (base64Conn).
	blobsAsText bool
	upsert      bool     // ModeUpsert
	keyCols     []string // its Key
	addColumns  bool
	serial      *sync.Mutex // nil: calls run concurrently
	ownsDB      bool        // Close closes db (New); NewOn's caller closes it
	initMu      sync.Mutex
	initDone    bool
}

// New opens the database of cfg and returns a Sink writing to it: it
// loads the driver and connects at construction. It validates cfg (table
// names) and the options, and fails with ErrInvalidInput when the driver
// has no transactions and cfg.AtLeastOnce is false. Close releases the
// database.
func New(ctx context.Context, cfg Config, opts ...Option) (*Sink, error) {
	o, cpt, err := parseOptions(cfg, opts)
	if err != nil {
		return nil, err
	}
	db, err := fadbc.Open(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	s, err := newSink(db, cfg.Driver, o, cpt)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.ownsDB = true
	return s, nil
}

// NewOn returns a Sink writing to db, an open database that the Sink does
// not own: Close leaves db open, and the caller closes it after the Sink.
// Sinks sharing one db (the DuckDB sink's one database per file and
// process) fence each other through the checkpoint table as sinks in
// separate processes do. cfg.Config (the database) is not read: db is open
// already.
func NewOn(db *fadbc.DB, cfg Config, opts ...Option) (*Sink, error) {
	o, cpt, err := parseOptions(cfg, opts)
	if err != nil {
		return nil, err
	}
	return newSink(db, db.Driver(), o, cpt)
}

func parseOptions(cfg Config, opts []Option) (options, fadbc.Table, error) {
	o := options{table: cfg.Table, cpTable: sqlcheckpoint.DefaultTable, atLeastOnce: cfg.AtLeastOnce,
		logger: slog.Default(), mem: memory.DefaultAllocator}
	if cfg.CheckpointTable != "" {
		o.cpTable = cfg.CheckpointTable
	}
	switch cfg.Mode {
	case "", ModeAppend:
	case ModeUpsert:
		o.upsert = true
	default:
		return o, fadbc.Table{}, fmt.Errorf("%w: adbc sink: mode %q: want %s or %s", flightline.ErrInvalidInput, cfg.Mode, ModeAppend, ModeUpsert)
	}
	for _, k := range cfg.Key {
		if k == "" {
			return o, fadbc.Table{}, fmt.Errorf("%w: adbc sink: empty key column", flightline.ErrInvalidInput)
		}
		if changes.IsChangeColumn(k) {
			return o, fadbc.Table{}, fmt.Errorf("%w: adbc sink: key column %q is a change column, never written", flightline.ErrInvalidInput, k)
		}
	}
	if o.upsert && len(cfg.Key) == 0 {
		return o, fadbc.Table{}, fmt.Errorf("%w: adbc sink: mode %s needs key columns", flightline.ErrInvalidInput, ModeUpsert)
	}
	if !o.upsert && len(cfg.Key) > 0 {
		return o, fadbc.Table{}, fmt.Errorf("%w: adbc sink: key is for mode %s", flightline.ErrInvalidInput, ModeUpsert)
	}
	o.key = slices.Clone(cfg.Key)
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, fadbc.Table{}, err
		}
	}
	cpt, err := fadbc.ParseTable(o.cpTable)
	if err != nil {
		return o, cpt, err
	}
	if o.table != "" {
		if _, err := fadbc.ParseTable(o.table); err != nil {
			return o, cpt, err
		}
	}
	return o, cpt, nil
}

func newSink(db *fadbc.DB, driver string, o options, cpt fadbc.Table) (*Sink, error) {
	caps := db.Caps()
	if !caps.Transactions && !o.atLeastOnce {
		return nil, fmt.Errorf("%w: adbc sink: driver %q (%s) has no transactions, so a batch and its checkpoint cannot commit together; "+
			"ask for at-least-once delivery explicitly (Config.AtLeastOnce, or at_least_once=true) to write without a checkpoint",
			flightline.ErrInvalidInput, driver, caps.Vendor)
	}
	if o.upsert && !caps.Transactions {
		// Its deletes and inserts would land one by one: a failure between
		// them leaves keys deleted.
		return nil, fmt.Errorf("%w: adbc sink: driver %q (%s) has no transactions, which mode %s needs",
			flightline.ErrInvalidInput, driver, caps.Vendor, ModeUpsert)
	}
	s := &Sink{db: db, caps: caps, table: o.table, exactly: !o.atLeastOnce, log: o.logger, mem: o.mem,
		blobsAsText: driver == fadbc.FlightSQL, cpName: cpt.String(), addColumns: o.addColumns, serial: o.serial,
		upsert: o.upsert, keyCols: o.key}
	switch caps.Dialect {
	case fadbc.Postgres:
		s.dialect = sqlcheckpoint.Postgres
	case fadbc.SQLite:
		s.dialect = sqlcheckpoint.SQLite
	case fadbc.DuckDB:
		s.dialect = sqlcheckpoint.DuckDB
	default:
		s.dialect = sqlcheckpoint.Generic
	}
	s.cp = sqlcheckpoint.New(s.dialect, cpt.Quoted())
	s.log.Debug("adbc sink: opened", "driver", driver, "vendor", caps.Vendor, "dialect", caps.Dialect,
		"transactions", caps.Transactions, "bulk_ingest", caps.BulkIngest, "guarantee", s.Guarantee())
	return s, nil
}

// Caps returns what the driver was found to support.
func (s *Sink) Caps() fadbc.Caps { return s.caps }

// Guarantee implements flightsink.Guaranteer: exactly-once unless
// Config.AtLeastOnce was asked for.
func (s *Sink) Guarantee() flightsink.Guarantee {
	if s.exactly {
		return flightsink.ExactlyOnce
	}
	return flightsink.AtLeastOnce
}

// Close releases the database New opened (a Sink from NewOn releases
// nothing: its caller owns the database) and returns its error. Close the
// Writers first.
func (s *Sink) Close() error {
	if !s.ownsDB {
		return nil
	}
	return s.db.Close()
}

// lock takes the Serialize mutex, if any, and returns its unlock.
func (s *Sink) lock() func() {
	if s.serial == nil {
		return func() {}
	}
	s.serial.Lock()
	return s.serial.Unlock
}

// key is the checkpoint row's target for a Pipeline.Target: "" for the
// sink's default table, named or not.
func (s *Sink) key(target string) string {
	if target == s.table {
		return ""
	}
	return target
}

// ensureTable creates the checkpoint table once per Sink.
func (s *Sink) ensureTable(ctx context.Context, c *fadbc.Conn) error {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	if s.initDone {
		return nil
	}
	var err error
	for range 3 { // concurrent CREATE … IF NOT EXISTS can still collide on PostgreSQL
		if _, err = c.Exec(ctx, s.cp.CreateSQL()); err == nil || s.dialect.IsDuplicate == nil || !s.dialect.IsDuplicate(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("adbc sink: create checkpoint table %s: %w", s.cpName, err)
	}
	s.initDone = true
	return nil
}

// Checkpoint implements flightsink.Sink: it reads without locking or
// fencing; no checkpoint table means no checkpoint. An at-least-once sink
// has none.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	if p.ID == "" {
		return nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	if !s.exactly {
		return nil, nil
	}
	defer s.lock()()
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return s.cp.Read(ctx, s.cpConn(c), p.ID, s.key(p.Target))
}

// Open implements flightsink.Sink: it makes the checkpoint row if absent,
// then in one transaction raises its epoch (fencing every earlier Writer of
// p) and reads the checkpoint.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	name := p.Target
	if name == "" {
		name = s.table
	}
	if name == "" {
		return nil, nil, fmt.Errorf("%w: pipeline %q has no target table and the sink no default Table", flightline.ErrInvalidInput, p.ID)
	}
	target, err := fadbc.ParseTable(name)
	if err != nil {
		return nil, nil, err
	}
	defer s.lock()()
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	w := &writer{s: s, c: c, p: p, key: s.key(p.Target), target: target}
	if !s.exactly {
		return w, nil, nil
	}
	cp, err := w.claim(ctx)
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	s.log.Debug("adbc sink: pipeline opened", "pipeline", p.ID, "target", target.String(), "epoch", w.epoch)
	return w, cp, nil
}

// writer is the Writer of one pipeline at one epoch, on its own connection.
type writer struct {
	s      *Sink
	c      *fadbc.Conn
	p      flightsink.Pipeline
	key    string
	target fadbc.Table
	epoch  int64
	closed bool

	verified *arrow.Schema // the table's layout last checked against a batch schema
}

func (w *writer) claim(ctx context.Context) ([]byte, error) {
	s := w.s
	if err := s.ensureTable(ctx, w.c); err != nil {
		return nil, err
	}
	if err := s.cp.Ensure(ctx, s.cpConn(w.c), w.p.ID, w.key); err != nil {
		return nil, err
	}
	if err := w.c.Begin(ctx); err != nil {
		return nil, err
	}
	epoch, cp, err := s.cp.Claim(ctx, s.cpConn(w.c), w.p.ID, w.key)
	if err != nil {
		_ = w.c.Rollback(ctx)
		return nil, err
	}
	if err := w.c.Commit(ctx); err != nil {
		return nil, fmt.Errorf("adbc sink: claim pipeline %q: %w", w.p.ID, err)
	}
	w.epoch = epoch
	return cp, nil
}

// errCreateRace marks a table creation that lost to a concurrent one.
var errCreateRace = errors.New("adbc sink: table created concurrently")

// WriteBatch implements flightsink.Writer: one transaction per batch (see
// the package documentation).
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	defer w.s.lock()()
	for attempt := 0; ; attempt++ {
		err := w.writeOnce(ctx, rec, cp)
		// Pipelines creating one table at once: the loser rolled back; the
		// table exists now, so the batch goes in again.
		if !errors.Is(err, errCreateRace) || attempt >= 3 {
			return err
		}
	}
}

func (w *writer) writeOnce(ctx context.Context, rec arrow.RecordBatch, cp []byte) (err error) {
	s := w.s
	if w.closed {
		return fmt.Errorf("%w: writer of %q is closed", flightline.ErrInvalidInput, w.p.ID)
	}
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	rec, err = fadbc.Normalize(rec, s.mem)
	if err != nil {
		return fmt.Errorf("%w: adbc sink: %w", flightline.ErrInvalidInput, err)
	}
	defer rec.Release()
	if err := checkFields(s.caps, rec.Schema()); err != nil {
		return err
	}
	// ModeUpsert: the batch's changes, reduced and checked before any I/O;
	// rec becomes the data columns, the table's.
	var stage arrow.RecordBatch
	if s.upsert {
		data, st, err := s.reduce(rec)
		if err != nil {
			return err
		}
		defer data.Release()
		defer st.Release()
		rec, stage = data, st
	}
	if !s.caps.Transactions { // at-least-once without transactions: rows only
		create, err := w.prepare(ctx, rec)
		if err != nil {
			return err
		}
		if rec.NumRows() > 0 || create {
			if _, err := w.c.Ingest(ctx, w.target, rec, create); err != nil {
				w.verified = nil
				return w.createRace(err, create)
			}
		}
		return nil
	}
	if err := w.c.Begin(ctx); err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			_ = w.c.Rollback(context.WithoutCancel(ctx))
			w.verified = nil // the layout may be from the rolled-back transaction
		}
	}()
	var last []byte
	if s.exactly {
		if s.dialect.Name == sqlcheckpoint.SQLite.Name {
			// The driver's BEGIN is deferred: a transaction that reads
			// first and writes later fails (SQLITE_BUSY) when another
			// connection wrote in between. A write first takes the
			// database's write lock for the whole transaction; writers
			// then queue on the busy timeout.
			if _, err := w.c.Exec(ctx, "UPDATE "+s.cp.Name()+" SET epoch = epoch WHERE 1 = 0"); err != nil {
				return fmt.Errorf("adbc sink: take the write lock: %w", err)
			}
		}
		var replay bool
		last, replay, err = s.cp.Lock(ctx, s.cpConn(w.c), w.p.ID, w.key, w.epoch, cp)
		if err != nil {
			if errors.Is(err, flightline.ErrFenced) {
				s.log.Warn("adbc sink: fenced writer refused", "pipeline", w.p.ID, "target", w.target.String(), "epoch", w.epoch)
			}
			return err
		}
		if replay {
			return nil // the deferred rollback ends the transaction
		}
	}
	create, err := w.prepare(ctx, rec)
	if err != nil {
		return err
	}
	switch {
	case stage != nil:
		if create {
			empty := rec.NewSlice(0, 0)
			_, err := w.c.Ingest(ctx, w.target, empty, true)
			empty.Release()
			if err != nil {
				return w.createRace(err, true)
			}
		}
		if err := w.apply(ctx, rec.Schema(), stage); err != nil {
			return err
		}
	case rec.NumRows() > 0 || create:
		if _, err := w.c.Ingest(ctx, w.target, rec, create); err != nil {
			return w.createRace(err, create)
		}
	}
	if s.exactly {
		if err := s.cp.Advance(ctx, s.cpConn(w.c), w.p.ID, w.key, w.epoch, last, cp); err != nil {
			return err
		}
	}
	committed = true
	if err := w.c.Commit(ctx); err != nil {
		w.verified = nil
		return fmt.Errorf("adbc sink: commit batch of %q: %w", w.p.ID, err)
	}
	if create {
		s.log.Info("adbc sink: created table", "table", w.target.String(), "pipeline", w.p.ID)
	}
	return nil
}

// createRace turns the failure of a creating ingest into errCreateRace when
// the table now exists (another writer created it first).
func (w *writer) createRace(err error, create bool) error {
	if !create {
		return err
	}
	if w.s.caps.Dialect == fadbc.DuckDB && errors.Is(err, flightline.ErrConflict) {
		// DuckDB refuses the second of two transactions creating one
		// table while the first has not committed yet: the table may not
		// be visible here, but the next try finds it or creates it.
		return fmt.Errorf("%w: %w: table %s: %w", flightline.ErrConflict, errCreateRace, w.target, err)
	}
	c, cerr := w.s.db.Conn(context.Background())
	if cerr != nil {
		return err
	}
	defer c.Close()
	if sc, _ := c.TableSchema(context.Background(), w.target); sc != nil {
		return fmt.Errorf("%w: %w: table %s: %w", flightline.ErrConflict, errCreateRace, w.target, err)
	}
	return err
}

// prepare checks the table against rec's schema, or reports that it must be
// created (create true).
func (w *writer) prepare(ctx context.Context, rec arrow.RecordBatch) (create bool, err error) {
	sc := rec.Schema()
	if w.verified != nil && flightsink.SameSchema(w.verified, sc) {
		return false, nil
	}
	tsc, err := w.c.TableSchema(ctx, w.target)
	if err != nil {
		return false, err
	}
	if tsc == nil {
		return true, nil
	}
	if w.s.addColumns {
		if tsc, err = w.addColumns(ctx, sc, tsc); err != nil {
			return false, err
		}
	}
	if err := check(w.s.caps.Dialect, w.target, sc, tsc); err != nil {
		return false, err
	}
	w.verified = sc
	return false, nil
}

// addColumns adds to the table the nullable columns of sc it lacks and
// returns the table's schema with them. A NOT NULL column it lacks is left
// to check to refuse.
func (w *writer) addColumns(ctx context.Context, sc, tsc *arrow.Schema) (*arrow.Schema, error) {
	have := make(map[string]bool, tsc.NumFields())
	for _, f := range tsc.Fields() {
		have[f.Name] = true
	}
	fields := tsc.Fields()
	for _, f := range sc.Fields() {
		if have[f.Name] || !f.Nullable {
			continue
		}
		typ, err := fadbc.ColumnType(w.s.caps.Dialect, f.Type)
		if err != nil {
			return nil, fmt.Errorf("table %s: add column %q: %w", w.target, f.Name, err)
		}
		if _, err := w.c.Exec(ctx, "ALTER TABLE "+w.target.Quoted()+" ADD COLUMN "+fadbc.Quote(f.Name)+" "+typ); err != nil {
			return nil, fmt.Errorf("adbc sink: table %s: add column %q: %w", w.target, f.Name, err)
		}
		w.s.log.Info("adbc sink: added column", "table", w.target.String(), "column", f.Name, "type", typ, "pipeline", w.p.ID)
		fields = append(fields, f)
	}
	md := tsc.Metadata()
	return arrow.NewSchema(fields, &md), nil
}

// checkFields refuses, before any I/O, schemas no table can take.
func checkFields(caps fadbc.Caps, sc *arrow.Schema) error {
	seen := make(map[string]bool, sc.NumFields())
	for _, f := range sc.Fields() {
		if f.Name == "" {
			return fmt.Errorf("%w: a column has an empty name", flightline.ErrInvalidInput)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: duplicate column %q", flightline.ErrInvalidInput, f.Name)
		}
		seen[f.Name] = true
		// Without bulk ingest the sink creates tables with ColumnType's
		// types; DuckDB's ingest fails on Arrow types it has no column type
		// for (float16) with an error that does not say it is the input's.
		if !caps.BulkIngest || caps.Dialect == fadbc.DuckDB {
			if _, err := fadbc.ColumnType(caps.Dialect, f.Type); err != nil {
				return fmt.Errorf("column %q: %w", f.Name, err)
			}
		}
	}
	return nil
}

// family groups Arrow types a column of the table can take from the batch.
func family(t arrow.DataType) string {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return "integer"
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return "float"
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return "string"
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		return "binary"
	case arrow.BOOL:
		return "bool"
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		return "time"
	}
	return t.ID().String()
}

// check compares the table's columns (as the driver maps them to Arrow)
// with the batch: every field needs a column of its family; SQLite, which
// stores booleans as integers and times as integers or text, also takes
// those.
// Columns the batch lacks must be nullable.
func check(dialect string, t fadbc.Table, sc, tsc *arrow.Schema) error {
	cols := make(map[string]arrow.Field, tsc.NumFields())
	for _, f := range tsc.Fields() {
		cols[f.Name] = f
	}
	for _, f := range sc.Fields() {
		c, ok := cols[f.Name]
		if !ok {
			return fmt.Errorf("%w: table %s has no column %q (batch type %s)", flightline.ErrSchemaMismatch, t, f.Name, f.Type)
		}
		delete(cols, f.Name)
		bf, tf := family(f.Type), family(c.Type)
		if bf == tf || c.Type.ID() == arrow.NULL || // a SQLite column without declared type takes anything
			dialect == fadbc.SQLite && (bf == "integer" && tf == "float" || // NUMERIC affinity
				bf == "bool" && tf == "integer" || bf == "time" && (tf == "string" || tf == "integer")) {
			continue
		}
		return fmt.Errorf("%w: table %s: column %q holds %s, the batch has %s", flightline.ErrSchemaMismatch, t, f.Name, c.Type, f.Type)
	}
	for _, c := range cols {
		if !c.Nullable {
			return fmt.Errorf("%w: table %s: column %q is NOT NULL and missing from the batch", flightline.ErrSchemaMismatch, t, c.Name)
		}
	}
	return nil
}

// Close implements flightsink.Writer: it commits nothing and closes the
// writer's connection.
func (w *writer) Close(context.Context) error {
	if w.closed {
		return nil
	}
	w.closed = true
	defer w.s.lock()()
	return w.c.Close()
}

var _ flightsink.Sink = (*Sink)(nil)
var _ flightsink.Guaranteer = (*Sink)(nil)
