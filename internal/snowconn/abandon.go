package snowconn

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	sf "github.com/snowflakedb/gosnowflake"
)

// A statement the client gave up on may still run at the server. A request
// whose context was cancelled, that timed out or whose connection broke has
// left the process, or may yet reach the server, and the emulator runs a
// request to its end whatever became of its client. database/sql gives a
// connection back to the pool after such a call all the same (gosnowflake
// does not report it bad), and the session's next statement then meets the
// one still running: the emulator refuses it ("002002 (42710) connection is
// busy with another call", which reads as invalid input and is not
// retried); on Snowflake it would queue behind it, or, after a ROLLBACK,
// the abandoned statement would run in autocommit.
//
// So every connection the package opens is wrapped: after a call that did
// not end with the server's own answer about the statement (an error that
// carries no query id or SQL state, or any error once the call's context is
// done) the connection reports itself invalid, and database/sql closes it
// instead of handing it out again; closing the session refuses whatever
// still arrives for it. A statement the server refused (a syntax error, a
// conflict) keeps its session.

// connector opens gosnowflake connections wrapped in conn.
type connector struct{ driver.Connector }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := dc.(sfConn)
	if !ok { // not gosnowflake's connection as this package knows it
		return dc, nil
	}
	return &conn{sfConn: sc}, nil
}

// sfConn is what database/sql and this module use of gosnowflake's
// connection.
type sfConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.NamedValueChecker
}

// conn is a gosnowflake connection that remembers whether a call on it was
// abandoned; see above.
type conn struct {
	sfConn
	abandoned atomic.Bool
}

// settle records whether the call that returned err may have left a
// statement behind.
func (c *conn) settle(ctx context.Context, err error) {
	if err != nil && !errors.Is(err, driver.ErrSkip) && (ctx.Err() != nil || !answered(err)) {
		c.abandoned.Store(true)
	}
}

// answered reports whether err is the server's answer about a statement it
// ran or refused, as opposed to the client's failure to get one.
func answered(err error) bool {
	var se *sf.SnowflakeError
	return errors.As(err, &se) && (se.QueryID != "" || se.SQLState != "")
}

func (c *conn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.sfConn.ExecContext(ctx, q, args)
	c.settle(ctx, err)
	return r, err
}

func (c *conn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.sfConn.QueryContext(ctx, q, args)
	c.settle(ctx, err)
	return r, err
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.sfConn.BeginTx(ctx, opts)
	c.settle(ctx, err)
	if err != nil {
		return nil, err
	}
	return &txn{Tx: tx, c: c}, nil
}

func (c *conn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := c.sfConn.PrepareContext(ctx, q)
	c.settle(ctx, err)
	if err != nil {
		return nil, err
	}
	cs, ok := st.(ctxStmt)
	if !ok {
		return st, nil
	}
	return &stmt{ctxStmt: cs, c: c}, nil
}

func (c *conn) Ping(ctx context.Context) error {
	err := c.sfConn.Ping(ctx)
	c.settle(ctx, err)
	return err
}

// IsValid tells database/sql whether the connection may go back to the
// pool.
func (c *conn) IsValid() bool { return !c.abandoned.Load() }

// ResetSession refuses a connection that must not be reused.
func (c *conn) ResetSession(context.Context) error {
	if c.abandoned.Load() {
		return driver.ErrBadConn
	}
	return nil
}

// txn records a COMMIT or ROLLBACK that failed: whether it reached the
// server is unknown, so the session may still hold the transaction.
type txn struct {
	driver.Tx
	c *conn
}

func (t *txn) Commit() error {
	err := t.Tx.Commit()
	t.c.settle(context.Background(), err)
	return err
}

func (t *txn) Rollback() error {
	err := t.Tx.Rollback()
	t.c.settle(context.Background(), err)
	return err
}

// stmt carries the same record for prepared statements (database/sql
// prepares when the driver answers a direct call with driver.ErrSkip).
type stmt struct {
	ctxStmt
	c *conn
}

// ctxStmt is what database/sql uses of gosnowflake's statement.
type ctxStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.ctxStmt.ExecContext(ctx, args)
	s.c.settle(ctx, err)
	return r, err
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.ctxStmt.QueryContext(ctx, args)
	s.c.settle(ctx, err)
	return r, err
}
