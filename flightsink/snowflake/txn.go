package snowflake

import (
	"context"
	"database/sql"
	"database/sql/driver"
)

// txn is one transaction of the sink, on a session taken from the pool for
// it alone and given back only with no transaction open.
//
// database/sql rolls a transaction back when its context is cancelled, and
// so does the deferred Rollback after a failed statement; but gosnowflake
// sends ROLLBACK (and COMMIT) with the context the transaction began with.
// Once the caller's context is cancelled (a DoPut whose coordinator died),
// that ROLLBACK never leaves the process, and the session went back to the
// pool with the transaction still open. Snowflake ignores a BEGIN inside an
// open transaction, so the next batch or claim on that session ran inside
// the dead transaction, and the dead transaction's write of the checkpoint
// row blocked every other session's claim until a lock timeout (on the
// emulator every later statement of the session failed, and the session
// never went idle long enough for its idle-session rollback).
//
// So the transaction's COMMIT and ROLLBACK are sent with a context the
// caller's cancellation does not reach: its statements still take the
// caller's context, but COMMIT and ROLLBACK are sent whatever happened to
// it (each bounded by the connection's Timeout). A session whose ROLLBACK or COMMIT failed is
// closed rather than reused (Snowflake rolls back the open transaction of a
// session that is closed).
//
// A transaction that ends in an error is not rolled back on its session
// either: the session is closed. The error may be a statement the client
// gave up on (its context was cancelled, its request timed out, the
// connection broke) that the server has not run yet, or is still running:
// the emulator runs a request to its end whatever became of its client,
// and on any server requests on separate connections can arrive in any
// order. A ROLLBACK sent next would end the transaction first, and the
// abandoned statement would then run in autocommit: a COPY would commit a
// batch's rows without its checkpoint, and the batch, replayed from the
// checkpoint, would be written twice (an UPDATE of the checkpoint would
// move it past rows that were rolled back). Once the session is closed, a
// statement still to arrive for it is refused, and one still running
// belongs to a transaction nobody can commit
// (TestIntegrationAbandonedCopyCommitsNothing). Only a transaction whose
// statements all succeeded (a replay, a claim that read what it needed) is
// rolled back and its session reused.
type txn struct {
	conn *sql.Conn
	// bctx is the context the transaction began with, which the caller's
	// cancellation does not reach: COMMIT and ROLLBACK are sent with it.
	// abandon cancels it.
	bctx      context.Context
	abandon   context.CancelFunc
	committed bool
	discard   bool
	ended     bool
}

// begin starts a txn named name (BEGIN TRANSACTION NAME: SHOW TRANSACTIONS
// lists it under that name, so the next writer of the pipeline can find it
// and abort it if this process dies inside it; see abortDead). The name
// must be an unquoted identifier. The caller defers end with the error its
// work ended with.
//
// The transaction is the session's own BEGIN, COMMIT and ROLLBACK
// statements rather than database/sql's: database/sql's BeginTx cannot
// name it, and the statements are all a Snowflake transaction is.
func (s *Sink) begin(ctx context.Context, name string) (*txn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	bctx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	if _, err := c.ExecContext(ctx, "BEGIN TRANSACTION NAME "+name); err != nil {
		// Whether the BEGIN ran is unknown: the session may hold it.
		abandon()
		discard(c)
		return nil, err
	}
	return &txn{conn: c, bctx: bctx, abandon: abandon}, nil
}

// ExecContext runs a statement in the transaction.
func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(ctx, q, args...)
}

// QueryContext runs a query in the transaction.
func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(ctx, q, args...)
}

// QueryRowContext runs a query of one row in the transaction.
func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.conn.QueryRowContext(ctx, q, args...)
}

// commit commits, unless ctx is done: a cancelled writer commits nothing
// (end closes its session).
func (t *txn) commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := t.conn.ExecContext(t.bctx, "COMMIT"); err != nil {
		// Whether the COMMIT arrived is unknown: the session may still
		// hold the transaction.
		t.discard = true
		return err
	}
	t.committed = true
	return nil
}

// end ends the transaction and gives the session back to the pool, or
// closes it when it may still hold a transaction or run a statement the
// client gave up on. failed is the error the transaction's work ended with
// (nil: every statement succeeded). Unless the transaction committed, it is
// rolled back on the session only when failed is nil; otherwise the session
// is closed without another statement on it. Calls after the first do
// nothing.
func (t *txn) end(failed error) {
	if t.ended {
		return
	}
	t.ended = true
	defer t.abandon()
	switch {
	case t.committed:
	case failed != nil:
		t.discard = true
	case !t.discard:
		if _, err := t.conn.ExecContext(t.bctx, "ROLLBACK"); err != nil {
			t.discard = true
		}
	}
	if t.discard {
		discard(t.conn)
		return
	}
	t.conn.Close() //nolint:errcheck // returns it to the pool
}

// discard closes c's session instead of returning it to the pool.
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	c.Close() //nolint:errcheck // already closed
}
