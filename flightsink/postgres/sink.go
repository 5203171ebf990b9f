package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/changes"
	"github.com/flightline/flightline/internal/pgarrow"
	"github.com/flightline/flightline/internal/pgerr"
	"github.com/flightline/flightline/internal/sqlcheckpoint"
)

// DefaultCheckpointTable is where checkpoints and fencing epochs live.
const DefaultCheckpointTable = sqlcheckpoint.DefaultTable

// DefaultIdleInTransactionTimeout is the sink sessions'
// idle_in_transaction_session_timeout unless the DSN sets one.
const DefaultIdleInTransactionTimeout = "30s"

// Config is what a postgres sink is given in its URL or YAML.
type Config struct {
	// DSN is the database: a postgres:// URL or a key=value string, as pgx
	// accepts. Required.
	DSN string
	// Table is the default target table ("table" or "schema.table",
	// quoted parts allowed). Pipeline.Target overrides it when non-empty.
	Table string
	// CheckpointTable is the checkpoint table (default
	// DefaultCheckpointTable, in the first schema of the search_path).
	CheckpointTable string
	// Mode is how rows reach the target: ModeAppend (the default) COPYs
	// every row; ModeUpsert applies each row as a change by Key: a row
	// whose _op column is "delete" deletes the target's row of its key,
	// every other row is written with INSERT … ON CONFLICT (key) DO
	// UPDATE. Within one batch the last change of a key wins, as it would
	// applied in order. The ChangeColumns are not written. Upserts and
	// deletes commit in the transaction of the batch's checkpoint, so a
	// replayed batch changes nothing.
	Mode string
	// Key are the key columns of ModeUpsert (required there, refused
	// otherwise). A table the sink creates gets them as its primary key;
	// an existing one needs a primary key or unique index on exactly them.
	Key []string
	// Instance names this sink instance within its pipelines, for a
	// pipeline scaled out over several processes (one consumer group):
	// each instance keeps its own checkpoint row per (pipeline, target).
	// Writers of one instance fence each other (the newest Open wins);
	// instances do not fence each other. Open and Checkpoint return the
	// checkpoint merged over all instances (the per-partition maximum), and
	// a writer whose batch names a partition another instance moved since
	// its Open is refused with ErrConflict (re-open), so a partition
	// handed over between instances is never written twice. Empty (the
	// default): the default instance, whose rows are those of a checkpoint
	// table from before instances.
	Instance string
	// MaxConns bounds the connection pool (default pgxpool's: max(4,
	// CPUs)).
	MaxConns int
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	mode     string
	key      []string
	table    string
	cpTable  string
	instance string
	logger   *slog.Logger
	maxConns int32
}

// The modes of Config.Mode.
const (
	ModeAppend = "append"
	ModeUpsert = "upsert"
)

// ChangeColumns are the columns of a change stream (the postgres-cdc
// source's _op, _lsn and _commit_time) that ModeUpsert reads but never
// writes to the target.
var ChangeColumns = changes.Columns

// Logger sets the logger; nil means slog.Default(), the default.
// Nothing logged contains the password.
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.logger = l
		return nil
	}
}

// Sink is an exactly-once PostgreSQL sink. It is safe for concurrent use by
// several pipelines; see the package documentation for how it commits and
// fences.
type Sink struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	password string
	server   string // user@host:port/db, for errors and logs
	table    pgx.Identifier
	cp       pgx.Identifier
	ck       *sqlcheckpoint.Instances
	instance string
	q        queries
	upsert   bool
	key      []string

	initMu   sync.Mutex
	initDone bool
}

// queries read and migrate checkpoint tables of earlier layouts: one row
// per pipeline, then one per (pipeline, target), now one per (pipeline,
// target, instance).
type queries struct {
	readOld, readTarget, hasColumn, pkey, addTarget, addInstance, newPkey string
}

// New returns a Sink writing to the database at cfg.DSN. It does not
// connect (it makes the connection pool, which connects on first use):
// connection and authentication errors surface on the first Open or
// Checkpoint (or Ping). It validates cfg (the DSN, the table names, the
// mode and its key, the pool size). Close releases the connection pool.
func New(_ context.Context, cfg Config, opts ...Option) (*Sink, error) {
	dsn := cfg.DSN
	o := options{table: cfg.Table, cpTable: cfg.CheckpointTable, instance: cfg.Instance, logger: slog.Default()}
	if o.cpTable == "" {
		o.cpTable = DefaultCheckpointTable
	}
	switch cfg.Mode {
	case "", ModeAppend:
		o.mode = ModeAppend
	case ModeUpsert:
		o.mode = ModeUpsert
	default:
		return nil, fmt.Errorf("%w: mode %q: want %s or %s", flightline.ErrInvalidInput, cfg.Mode, ModeAppend, ModeUpsert)
	}
	for _, c := range cfg.Key {
		if c == "" {
			return nil, fmt.Errorf("%w: empty key column", flightline.ErrInvalidInput)
		}
	}
	o.key = cfg.Key
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("%w: MaxConns %d < 1", flightline.ErrInvalidInput, cfg.MaxConns)
	}
	o.maxConns = int32(cfg.MaxConns)
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.mode == ModeUpsert && len(o.key) == 0 {
		return nil, fmt.Errorf("%w: postgres sink: mode %s needs key columns", flightline.ErrInvalidInput, ModeUpsert)
	}
	if o.mode != ModeUpsert && len(o.key) > 0 {
		return nil, fmt.Errorf("%w: postgres sink: key is for mode %s", flightline.ErrInvalidInput, ModeUpsert)
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, pgerr.ParseError(err, dsn)
	}
	if o.maxConns > 0 {
		pcfg.MaxConns = o.maxConns
	}
	if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "flightline-sink"
	}
	if pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] == "" {
		// A writer cut off from the server mid-transaction (a network
		// partition) holds its checkpoint row locks until the server ends
		// its session; this bounds that wait for the writers it blocks (the
		// next Open of its pipeline, the other instances' commits). The
		// sink never idles inside a transaction on purpose.
		pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = DefaultIdleInTransactionTimeout
	}
	s := &Sink{log: o.logger, password: pcfg.ConnConfig.Password, server: pgerr.Describe(&pcfg.ConnConfig.Config), instance: o.instance,
		upsert: o.mode == ModeUpsert, key: o.key}
	if o.table != "" {
		if s.table, err = pgerr.ParseIdent(o.table); err != nil {
			return nil, err
		}
	}
	if s.cp, err = pgerr.ParseIdent(o.cpTable); err != nil {
		return nil, err
	}
	cp := s.cp.Sanitize()
	if s.ck, err = sqlcheckpoint.NewInstances(sqlcheckpoint.Postgres, cp); err != nil {
		return nil, err
	}
	s.q = queries{
		hasColumn:   `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped)`,
		readOld:     `SELECT checkpoint FROM ` + cp + ` WHERE pipeline_id = $1`,
		readTarget:  `SELECT checkpoint FROM ` + cp + ` WHERE pipeline_id = $1 AND target = $2`,
		pkey:        `SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p'`,
		addTarget:   `ALTER TABLE ` + cp + ` ADD COLUMN IF NOT EXISTS target text NOT NULL DEFAULT ''`,
		addInstance: `ALTER TABLE ` + cp + ` ADD COLUMN IF NOT EXISTS instance text NOT NULL DEFAULT ''`,
		newPkey:     `ALTER TABLE ` + cp + ` ADD PRIMARY KEY (pipeline_id, target, instance)`,
	}
	if s.pool, err = pgxpool.NewWithConfig(context.Background(), pcfg); err != nil {
		return nil, s.wrap(err, "postgres sink: pool for %s", s.server)
	}
	return s, nil
}

// Guarantee implements flightsink.Guaranteer: data and checkpoint commit in
// one PostgreSQL transaction.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// Close releases the connection pool. Writers of the sink fail afterwards.
// It returns nil; the error is there so every connector closes alike
// (io.Closer).
func (s *Sink) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database is reachable with the configured
// credentials.
func (s *Sink) Ping(ctx context.Context) error {
	return s.wrap(s.pool.Ping(ctx), "postgres sink: connect to %s", s.server)
}

func (s *Sink) wrap(err error, format string, args ...any) error {
	return pgerr.Wrap(err, s.password, format, args...)
}

// ensureCheckpointTable creates the checkpoint table once per Sink.
func (s *Sink) ensureCheckpointTable(ctx context.Context) error {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	if s.initDone {
		return nil
	}
	// Look first: CREATE … IF NOT EXISTS needs the CREATE right on the
	// schema even when the table exists, and a least-privileged role has
	// only SELECT, INSERT, UPDATE on an existing checkpoint table.
	var exists bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.cp.Sanitize()).Scan(&exists)
	if err == nil && exists {
		if err := s.migrate(ctx); err != nil {
			return err
		}
		s.initDone = true
		return nil
	}
	for range 3 { // concurrent CREATE … IF NOT EXISTS can still collide
		if _, err = s.pool.Exec(ctx, s.ck.CreateSQL()); err == nil || !isDuplicate(err) {
			break
		}
	}
	if err != nil {
		return s.wrap(err, "postgres sink %s: create checkpoint table %s", s.server, s.cp.Sanitize())
	}
	s.initDone = true
	return nil
}

// migrate brings a checkpoint table of an earlier layout to the current
// one, in one transaction holding the table's lock: a table from before
// targets gets the column target (its rows become the pipelines'
// default-target rows, an empty target, which is what they were), one from
// before instances the column instance (its rows become the default
// instance's, an empty instance), and the key becomes (pipeline_id, target,
// instance). Checkpoints and epochs are kept. Sinks of an earlier version
// still writing to the table afterwards can no longer create rows (their
// INSERT … ON CONFLICT names the old key): upgrade the sinks of a database
// together.
func (s *Sink) migrate(ctx context.Context) error {
	has := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, col string) (bool, error) {
		var ok bool
		err := q.QueryRow(ctx, s.q.hasColumn, s.cp.Sanitize(), col).Scan(&ok)
		return ok, err
	}
	ok, err := has(s.pool, "instance")
	if err != nil {
		return s.wrap(err, "postgres sink %s: inspect checkpoint table %s", s.server, s.cp.Sanitize())
	}
	if ok {
		return nil
	}
	var added []string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Concurrent migrations: the second waits here and finds the work done.
		if _, err := tx.Exec(ctx, `LOCK TABLE `+s.cp.Sanitize()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			return err
		}
		for _, c := range []struct{ col, add string }{{"target", s.q.addTarget}, {"instance", s.q.addInstance}} {
			ok, err := has(tx, c.col)
			if err != nil {
				return err
			}
			if ok {
				continue
			}
			if _, err := tx.Exec(ctx, c.add); err != nil {
				return err
			}
			added = append(added, c.col)
		}
		if len(added) == 0 {
			return nil
		}
		var name string
		switch err := tx.QueryRow(ctx, s.q.pkey, s.cp.Sanitize()).Scan(&name); {
		case err == nil:
			if _, err := tx.Exec(ctx, `ALTER TABLE `+s.cp.Sanitize()+` DROP CONSTRAINT `+pgx.Identifier{name}.Sanitize()); err != nil {
				return err
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		_, err := tx.Exec(ctx, s.q.newPkey)
		return err
	})
	if err != nil {
		return s.wrap(err, "postgres sink %s: add the target and instance columns to checkpoint table %s (run as its owner once)", s.server, s.cp.Sanitize())
	}
	if len(added) > 0 {
		s.log.Info("postgres sink: checkpoint table now keyed by (pipeline_id, target, instance)", "table", s.cp.Sanitize(), "added", strings.Join(added, ","))
	}
	return nil
}

// isDuplicate tells a CREATE that lost a race with a concurrent one.
func isDuplicate(err error) bool { return sqlcheckpoint.Postgres.IsDuplicate(err) }

// Checkpoint implements flightsink.Sink: the checkpoint merged over the
// pipeline's instances. It reads without locking or fencing; a missing
// checkpoint table means no checkpoint, and one of an earlier layout (which
// Open migrates) is read as it is.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	if p.ID == "" {
		return nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	key, err := s.targetKey(p.Target)
	if err != nil {
		return nil, err
	}
	cp, err := s.ck.Read(ctx, pgxConn{s.pool}, p.ID, key)
	if sqlState(err) == "42703" { // a table from before instances: its rows are the default instance's
		err = s.pool.QueryRow(ctx, s.q.readTarget, p.ID, key).Scan(&cp)
		if sqlState(err) == "42703" { // from before targets, too
			if key != "" {
				return nil, nil
			}
			err = s.pool.QueryRow(ctx, s.q.readOld, p.ID).Scan(&cp)
		}
		if errors.Is(err, pgx.ErrNoRows) || sqlState(err) == "42P01" {
			return nil, nil
		}
	}
	if err != nil {
		return nil, s.wrap(err, "postgres sink %s: read checkpoint of %q", s.server, p.ID)
	}
	return cp, nil
}

// Open implements flightsink.Sink. It creates the instance's checkpoint row
// if absent, then in its own transaction bumps the row's epoch, which
// fences every earlier Writer of the (pipeline, target) in this instance,
// and returns the checkpoint merged over the instances, read in that
// transaction.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	target := s.table
	key, err := s.targetKey(p.Target)
	if err != nil {
		return nil, nil, err
	}
	if p.Target != "" {
		target, _ = pgerr.ParseIdent(p.Target)
	}
	if len(target) == 0 {
		return nil, nil, fmt.Errorf("%w: pipeline %q has no target table and the sink no default Table", flightline.ErrInvalidInput, p.ID)
	}
	if err := s.ensureCheckpointTable(ctx); err != nil {
		return nil, nil, err
	}
	if err := s.ck.Ensure(ctx, pgxConn{s.pool}, p.ID, key, s.instance); err != nil {
		return nil, nil, s.wrap(err, "postgres sink %s: open pipeline %q", s.server, p.ID)
	}
	var lease *sqlcheckpoint.Lease
	var cp []byte
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		lease, cp, err = s.ck.Claim(ctx, pgxConn{tx}, p.ID, key, s.instance)
		return err
	})
	if err != nil {
		return nil, nil, s.wrap(err, "postgres sink %s: open pipeline %q", s.server, p.ID)
	}
	s.log.Debug("postgres sink: pipeline opened", "pipeline", p.ID, "target", target.Sanitize(), "instance", s.instance, "epoch", lease.Epoch, "server", s.server)
	return &writer{s: s, p: p, key: key, target: target, lease: lease}, cp, nil
}

// targetKey is the checkpoint row's target column for a Pipeline.Target:
// the empty string for the sink's default table, named or not, else the
// parsed name sanitised (orders and "orders" are one key; public.orders
// another).
func (s *Sink) targetKey(target string) (string, error) {
	if target == "" {
		return "", nil
	}
	id, err := pgerr.ParseIdent(target)
	if err != nil {
		return "", err
	}
	if len(s.table) > 0 && id.Sanitize() == s.table.Sanitize() {
		return "", nil
	}
	return id.Sanitize(), nil
}

// writer is the Writer of one pipeline instance at one epoch.
type writer struct {
	s      *Sink
	p      flightsink.Pipeline
	key    string // the checkpoint row's target column
	target pgx.Identifier
	lease  *sqlcheckpoint.Lease
	closed bool

	// The table layout last verified against a batch schema; reused while
	// batches keep that schema. A concurrent ALTER TABLE then makes COPY
	// fail, which rolls the batch back.
	verified *arrow.Schema
	colOIDs  []uint32
	colTypes []string
	copySQL  string
	notNull  []bool
	created  bool // this transaction created the table
}

// WriteBatch implements flightsink.Writer. One transaction: read the
// checkpoint rows and compare epochs (ErrFenced), skip replays, refuse a
// partition another instance moved since Open (ErrConflict), create or
// check the table, COPY the rows in binary, lock the checkpoint rows
// (SELECT … FOR UPDATE), check again and update the instance's checkpoint,
// commit.
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	return w.write(ctx, []flightsink.Batch{{Rec: rec, CP: cp}})
}

// WriteBatches implements flightsink.GroupWriter: the transaction of
// WriteBatch holding every new batch of the group (one COPY each) and the
// group's checkpoint (flightsink.Fold), committed once.
func (w *writer) WriteBatches(ctx context.Context, batches []flightsink.Batch) error {
	if err := flightsink.CheckGroup(batches); err != nil {
		return err
	}
	return w.write(ctx, batches)
}

func (w *writer) write(ctx context.Context, batches []flightsink.Batch) error {
	for attempt := 0; ; attempt++ {
		err := w.writeOnce(ctx, batches)
		// Pipelines creating one table at once: the loser's transaction
		// rolled back; the table exists now, so the batch goes in again.
		if !errors.Is(err, errCreateRace) || attempt >= 3 {
			return err
		}
	}
}

// errCreateRace marks a CREATE TABLE that lost to a concurrent one.
var errCreateRace = errors.New("postgres sink: table created concurrently")

func (w *writer) writeOnce(ctx context.Context, batches []flightsink.Batch) error {
	s := w.s
	if w.closed {
		return fmt.Errorf("%w: writer of %q is closed", flightline.ErrInvalidInput, w.p.ID)
	}
	for _, b := range batches {
		if err := checkFields(b.Rec.Schema()); err != nil {
			return err
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.wrap(err, "postgres sink %s: begin", s.server)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after Commit

	last, _, err := s.ck.Lock(ctx, pgxConn{tx}, w.lease, batches[0].CP)
	if errors.Is(err, flightline.ErrFenced) || errors.Is(err, flightline.ErrConflict) {
		s.log.Warn("postgres sink: writer refused", "pipeline", w.p.ID, "target", w.key, "instance", w.s.instance, "err", err)
		return err
	}
	if err != nil {
		return s.wrap(err, "postgres sink %s: lock checkpoint of %q", s.server, w.p.ID)
	}
	fresh, _, n := flightsink.Fold(last, batches)
	if n == 0 {
		return nil // every batch is a replay
	}
	var add []byte // what this commit adds: the fold of its new batches only
	for i, b := range batches {
		if fresh[i] {
			add = checkpoint.Next(add, b.CP)
		}
	}
	committed := false
	defer func() {
		if !committed { // the layout may have been created by this rolled-back tx
			w.verified, w.created = nil, false
		}
	}()
	for i, b := range batches {
		if !fresh[i] {
			continue
		}
		rec := b.Rec
		if s.upsert {
			if err := w.upsert(ctx, tx, rec); err != nil {
				return err
			}
			continue
		}
		if err := w.prepare(ctx, tx, rec); err != nil {
			return err
		}
		if rec.NumRows() == 0 {
			continue
		}
		enc, err := pgarrow.NewRowEncoder(rec, w.colOIDs)
		if err != nil {
			return err
		}
		cr := pgarrow.NewCopyReader(enc)
		_, err = tx.Conn().PgConn().CopyFrom(ctx, cr, w.copySQL)
		// CopyFrom can return (cancelled, or on a server error) while its
		// goroutine is still reading cr, i.e. rec: wait it out before rec
		// can be released.
		cr.Close()
		if err != nil {
			if e := enc.Err(); e != nil {
				return e
			}
			return s.wrap(err, "postgres sink %s: COPY into %s", s.server, w.target.Sanitize())
		}
	}
	if err := s.ck.Advance(ctx, pgxConn{tx}, w.lease, add); err != nil {
		if errors.Is(err, flightline.ErrFenced) || errors.Is(err, flightline.ErrConflict) {
			s.log.Warn("postgres sink: writer refused", "pipeline", w.p.ID, "target", w.key, "instance", w.s.instance, "err", err)
			return err
		}
		return s.wrap(err, "postgres sink %s: update checkpoint of %q", s.server, w.p.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.wrap(err, "postgres sink %s: commit batch of %q", s.server, w.p.ID)
	}
	committed = true
	if w.created {
		w.created = false
		s.log.Info("postgres sink: created table", "table", w.target.Sanitize(), "pipeline", w.p.ID)
	}
	return nil
}

// checkFields refuses, before any I/O, schemas the type map cannot store.
func checkFields(sc *arrow.Schema) error {
	seen := make(map[string]bool, sc.NumFields())
	for _, f := range sc.Fields() {
		if f.Name == "" {
			return fmt.Errorf("%w: a column has an empty name", flightline.ErrInvalidInput)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: duplicate column %q", flightline.ErrInvalidInput, f.Name)
		}
		seen[f.Name] = true
		if _, err := pgarrow.ForArrow(f.Type); err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return nil
}

type column struct {
	name       string
	oid        uint32
	typ        string // format_type, e.g. "character varying(20)"
	notNull    bool
	hasDefault bool
}

const columnsSQL = `SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef
	FROM pg_attribute a
	WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum`

// prepare makes sure the target exists with columns fitting rec's schema,
// creating it from the schema when missing, inside tx.
func (w *writer) prepare(ctx context.Context, tx pgx.Tx, rec arrow.RecordBatch) error {
	sc := rec.Schema()
	if w.verified == nil || !flightsink.SameSchema(w.verified, sc) {
		cols, err := w.columns(ctx, tx)
		if err != nil {
			return err
		}
		if cols == nil {
			if err := w.create(ctx, tx, sc); err != nil {
				return err
			}
			if cols, err = w.columns(ctx, tx); err != nil {
				return err
			}
		}
		if err := w.check(sc, cols); err != nil {
			return err
		}
	}
	// Nullability is a property of this batch's data (in upsert mode, of
	// its rows that are not deletes: the INSERT checks them).
	for i, f := range sc.Fields() {
		if w.s.upsert {
			break
		}
		if rec.Column(i).NullN() > 0 && w.notNull[i] {
			return fmt.Errorf("%w: table %s: column %q is NOT NULL, the batch has %d nulls in it",
				flightline.ErrSchemaMismatch, w.target.Sanitize(), f.Name, rec.Column(i).NullN())
		}
	}
	return nil
}

func (w *writer) columns(ctx context.Context, tx pgx.Tx) ([]column, error) {
	var oid *uint32
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1)::oid`, w.target.Sanitize()).Scan(&oid); err != nil {
		return nil, w.s.wrap(err, "postgres sink %s: look up table %s", w.s.server, w.target.Sanitize())
	}
	if oid == nil {
		return nil, nil
	}
	rows, err := tx.Query(ctx, columnsSQL, *oid)
	if err != nil {
		return nil, w.s.wrap(err, "postgres sink %s: read columns of %s", w.s.server, w.target.Sanitize())
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		err := r.Scan(&c.name, &c.oid, &c.typ, &c.notNull, &c.hasDefault)
		return c, err
	})
	if err != nil {
		return nil, w.s.wrap(err, "postgres sink %s: read columns of %s", w.s.server, w.target.Sanitize())
	}
	if cols == nil {
		cols = []column{}
	}
	return cols, nil
}

func (w *writer) create(ctx context.Context, tx pgx.Tx, sc *arrow.Schema) error {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(w.target.Sanitize())
	b.WriteString(" (")
	for i, f := range sc.Fields() {
		t, err := pgarrow.ForArrow(f.Type)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{f.Name}.Sanitize())
		b.WriteByte(' ')
		b.WriteString(t.SQL)
		if !f.Nullable {
			b.WriteString(" NOT NULL")
		}
	}
	if w.s.upsert {
		b.WriteString(", PRIMARY KEY (")
		for i, k := range w.s.key {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pgx.Identifier{k}.Sanitize())
		}
		b.WriteString(")")
	}
	b.WriteString(")")
	if _, err := tx.Exec(ctx, b.String()); err != nil {
		if isDuplicate(err) {
			// Another transaction created the table concurrently (IF NOT
			// EXISTS does not serialise that): retrying finds the table.
			return fmt.Errorf("%w: %w: table %s was created concurrently; retry", flightline.ErrConflict, errCreateRace, w.target.Sanitize())
		}
		return w.s.wrap(err, "postgres sink %s: create table %s", w.s.server, w.target.Sanitize())
	}
	w.created = true // logged once the transaction commits
	return nil
}

// check compares the table's columns with the batch schema: every field
// needs a column of a type it can be written into; columns the batch lacks
// must be nullable or have a default.
func (w *writer) check(sc *arrow.Schema, cols []column) error {
	byName := make(map[string]column, len(cols))
	for _, c := range cols {
		byName[c.name] = c
	}
	tbl := w.target.Sanitize()
	oids := make([]uint32, sc.NumFields())
	types := make([]string, sc.NumFields())
	notNull := make([]bool, sc.NumFields())
	names := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		c, ok := byName[f.Name]
		if !ok {
			return fmt.Errorf("%w: table %s has no column %q (batch type %s)", flightline.ErrSchemaMismatch, tbl, f.Name, f.Type)
		}
		if !pgarrow.Accepts(f.Type, c.oid) {
			want, _ := pgarrow.ForArrow(f.Type)
			return fmt.Errorf("%w: table %s: column %q has type %s, the batch has %s (which maps to %s)",
				flightline.ErrSchemaMismatch, tbl, f.Name, c.typ, f.Type, want.SQL)
		}
		oids[i], notNull[i], types[i] = c.oid, c.notNull, c.typ
		names[i] = pgx.Identifier{f.Name}.Sanitize()
		delete(byName, f.Name)
	}
	for _, c := range cols {
		if _, left := byName[c.name]; left && c.notNull && !c.hasDefault {
			return fmt.Errorf("%w: table %s: column %q (%s) is NOT NULL without default and missing from the batch",
				flightline.ErrSchemaMismatch, tbl, c.name, c.typ)
		}
	}
	w.verified, w.colOIDs, w.notNull, w.colTypes = sc, oids, notNull, types
	w.copySQL = "COPY " + tbl + " (" + strings.Join(names, ", ") + ") FROM STDIN (FORMAT binary)"
	return nil
}

// Close implements flightsink.Writer. It commits nothing.
func (w *writer) Close(context.Context) error {
	w.closed = true
	return nil
}

var _ flightsink.Sink = (*Sink)(nil)
var _ flightsink.Guaranteer = (*Sink)(nil)

func sqlState(err error) string { return sqlcheckpoint.SQLState(err) }

// pgxConn adapts a pgx pool, connection or transaction to
// sqlcheckpoint.Conn.
type pgxConn struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (c pgxConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (c pgxConn) Query(ctx context.Context, q string, scan func(row func(dest ...any) error) error, args ...any) error {
	x, ok := c.q.(interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	})
	if !ok {
		return fmt.Errorf("%w: postgres sink: %T cannot query rows", flightline.ErrInvalidInput, c.q)
	}
	rows, err := x.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (c pgxConn) QueryRow(ctx context.Context, q string, dest []any, args ...any) (bool, error) {
	err := c.q.QueryRow(ctx, q, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
