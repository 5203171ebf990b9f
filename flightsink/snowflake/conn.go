package snowflake

import (
	"context"
	"database/sql"

	sf "github.com/snowflakedb/gosnowflake"

	"github.com/flightline/flightline/internal/sqlcheckpoint"
)

// conn adapts a database/sql handle on gosnowflake to sqlcheckpoint.Conn.
// gosnowflake binds a []byte as an array of numbers unless the argument
// before it is the sf.DataTypeBinary marker (its documented way to bind
// BINARY); the checkpoint is a []byte, so every []byte argument gets the
// marker.
type conn struct{ c sqlcheckpoint.Conn }

func sqlConn(x interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) sqlcheckpoint.Conn {
	return conn{sqlcheckpoint.SQL(x)}
}

func binds(args []any) []any {
	out := make([]any, 0, len(args)+1)
	marked := false
	for _, a := range args {
		if b, ok := a.([]byte); ok && !marked {
			// The marker holds for every later argument of the statement;
			// a second one is bound as a value of its own.
			out = append(out, sf.DataTypeBinary, b)
			marked = true
			continue
		}
		out = append(out, a)
	}
	return out
}

func (c conn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return c.c.Exec(ctx, q, binds(args)...)
}

func (c conn) QueryRow(ctx context.Context, q string, dest []any, args ...any) (bool, error) {
	return c.c.QueryRow(ctx, q, dest, binds(args)...)
}
