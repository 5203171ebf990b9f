package snowflake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	sf "github.com/snowflakedb/gosnowflake"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/parquetw"
	"github.com/flightline/flightline/internal/snowconn"
	"github.com/flightline/flightline/internal/sqlcheckpoint"
)

// DefaultStage is the internal stage batches are PUT to, in the session's
// schema, created on first use when absent.
const DefaultStage = "FLIGHTLINE_STAGE"

// Column matching modes of COPY INTO … MATCH_BY_COLUMN_NAME.
const (
	MatchCaseSensitive   = "CASE_SENSITIVE"
	MatchCaseInsensitive = "CASE_INSENSITIVE"
)

// Config is what a Sink reads: the keys of the snowflake: sink kind. The
// zero value of an optional field means its default.
type Config struct {
	// Config is the account: user, credentials, database, schema,
	// warehouse, role, endpoint and timeouts (shared with the source).
	snowconn.Config
	// Table is the default target table ("t", "schema.t" or
	// "db.schema.t"; unquoted parts are upper-cased as Snowflake does,
	// double-quoted parts keep their case). Pipeline.Target overrides it
	// when non-empty. "": none, every pipeline names its target.
	Table string
	// CheckpointTable is the checkpoint table. "": the default,
	// sqlcheckpoint.DefaultTable, quoted, in the session's schema.
	CheckpointTable string
	// Stage is the internal stage batches go through. "": the default,
	// DefaultStage in the session's schema. It is created when absent; a
	// stage shared with other loaders is fine (files go under a
	// per-pipeline prefix).
	Stage string
	// Match is COPY's MATCH_BY_COLUMN_NAME, in any case: MatchCaseSensitive
	// ("": the default; Arrow field names are the table's quoted column
	// names) or MatchCaseInsensitive (for tables created elsewhere with
	// unquoted, upper case, names; batches whose field names differ only
	// in case are then refused).
	Match string
	// RetryFor bounds how long Open, Checkpoint and WriteBatch retry
	// session and network failures, with backoff, before they fail with
	// ErrUnavailable. 0: the default, 2 minutes; negative is refused. Each
	// try is itself bounded by the connection's Timeout.
	RetryFor time.Duration
	// MaxConns bounds the sessions the sink opens. 0: the default, 8;
	// otherwise at least 2 (a batch's PUT runs on a second session while
	// its transaction holds the first).
	MaxConns int
}

// Option configures a Sink beyond its Config: logger, allocator. Options
// apply only in New.
type Option func(*options) error

type options struct {
	logger *slog.Logger
	mem    memory.Allocator
}

// Logger sets the logger (nil: slog.Default()). Nothing logged holds a
// secret.
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.logger = l
		return nil
	}
}

// Allocator sets the allocator the Parquet encoder uses (nil: Go's).
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error { o.mem = mem; return nil }
}

// Sink is the exactly-once Snowflake sink. It is safe for concurrent use by
// several pipelines; see the package documentation for how it commits.
type Sink struct {
	db    *sql.DB
	cfg   snowconn.Config
	log   *slog.Logger
	mem   memory.Allocator
	retry time.Duration
	match string
	// maxConns is the pool's size (open and idle).
	maxConns int

	table   []string // default target, parsed; nil when none
	stage   string   // quoted, for @stage
	cpTable *sqlcheckpoint.Table

	initMu   sync.Mutex
	initDone bool

	removeWarned atomic.Bool
	tc           timingCounters
}

// Timing is where a sink's WriteBatch time went, summed over every batch
// since the sink was made (read it with Sink.Timing).
type Timing struct {
	Batches, Rows, ParquetBytes int64
	Encode, Put, Copy, Commit   time.Duration
}

type timingCounters struct {
	batches, rows, bytes, encode, put, copy, commit atomic.Int64
}

// New returns a Sink on the account cfg names. It does not connect: the
// first Open or Checkpoint (or Ping) does, and fails there with a
// classified error (wrong credentials ErrUnauthenticated, a missing
// database or warehouse ErrNotFound naming it). It validates cfg (table,
// stage and checkpoint table names, match mode, retry budget, pool size)
// and the options. Close releases the sessions.
func New(_ context.Context, cfg Config, opts ...Option) (*Sink, error) {
	o := options{logger: slog.Default()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	cpTable, stage, match, retry, maxConns := quote(sqlcheckpoint.DefaultTable), DefaultStage, MatchCaseSensitive, 2*time.Minute, 8
	if cfg.CheckpointTable != "" {
		cpTable = cfg.CheckpointTable
	}
	if cfg.Stage != "" {
		stage = cfg.Stage
	}
	if cfg.Match != "" {
		switch m := strings.ToUpper(cfg.Match); m {
		case MatchCaseSensitive, MatchCaseInsensitive:
			match = m
		default:
			return nil, fmt.Errorf("%w: snowflake sink: match %q: want case_sensitive or case_insensitive", flightline.ErrInvalidInput, cfg.Match)
		}
	}
	switch {
	case cfg.RetryFor < 0:
		return nil, fmt.Errorf("%w: snowflake sink: negative retry budget", flightline.ErrInvalidInput)
	case cfg.RetryFor > 0:
		retry = cfg.RetryFor
	}
	if cfg.MaxConns != 0 {
		if cfg.MaxConns < 2 {
			return nil, fmt.Errorf("%w: snowflake sink: MaxConns %d < 2 (a batch's PUT needs a second session beside its transaction)", flightline.ErrInvalidInput, cfg.MaxConns)
		}
		maxConns = cfg.MaxConns
	}
	s := &Sink{cfg: cfg.Config, log: o.logger, mem: o.mem, retry: retry, match: match, maxConns: maxConns}
	if cfg.Table != "" {
		var err error
		if s.table, err = ParseIdent(cfg.Table); err != nil {
			return nil, err
		}
	}
	st, err := ParseIdent(stage)
	if err != nil {
		return nil, err
	}
	s.stage = quoteParts(st)
	cpt, err := ParseIdent(cpTable)
	if err != nil {
		return nil, err
	}
	s.cpTable = sqlcheckpoint.New(sqlcheckpoint.Snowflake, quoteParts(cpt))
	if s.db, err = snowconn.Open(&s.cfg); err != nil {
		return nil, err
	}
	s.db.SetMaxOpenConns(maxConns)
	s.db.SetMaxIdleConns(maxConns)
	return s, nil
}

// retrying runs op with snowconn.Retry for the sink's retry budget. After a
// try that found its session gone (snowconn.SessionLost: dropped by the
// server after its idle timeout, or a restart), the pool's idle
// connections are closed, so the next try logs in afresh instead of being
// handed the same dead session until the budget is spent (op has ended its
// transaction by then, so its connection is idle too), and that try comes
// at once, not after the backoff: the server answered, and the cause is
// gone. Connections that were in use come back dead one by one, so up to
// the pool's size such tries follow each other.
func (s *Sink) retrying(ctx context.Context, op func(context.Context) error) error {
	return snowconn.Retry(ctx, s.retry, func(ctx context.Context) error {
		for i := 0; ; i++ {
			err := op(ctx)
			if !snowconn.SessionLost(err) {
				return err
			}
			s.log.Warn("snowflake sink: session lost; closing idle sessions", "account", s.cfg.Account, "err", err)
			snowconn.DropIdle(s.db, s.maxConns)
			if i == s.maxConns || ctx.Err() != nil {
				return err
			}
		}
	})
}

// Guarantee implements flightsink.Guaranteer.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// Close releases the sink's sessions (the connection pool New made).
// Writers fail afterwards.
func (s *Sink) Close() error { return s.db.Close() }

// Ping connects and authenticates, and checks the session's database and
// schema.
func (s *Sink) Ping(ctx context.Context) error {
	return s.retrying(ctx, func(ctx context.Context) error { return snowconn.Ping(ctx, s.db, &s.cfg) })
}

// Timing returns where WriteBatch time went so far (committed batches;
// encode, PUT and COPY of batches that then failed are counted too).
func (s *Sink) Timing() Timing {
	d := func(a *atomic.Int64) time.Duration { return time.Duration(a.Load()) }
	return Timing{Batches: s.tc.batches.Load(), Rows: s.tc.rows.Load(), ParquetBytes: s.tc.bytes.Load(),
		Encode: d(&s.tc.encode), Put: d(&s.tc.put), Copy: d(&s.tc.copy), Commit: d(&s.tc.commit)}
}

func (s *Sink) wrap(err error, format string, args ...any) error {
	return s.cfg.Wrap(err, "snowflake sink "+s.cfg.Describe()+": "+format, args...)
}

// setup creates the checkpoint table and the stage once per Sink, each in
// its own autocommitted statement (DDL commits any open transaction in
// Snowflake, so none is open).
func (s *Sink) setup(ctx context.Context) error {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	if s.initDone {
		return nil
	}
	if err := snowconn.Ping(ctx, s.db, &s.cfg); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, s.cpTable.CreateSQL()); err != nil {
		return s.wrap(err, "create checkpoint table %s", s.cpTable.Name())
	}
	if _, err := s.db.ExecContext(ctx, `CREATE STAGE IF NOT EXISTS `+s.stage); err != nil {
		return s.wrap(err, "create stage %s", s.stage)
	}
	s.initDone = true
	return nil
}

// Checkpoint implements flightsink.Sink. It reads without claiming.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	if p.ID == "" {
		return nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	_, key, err := s.target(p)
	if err != nil {
		return nil, err
	}
	var cp []byte
	err = s.retrying(ctx, func(ctx context.Context) error {
		var err error
		cp, err = s.cpTable.Read(ctx, sqlConn(s.db), p.ID, key)
		return s.wrap(err, "read checkpoint of %q", p.ID)
	})
	return cp, err
}

// target resolves a pipeline's table: its parts (to quote) and the
// checkpoint row's target key ("" for the sink's default table, however
// named; else the canonical quoted name).
func (s *Sink) target(p flightsink.Pipeline) ([]string, string, error) {
	if p.Target == "" {
		if s.table == nil {
			return nil, "", fmt.Errorf("%w: pipeline %q has no target table and the sink no default Table", flightline.ErrInvalidInput, p.ID)
		}
		return s.table, "", nil
	}
	parts, err := ParseIdent(p.Target)
	if err != nil {
		return nil, "", err
	}
	if s.table != nil && quoteParts(parts) == quoteParts(s.table) {
		return parts, "", nil
	}
	return parts, quoteParts(parts), nil
}

// Open implements flightsink.Sink: it creates the checkpoint row if absent
// (a MERGE, in autocommit: Snowflake enforces no primary key), aborts the
// transactions killed writers of the pipeline left open (dead.go), then
// raises its epoch with a compare-and-set in autocommit, which fences every
// earlier writer, and reads the checkpoint
// (sqlcheckpoint.Table.ClaimAutocommit). Staged files left by earlier
// epochs are removed afterwards.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	parts, key, err := s.target(p)
	if err != nil {
		return nil, nil, err
	}
	var epoch int64
	var cp []byte
	txns := txnPrefix(p.ID, key)
	err = s.retrying(ctx, func(ctx context.Context) (err error) {
		if err := s.setup(ctx); err != nil {
			return err
		}
		if err := s.cpTable.Ensure(ctx, sqlConn(s.db), p.ID, key); err != nil {
			return s.wrap(err, "open pipeline %q", p.ID)
		}
		s.abortDead(ctx, txns)
		// In autocommit: a claim killed midway leaves no transaction, and
		// so no lock, for the next one to wait on (sqlcheckpoint).
		if epoch, cp, err = s.cpTable.ClaimAutocommit(ctx, sqlConn(s.db), p.ID, key); err != nil {
			return s.wrap(err, "open pipeline %q", p.ID)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	w := &writer{s: s, p: p, key: key, parts: parts, table: quoteParts(parts), epoch: epoch,
		prefix: stagePrefix(p.ID, key), txn: batchTxn(txns, epoch)}
	s.log.Debug("snowflake sink: pipeline opened", "pipeline", p.ID, "table", w.table, "epoch", epoch, "account", s.cfg.Account)
	s.cleanOrphans(ctx, w.prefix, epoch)
	return w, bytes.Clone(cp), nil
}

// testHookBeforeCommit, when set (by tests only), runs in WriteBatch after
// the checkpoint's compare-and-set and before COMMIT.
var testHookBeforeCommit func()

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// stagePrefix is the stage directory of one (pipeline, target): readable,
// and unique through a hash of both.
func stagePrefix(pipeline, key string) string {
	h := sha256.Sum256([]byte(pipeline + "\x00" + key))
	name := unsafeChars.ReplaceAllString(strings.ToLower(pipeline), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return "flightline/" + name + "-" + hex.EncodeToString(h[:8])
}

var epochDir = regexp.MustCompile(`/e(\d+)/s\d+\.parquet$`)

// cleanOrphans removes the files earlier epochs of a pipeline staged and
// never removed (their writer died between PUT and the removal after
// COMMIT, or was fenced). It runs after the claim committed, so any writer
// of an earlier epoch that still loads one of them fails its compare-and-set
// and rolls back; files of this and later epochs are left alone. It lists
// the whole stage and filters here (the stage is nearly empty: files are
// removed after their commit). Failures are logged, not returned.
func (s *Sink) cleanOrphans(ctx context.Context, prefix string, epoch int64) {
	rows, err := s.db.QueryContext(ctx, `LIST @`+s.stage)
	if err != nil {
		s.log.Warn("snowflake sink: listing the stage for orphaned files failed", "stage", s.stage, "error", s.cfg.Redact(err.Error()))
		return
	}
	old := map[int64]bool{}
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]any, len(cols))
		var name sql.NullString
		vals[0] = &name
		for i := 1; i < len(vals); i++ {
			vals[i] = new(any)
		}
		if rows.Scan(vals...) != nil {
			continue
		}
		i := strings.Index(name.String, prefix+"/")
		if i < 0 {
			continue
		}
		if m := epochDir.FindStringSubmatch(name.String[i+len(prefix):]); m != nil {
			if e, err := strconv.ParseInt(m[1], 10, 64); err == nil && e < epoch {
				old[e] = true
			}
		}
	}
	rows.Close()
	for e := range old {
		s.remove(ctx, fmt.Sprintf("@%s/%s/e%d/", s.stage, prefix, e))
	}
}

// remove deletes staged files under path, best effort: a file left behind
// is only an orphan, which the next Open removes.
func (s *Sink) remove(ctx context.Context, path string) {
	if _, err := s.db.ExecContext(ctx, `REMOVE `+path); err != nil {
		lvl := slog.LevelDebug
		if !s.removeWarned.Swap(true) {
			lvl = slog.LevelWarn
		}
		s.log.Log(ctx, lvl, "snowflake sink: removing staged files failed (they stay until a later Open cleans them)", "path", path, "error", s.cfg.Redact(err.Error()))
	}
}

// writer is the Writer of one pipeline at one epoch.
type writer struct {
	s      *Sink
	p      flightsink.Pipeline
	key    string
	parts  []string
	table  string
	epoch  int64
	prefix string
	txn    string // the name of its batch transactions (dead.go)
	seq    int64  // the next batch's file number within the epoch
	closed bool

	verified *arrow.Schema // the batch schema last checked against the table
	notNull  []bool
}

// WriteBatch implements flightsink.Writer. See the package documentation
// for the steps. Session and network failures are retried as a whole
// batch (begin, lock, PUT, COPY, compare-and-set, commit) for the sink's
// retry budget: a retry after a commit whose answer was lost finds the
// batch covered by the checkpoint and writes nothing.
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if w.closed {
		return fmt.Errorf("%w: writer of %q is closed", flightline.ErrInvalidInput, w.p.ID)
	}
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	if err := checkFields(rec.Schema(), w.s.match); err != nil {
		return err
	}
	return w.s.retrying(ctx, func(ctx context.Context) error {
		for range 3 {
			err := w.writeOnce(ctx, rec, cp)
			if !errors.Is(err, errCreated) {
				return err
			}
		}
		return fmt.Errorf("%w: table %s keeps disappearing", flightline.ErrConflict, w.table)
	})
}

// errCreated: the table was missing and has been created; run the batch
// again.
var errCreated = errors.New("snowflake sink: table created")

func (w *writer) writeOnce(ctx context.Context, rec arrow.RecordBatch, cp []byte) (err error) {
	s := w.s
	tx, err := s.begin(ctx, w.txn)
	if err != nil {
		return s.wrap(err, "begin")
	}
	// An error ends the transaction by closing its session, not with a
	// ROLLBACK on it (see txn).
	defer func() { tx.end(err) }()
	c := sqlConn(tx)
	last, replay, err := s.cpTable.Lock(ctx, c, w.p.ID, w.key, w.epoch, cp)
	if err != nil {
		if errors.Is(err, flightline.ErrFenced) {
			s.log.Warn("snowflake sink: fenced writer refused", "pipeline", w.p.ID, "table", w.table, "epoch", w.epoch)
			return err
		}
		return s.wrap(err, "lock checkpoint of %q", w.p.ID)
	}
	if replay {
		return nil
	}
	if w.verified == nil || !flightsink.SameSchema(w.verified, rec.Schema()) {
		cols, err := w.columns(ctx, tx)
		if err != nil {
			return err
		}
		if cols == nil {
			// DDL commits the open transaction: end it first, create the
			// table in autocommit, and start the batch again.
			tx.end(nil)
			if err := w.create(ctx, rec.Schema()); err != nil {
				return err
			}
			return errCreated
		}
		if err := w.check(rec.Schema(), cols); err != nil {
			return err
		}
	}
	for i, f := range rec.Schema().Fields() {
		if n := rec.Column(i).NullN(); n > 0 && w.notNull[i] {
			return fmt.Errorf("%w: table %s: column %q is NOT NULL, the batch has %d nulls in it",
				flightline.ErrSchemaMismatch, w.table, f.Name, n)
		}
	}
	tc := &s.tc
	file := ""
	if rec.NumRows() > 0 {
		t0 := time.Now()
		mem := s.mem
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		// Parquet has no view types: binary_view and string_view columns
		// are copied into binary and string ones.
		stored := parquetw.Storable(mem, rec, parquetw.StoredSchema(rec.Schema()))
		data, _, err := parquetw.Bytes(stored, parquetw.KeepTimestampUnit(), parquetw.Allocator(mem))
		stored.Release()
		if err != nil {
			return fmt.Errorf("%w: snowflake sink: encode batch as Parquet: %w", flightline.ErrInvalidInput, err)
		}
		t1 := time.Now()
		dir := fmt.Sprintf("%s/e%d", w.prefix, w.epoch)
		name := fmt.Sprintf("s%d.parquet", w.seq)
		// OVERWRITE: a retry of this batch replaces the file of its failed
		// try. AUTO_COMPRESS off: Parquet is compressed inside.
		put := fmt.Sprintf(`PUT 'file:///%s' @%s/%s/ AUTO_COMPRESS=FALSE SOURCE_COMPRESSION=NONE OVERWRITE=TRUE`, name, s.stage, dir)
		if _, err := s.db.ExecContext(sf.WithFileStream(ctx, bytes.NewReader(data)), put); err != nil {
			return s.wrap(err, "PUT batch to @%s/%s/%s", s.stage, dir, name)
		}
		t2 := time.Now()
		file = dir + "/" + name
		if err := w.copyInto(ctx, tx, file, rec.NumRows()); err != nil {
			return err
		}
		t3 := time.Now()
		tc.encode.Add(int64(t1.Sub(t0)))
		tc.put.Add(int64(t2.Sub(t1)))
		tc.copy.Add(int64(t3.Sub(t2)))
		tc.bytes.Add(int64(len(data)))
	}
	t4 := time.Now()
	if err := s.cpTable.Advance(ctx, c, w.p.ID, w.key, w.epoch, last, cp); err != nil {
		if errors.Is(err, flightline.ErrFenced) {
			s.log.Warn("snowflake sink: fenced writer refused at commit", "pipeline", w.p.ID, "table", w.table, "epoch", w.epoch)
			return err
		}
		if errors.Is(err, flightline.ErrConflict) {
			// The checkpoint moved since Lock (an earlier try of this
			// batch committed after all): the retry finds it covered.
			s.log.Warn("snowflake sink: checkpoint moved during the batch; retrying it", "pipeline", w.p.ID, "table", w.table, "epoch", w.epoch)
			return err
		}
		return s.wrap(err, "update checkpoint of %q", w.p.ID)
	}
	if testHookBeforeCommit != nil {
		testHookBeforeCommit()
	}
	if err := tx.commit(ctx); err != nil {
		return s.wrap(err, "commit batch of %q", w.p.ID)
	}
	tc.commit.Add(int64(time.Since(t4)))
	tc.batches.Add(1)
	tc.rows.Add(rec.NumRows())
	if file != "" {
		w.seq++
		s.remove(ctx, "@"+s.stage+"/"+file)
	}
	return nil
}

// copyInto loads one staged file in tx and checks that every row of it was
// loaded. FORCE = TRUE: see the package documentation (load metadata).
// The file is named by its path rather than FILES = (…), which means the
// same on Snowflake (a path is a prefix, and no other file has this one's)
// and is what the emulator understands.
func (w *writer) copyInto(ctx context.Context, tx *txn, file string, want int64) error {
	s := w.s
	q := fmt.Sprintf(`COPY INTO %s FROM @%s/%s FILE_FORMAT = (TYPE = PARQUET) MATCH_BY_COLUMN_NAME = %s FORCE = TRUE`,
		w.table, s.stage, file, s.match)
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return s.wrap(err, "COPY INTO %s", w.table)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return s.wrap(err, "COPY INTO %s", w.table)
	}
	loadedAt, statusAt := -1, -1
	for i, c := range cols {
		switch strings.ToLower(c) {
		case "rows_loaded":
			loadedAt = i
		case "status":
			statusAt = i
		}
	}
	var loaded int64
	var statuses []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return s.wrap(err, "COPY INTO %s: read result", w.table)
		}
		if statusAt >= 0 {
			statuses = append(statuses, fmt.Sprint(vals[statusAt]))
		}
		if loadedAt >= 0 {
			n, err := strconv.ParseInt(fmt.Sprint(vals[loadedAt]), 10, 64)
			if err == nil {
				loaded += n
			}
		}
	}
	if err := rows.Err(); err != nil {
		return s.wrap(err, "COPY INTO %s", w.table)
	}
	if loaded != want {
		// The file is gone (an orphan clean-up of a newer writer), or was
		// skipped: never advance the checkpoint over rows not loaded.
		return fmt.Errorf("%w: snowflake sink: COPY INTO %s loaded %d of %d rows from @%s/%s (status %v)",
			flightline.ErrConflict, w.table, loaded, want, s.stage, file, statuses)
	}
	return nil
}

// checkFields refuses, before any I/O, schemas the type map cannot hold,
// naming the column.
func checkFields(sc *arrow.Schema, match string) error {
	seen := make(map[string]bool, sc.NumFields())
	for _, f := range sc.Fields() {
		if f.Name == "" {
			return fmt.Errorf("%w: a column has an empty name", flightline.ErrInvalidInput)
		}
		k := f.Name
		if match == MatchCaseInsensitive {
			k = strings.ToUpper(k)
		}
		if seen[k] {
			return fmt.Errorf("%w: duplicate column %q (MATCH_BY_COLUMN_NAME = %s)", flightline.ErrInvalidInput, f.Name, match)
		}
		seen[k] = true
		if _, err := sqlType(f.Type); err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return nil
}

type column struct {
	name, dataType string
	scale          int64
	nullable       bool
}

// columns reads the table's columns from INFORMATION_SCHEMA; nil when the
// table does not exist.
func (w *writer) columns(ctx context.Context, tx *txn) ([]column, error) {
	is := "INFORMATION_SCHEMA.COLUMNS"
	schema := "CURRENT_SCHEMA()"
	args := []any{}
	switch len(w.parts) {
	case 3:
		is = quote(w.parts[0]) + "." + is
		fallthrough
	case 2:
		schema = "?"
		args = append(args, w.parts[len(w.parts)-2])
	}
	args = append(args, w.parts[len(w.parts)-1])
	q := `SELECT column_name, data_type, numeric_scale, is_nullable FROM ` + is +
		` WHERE table_schema = ` + schema + ` AND table_name = ? ORDER BY ordinal_position`
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, w.s.wrap(err, "read columns of %s", w.table)
	}
	defer rows.Close()
	var cols []column
	for rows.Next() {
		var c column
		var scale sql.NullInt64
		var nullable string
		if err := rows.Scan(&c.name, &c.dataType, &scale, &nullable); err != nil {
			return nil, w.s.wrap(err, "read columns of %s", w.table)
		}
		c.scale, c.nullable = scale.Int64, strings.EqualFold(nullable, "YES")
		cols = append(cols, c)
	}
	return cols, w.s.wrap(rows.Err(), "read columns of %s", w.table)
}

// create creates the table from the batch schema, in autocommit (DDL).
func (w *writer) create(ctx context.Context, sc *arrow.Schema) error {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(w.table)
	b.WriteString(" (")
	for i, f := range sc.Fields() {
		t, err := sqlType(f.Type)
		if err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(f.Name) + " " + t.sql)
		if !f.Nullable {
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString(")")
	if _, err := w.s.db.ExecContext(ctx, b.String()); err != nil {
		return w.s.wrap(err, "create table %s", w.table)
	}
	w.s.log.Info("snowflake sink: created table", "table", w.table, "pipeline", w.p.ID)
	return nil
}

// check compares the table's columns with the batch schema: every field
// needs a column that takes its values exactly; columns the batch lacks
// must be nullable (COPY leaves them NULL).
func (w *writer) check(sc *arrow.Schema, cols []column) error {
	byName := make(map[string]column, len(cols))
	fold := w.s.match == MatchCaseInsensitive
	key := func(n string) string {
		if fold {
			return strings.ToUpper(n)
		}
		return n
	}
	for _, c := range cols {
		byName[key(c.name)] = c
	}
	notNull := make([]bool, sc.NumFields())
	for i, f := range sc.Fields() {
		c, ok := byName[key(f.Name)]
		if !ok {
			return fmt.Errorf("%w: table %s has no column %q (batch type %s)", flightline.ErrSchemaMismatch, w.table, f.Name, f.Type)
		}
		if !accepts(f.Type, c.dataType, c.scale) {
			want, _ := sqlType(f.Type)
			return fmt.Errorf("%w: table %s: column %q has type %s (scale %d), the batch has %s (which maps to %s)",
				flightline.ErrSchemaMismatch, w.table, f.Name, c.dataType, c.scale, f.Type, want.sql)
		}
		notNull[i] = !c.nullable
		delete(byName, key(f.Name))
	}
	for _, c := range byName {
		if !c.nullable {
			return fmt.Errorf("%w: table %s: column %q (%s) is NOT NULL and missing from the batch",
				flightline.ErrSchemaMismatch, w.table, c.name, c.dataType)
		}
	}
	w.verified, w.notNull = sc, notNull
	return nil
}

// Close implements flightsink.Writer. It commits nothing.
func (w *writer) Close(context.Context) error {
	w.closed = true
	return nil
}

var (
	_ flightsink.Sink       = (*Sink)(nil)
	_ flightsink.Guaranteer = (*Sink)(nil)
)
