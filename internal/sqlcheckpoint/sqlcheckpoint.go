// Package sqlcheckpoint keeps the checkpoints and fencing epochs of
// Flightline's SQL sinks (PostgreSQL, Snowflake, ADBC) in one table of the
// destination database, so that a batch and the checkpoint it reaches commit
// in one transaction of that database.
//
// The table has one row per (pipeline_id, target): the checkpoint, the epoch
// of the writer that holds the target, and when it last changed. A sink uses
// it in two places:
//
//	Open:       Ensure (autocommit); begin; Claim; commit
//	            (or Ensure; ClaimAutocommit, all in autocommit: Snowflake)
//	WriteBatch: begin; Lock (replay: roll back, ack); write the data; Advance; commit
//
// Claim raises the epoch, which fences every earlier writer: their Lock, or
// failing that their Advance (a compare-and-set on the epoch), refuses with
// flightline.ErrFenced. Fencing wins over replay: Lock checks the epoch
// before it tells a replay. The newest Claim wins.
//
// Instances is the same with one row per (pipeline_id, target, instance),
// for a pipeline scaled out over several processes: fencing per instance,
// the checkpoint merged over the instances, and a write naming a partition
// another instance moved since the writer's claim refused (ErrConflict).
// The PostgreSQL sink uses it; the Snowflake, ADBC and DuckDB sinks use Table.
//
// The package knows statements, not drivers: a sink adapts its transaction
// to Conn (SQL adapts database/sql), and a Dialect says how its database
// spells placeholders, identifiers, column types and an insert-if-absent.
package sqlcheckpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
)

// DefaultTable is the checkpoint table's name when a sink is given none.
const DefaultTable = "__flightline_checkpoints"

// Conn runs statements, in a transaction the caller began, or in autocommit
// where a method says so.
type Conn interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query of at most one row and scans it into dest;
	// found is false when there is no row.
	QueryRow(ctx context.Context, query string, dest []any, args ...any) (found bool, err error)
}

// Dialect is how one database spells the checkpoint statements.
type Dialect struct {
	// Name names the database in messages: "postgres", "snowflake".
	Name string
	// Placeholder returns the n-th (1-based) bind parameter: "$1" or "?".
	Placeholder func(n int) string
	// Quote quotes one identifier.
	Quote func(ident string) string
	// Text, Blob and Int are the column types of the text columns, the
	// checkpoint, and the epoch.
	Text, Blob, Int string
	// Now is the expression for the current time stored in updated_at.
	Now string
	// Timestamp is the type of updated_at.
	Timestamp string
	// ForUpdate, when not empty, is appended to the read in Lock to lock the
	// row until the transaction ends ("FOR UPDATE"). Without it the row is
	// still safe: Advance compares and sets the epoch, and the checkpoint
	// when CompareCheckpoint is set.
	ForUpdate string
	// CompareCheckpoint makes Advance's compare-and-set compare the
	// checkpoint with the one Lock read, as well as the epoch. A dialect
	// without ForUpdate needs it: two transactions of one writer (a retry
	// whose earlier try's COMMIT was still on its way) can both read the
	// same checkpoint, and in READ COMMITTED the later one's UPDATE, run
	// once the earlier one committed, still finds its epoch and would move
	// the checkpoint past the same batch a second time.
	CompareCheckpoint bool
	// EnsureRow is the statement that creates a row at epoch 0 unless it
	// exists, with %s for the table and "?" placeholders for pipeline and
	// target (twice when it names them twice). Empty means
	// INSERT … ON CONFLICT DO NOTHING.
	EnsureRow string
	// IsDuplicate tells a unique-key violation; EnsureRow retries on one
	// (nil: never).
	IsDuplicate func(error) bool
	// IsMissingTable tells that the checkpoint table does not exist, which
	// Read answers as no checkpoint (nil: never).
	IsMissingTable func(error) bool
}

func dollar(n int) string { return "$" + strconv.Itoa(n) }
func question(int) string { return "?" }
func doubleQuote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// The dialects of the databases Flightline writes to.
var (
	// Postgres is PostgreSQL (pgx, or the ADBC PostgreSQL driver).
	Postgres = Dialect{
		Name: "postgres", Placeholder: dollar, Quote: doubleQuote,
		Text: "text", Blob: "bytea", Int: "bigint", Timestamp: "timestamptz", Now: "now()",
		ForUpdate: "FOR UPDATE",
		// Racing CREATE … IF NOT EXISTS of one table fail with any of
		// these: a unique violation in the catalog, duplicate table, or
		// duplicate object (the table's row type).
		IsDuplicate: func(err error) bool {
			c := SQLState(err)
			return c == "23505" || c == "42P07" || c == "42710"
		},
		IsMissingTable: func(err error) bool { return SQLState(err) == "42P01" },
	}
	// SQLite locks the database for the writing transaction, so it needs no
	// row lock.
	SQLite = Dialect{
		Name: "sqlite", Placeholder: question, Quote: doubleQuote,
		Text: "TEXT", Blob: "BLOB", Int: "INTEGER", Timestamp: "TEXT", Now: "CURRENT_TIMESTAMP",
		IsDuplicate: func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
		},
		IsMissingTable: func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "no such table")
		},
	}
	// Snowflake does not enforce primary keys, so a MERGE (one statement,
	// serialised with other DML on the table) is what keeps one row per
	// key; it must run outside an explicit transaction.
	Snowflake = Dialect{
		Name: "snowflake", Placeholder: question, Quote: doubleQuote,
		Text: "VARCHAR", Blob: "BINARY", Int: "NUMBER(19,0)", Timestamp: "TIMESTAMP_LTZ", Now: "CURRENT_TIMESTAMP()",
		// No row locks on standard tables: Advance compares the
		// checkpoint too.
		CompareCheckpoint: true,
		EnsureRow: `MERGE INTO %s c USING (SELECT ? AS p, ? AS t) s ON c.pipeline_id = s.p AND c.target = s.t
			WHEN NOT MATCHED THEN INSERT (pipeline_id, target, epoch) VALUES (s.p, s.t, 0)`,
		IsMissingTable: func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "does not exist")
		},
	}
	// DuckDB has no row locks (SELECT … FOR UPDATE is refused); its
	// transactions are snapshots, and of two that update one row the later
	// fails with a conflict. Advance compares the checkpoint as well as the
	// epoch, as on Snowflake.
	DuckDB = Dialect{
		Name: "duckdb", Placeholder: question, Quote: doubleQuote,
		Text: "VARCHAR", Blob: "BLOB", Int: "BIGINT", Timestamp: "TIMESTAMPTZ", Now: "current_timestamp",
		CompareCheckpoint: true,
		IsDuplicate: func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "Constraint Error: Duplicate key")
		},
		IsMissingTable: func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "Catalog Error: Table with name")
		},
	}
	// Generic is the conservative default for a database not listed here.
	Generic = Dialect{
		Name: "sql", Placeholder: question, Quote: doubleQuote,
		Text: "VARCHAR(1024)", Blob: "VARBINARY(65535)", Int: "BIGINT", Timestamp: "TIMESTAMP", Now: "CURRENT_TIMESTAMP",
		EnsureRow: `INSERT INTO %s (pipeline_id, target, epoch) SELECT ?, ?, 0
			WHERE NOT EXISTS (SELECT 1 FROM %[1]s WHERE pipeline_id = ? AND target = ?)`,
	}
)

// Table is one checkpoint table. Its methods are safe for concurrent use.
type Table struct {
	d                                        Dialect
	name                                     string
	create, read, ensure, claim, lock, store string
	// storeIfNull and storeIfSame are store with the checkpoint compared
	// (CompareCheckpoint): with none stored yet, and with the one bound
	// last.
	storeIfNull, storeIfSame string
	ensureDup                bool // ensure takes its two keys twice (Generic)
	// current reads epoch and checkpoint without a lock; raise is the
	// epoch's compare-and-set (ClaimAutocommit).
	current, raise string
}

// New returns the checkpoint table name (already quoted, possibly
// schema-qualified) spelled in dialect d.
func New(d Dialect, name string) *Table {
	p := d.Placeholder
	t := &Table{d: d, name: name}
	t.create = `CREATE TABLE IF NOT EXISTS ` + name + ` (
		pipeline_id ` + d.Text + ` NOT NULL,
		target      ` + d.Text + ` NOT NULL DEFAULT '',
		checkpoint  ` + d.Blob + `,
		epoch       ` + d.Int + ` NOT NULL DEFAULT 0,
		updated_at  ` + d.Timestamp + ` DEFAULT ` + d.Now + `,
		PRIMARY KEY (pipeline_id, target))`
	key := ` WHERE pipeline_id = ` + p(1) + ` AND target = ` + p(2)
	t.read = `SELECT checkpoint FROM ` + name + key
	switch {
	case d.EnsureRow == "":
		// No conflict target: the PostgreSQL sink upgrades a table of the
		// same (default) name to one row per instance, whose key is
		// (pipeline_id, target, instance); there this row is the unnamed
		// instance's (the column's default), and the statement still works.
		t.ensure = `INSERT INTO ` + name + ` (pipeline_id, target, epoch) VALUES (` + p(1) + `, ` + p(2) + `, 0)
			ON CONFLICT DO NOTHING`
	default:
		t.ensure = fmt.Sprintf(d.EnsureRow, name)
		// A "?" statement that names the key twice (Generic's) takes it twice.
		t.ensureDup = strings.Count(t.ensure, "?") == 4
	}
	t.claim = `UPDATE ` + name + ` SET epoch = epoch + 1, updated_at = ` + d.Now + key
	t.lock = `SELECT epoch, checkpoint FROM ` + name + key
	t.current = t.lock
	t.raise = `UPDATE ` + name + ` SET epoch = ` + p(1) + `, updated_at = ` + d.Now +
		` WHERE pipeline_id = ` + p(2) + ` AND target = ` + p(3) + ` AND epoch = ` + p(4)
	if d.ForUpdate != "" {
		t.lock += " " + d.ForUpdate
	}
	// Placeholders in the order they appear, for dialects whose are "?".
	t.store = `UPDATE ` + name + ` SET checkpoint = ` + p(1) + `, updated_at = ` + d.Now +
		` WHERE pipeline_id = ` + p(2) + ` AND target = ` + p(3) + ` AND epoch = ` + p(4)
	t.storeIfNull = t.store + ` AND checkpoint IS NULL`
	t.storeIfSame = t.store + ` AND checkpoint = ` + p(5)
	return t
}

// Name returns the table's (quoted) name.
func (t *Table) Name() string { return t.name }

// CreateSQL returns the CREATE TABLE IF NOT EXISTS statement of the table.
func (t *Table) CreateSQL() string { return t.create }

// Read returns the stored checkpoint of (pipeline, target): nil when there
// is none, or no table yet. It neither locks nor fences.
func (t *Table) Read(ctx context.Context, c Conn, pipeline, target string) ([]byte, error) {
	var cp []byte
	found, err := c.QueryRow(ctx, t.read, []any{&cp}, pipeline, target)
	switch {
	case err != nil && t.d.IsMissingTable != nil && t.d.IsMissingTable(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: read checkpoint of pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
	case !found:
		return nil, nil
	}
	return cp, nil
}

// Ensure creates the row of (pipeline, target) at epoch 0 unless it exists.
// Run it in autocommit before Claim: Snowflake cannot MERGE inside an
// explicit transaction.
func (t *Table) Ensure(ctx context.Context, c Conn, pipeline, target string) error {
	args := []any{pipeline, target}
	if t.ensureDup {
		args = append(args, pipeline, target)
	}
	var err error
	for range 3 { // racing inserts of one new key: the loser finds the row
		if _, err = c.Exec(ctx, t.ensure, args...); err == nil || t.d.IsDuplicate == nil || !t.d.IsDuplicate(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%s: create checkpoint row of pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
	}
	return nil
}

// Claim raises the epoch of (pipeline, target), which fences every earlier
// writer, and returns the new epoch and the stored checkpoint, inside the
// caller's transaction (which the caller commits; until then the claim is
// not made). The row must exist (Ensure).
func (t *Table) Claim(ctx context.Context, c Conn, pipeline, target string) (epoch int64, cp []byte, err error) {
	n, err := c.Exec(ctx, t.claim, pipeline, target)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: claim pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
	}
	if n == 0 {
		return 0, nil, fmt.Errorf("%w: %s: claim pipeline %q target %q: no checkpoint row (Ensure first)", flightline.ErrConflict, t.d.Name, pipeline, target)
	}
	found, err := c.QueryRow(ctx, t.lock, []any{&epoch, &cp}, pipeline, target)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: claim pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
	}
	if !found {
		return 0, nil, fmt.Errorf("%w: %s: checkpoint row of pipeline %q target %q vanished while claimed", flightline.ErrConflict, t.d.Name, pipeline, target)
	}
	return epoch, cp, nil
}

// ClaimAutocommit is Claim for a database where a transaction a killed
// writer leaves open keeps its locks for hours (Snowflake, until the
// session times out), run in autocommit, not in a transaction: it reads
// the epoch e, raises it with a compare-and-set (UPDATE … SET epoch = e+1
// WHERE … AND epoch = e), and reads the checkpoint again once that has
// committed, each one statement; another claim that moved the epoch in
// between makes it read and try again (ErrConflict after 10 tries). A
// writer killed anywhere in it leaves no transaction behind. The raise
// fences every earlier writer as Claim's does: an earlier writer's Advance
// that committed before it is in the checkpoint read after it, and one that
// comes after it finds the epoch moved. The row must exist (Ensure).
func (t *Table) ClaimAutocommit(ctx context.Context, c Conn, pipeline, target string) (epoch int64, cp []byte, err error) {
	for range 10 {
		var e int64
		found, err := c.QueryRow(ctx, t.current, []any{&e, new([]byte)}, pipeline, target)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: claim pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
		}
		if !found {
			return 0, nil, fmt.Errorf("%w: %s: claim pipeline %q target %q: no checkpoint row (Ensure first)", flightline.ErrConflict, t.d.Name, pipeline, target)
		}
		n, err := c.Exec(ctx, t.raise, e+1, pipeline, target, e)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: claim pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
		}
		if n == 0 {
			continue // another claim raised it first
		}
		var now int64
		found, err = c.QueryRow(ctx, t.current, []any{&now, &cp}, pipeline, target)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: claim pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
		}
		if !found {
			return 0, nil, fmt.Errorf("%w: %s: checkpoint row of pipeline %q target %q vanished while claimed", flightline.ErrConflict, t.d.Name, pipeline, target)
		}
		// now > e+1: a newer claim already followed this one, which is
		// fenced; its first Lock says so.
		return e + 1, cp, nil
	}
	return 0, nil, fmt.Errorf("%w: %s: claim pipeline %q target %q: the epoch kept moving under 10 claims", flightline.ErrConflict, t.d.Name, pipeline, target)
}

// Lock reads the row of (pipeline, target) first in a write transaction,
// locking it where the dialect can. It fails with flightline.ErrFenced when
// the epoch is no longer the writer's or the row is gone, before it looks
// at the checkpoint (fencing wins over replay). replay is true when cp is
// covered by the stored checkpoint: the caller writes nothing, rolls back
// and acks. last is the stored checkpoint, for Advance.
func (t *Table) Lock(ctx context.Context, c Conn, pipeline, target string, epoch int64, cp []byte) (last []byte, replay bool, err error) {
	var cur int64
	found, err := c.QueryRow(ctx, t.lock, []any{&cur, &last}, pipeline, target)
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("%s: lock checkpoint of pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
	case !found:
		return nil, false, fmt.Errorf("%w: checkpoint row of pipeline %q target %q is gone", flightline.ErrFenced, pipeline, target)
	case cur != epoch:
		return nil, false, &FencedError{Pipeline: pipeline, Target: target, Epoch: epoch, Current: cur}
	}
	return last, checkpoint.Replayed(last, cp), nil
}

// Advance stores checkpoint.Next(last, cp) last in the write transaction,
// after the data, with a compare-and-set on the epoch (and, where the
// dialect says CompareCheckpoint, on last, the checkpoint Lock read). When
// no row changes it fails and the caller rolls back: with
// flightline.ErrFenced when a newer writer has claimed the target, with
// flightline.ErrConflict when the epoch is the writer's but the checkpoint
// moved after Lock read it (another transaction of the same writer, such
// as an earlier try of this batch whose COMMIT was still on its way,
// committed in between): a retry then finds the batch covered, or not,
// and writes it at most once.
func (t *Table) Advance(ctx context.Context, c Conn, pipeline, target string, epoch int64, last, cp []byte) error {
	q, args := t.store, []any{checkpoint.Next(last, cp), pipeline, target, epoch}
	if t.d.CompareCheckpoint {
		q = t.storeIfNull
		if last != nil {
			q, args = t.storeIfSame, append(args, last)
		}
	}
	n, err := c.Exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s: update checkpoint of pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
	}
	if n > 0 {
		return nil
	}
	if t.d.CompareCheckpoint {
		var cur int64
		var now []byte
		found, err := c.QueryRow(ctx, t.lock, []any{&cur, &now}, pipeline, target)
		switch {
		case err != nil:
			return fmt.Errorf("%s: update checkpoint of pipeline %q target %q: re-read after the compare-and-set failed: %w", t.d.Name, pipeline, target, err)
		case found && cur == epoch:
			return fmt.Errorf("%w: %s: the checkpoint of pipeline %q target %q moved while the batch was written (another transaction of the same writer committed); nothing written, retry", flightline.ErrConflict, t.d.Name, pipeline, target)
		case found:
			return &FencedError{Pipeline: pipeline, Target: target, Epoch: epoch, Current: cur}
		}
	}
	return &FencedError{Pipeline: pipeline, Target: target, Epoch: epoch, Current: -1}
}

// FencedError is the flightline.ErrFenced of a writer whose epoch moved on.
type FencedError struct {
	Pipeline, Target string
	Instance         string // Instances only; empty for Table and DefaultInstance
	Epoch            int64  // the writer's
	Current          int64  // the row's, or -1 when the compare-and-set found it changed
}

func (e *FencedError) Error() string {
	who := fmt.Sprintf("pipeline %q target %q", e.Pipeline, e.Target)
	if e.Instance != "" {
		who += fmt.Sprintf(" instance %q", e.Instance)
	}
	if e.Current < 0 {
		return fmt.Sprintf("%v: %s was reopened after epoch %d", flightline.ErrFenced, who, e.Epoch)
	}
	return fmt.Sprintf("%v: %s was reopened (epoch %d > %d)", flightline.ErrFenced, who, e.Current, e.Epoch)
}

// Unwrap makes errors.Is(err, flightline.ErrFenced) hold.
func (e *FencedError) Unwrap() error { return flightline.ErrFenced }

// SQLState returns the SQLSTATE of a driver error that carries one (pgx's
// and lib/pq's do), else "".
func SQLState(err error) string {
	var pe interface{ SQLState() string }
	if errors.As(err, &pe) {
		return pe.SQLState()
	}
	return ""
}

// SQL adapts a database/sql handle (*sql.DB, *sql.Conn or *sql.Tx) to Conn;
// the result is a RowsConn too.
func SQL(x interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) RowsConn {
	return sqlConn{x}
}

type sqlConn struct {
	x interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}
}

func (s sqlConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	r, err := s.x.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (s sqlConn) Query(ctx context.Context, q string, scan func(row func(dest ...any) error) error, args ...any) error {
	x, ok := s.x.(interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	})
	if !ok {
		return fmt.Errorf("%w: sqlcheckpoint: %T cannot query rows", flightline.ErrInvalidInput, s.x)
	}
	rows, err := x.QueryContext(ctx, q, args...)
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

func (s sqlConn) QueryRow(ctx context.Context, q string, dest []any, args ...any) (bool, error) {
	err := s.x.QueryRowContext(ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
