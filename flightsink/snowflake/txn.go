package snowflake

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
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
// So the transaction is begun with a context the caller's cancellation does
// not reach: its statements still take the caller's context, but COMMIT and
// ROLLBACK are sent whatever happened to it (each bounded by the
// connection's Timeout). end rolls back whatever did not commit; a session
// whose ROLLBACK or COMMIT failed is closed rather than reused (Snowflake
// rolls back the open transaction of a session that is closed).
type txn struct {
	*sql.Tx
	conn      *sql.Conn
	committed bool
	discard   bool
	ended     bool
}

// begin starts a txn. The caller defers end.
func (s *Sink) begin(ctx context.Context) (*txn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		discard(c)
		return nil, err
	}
	return &txn{Tx: tx, conn: c}, nil
}

// commit commits, unless ctx is done: a cancelled writer commits nothing
// (end rolls it back).
func (t *txn) commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.Tx.Commit(); err != nil {
		// Whether the COMMIT arrived is unknown: the session may still
		// hold the transaction.
		t.discard = true
		return err
	}
	t.committed = true
	return nil
}

// end rolls back unless the transaction committed, and gives the session
// back to the pool, or closes it when it may still hold a transaction.
// Calls after the first do nothing.
func (t *txn) end() {
	if t.ended {
		return
	}
	t.ended = true
	if !t.committed && !t.discard {
		if err := t.Tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
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
