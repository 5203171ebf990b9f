package adbc

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/flightline/flightline"
	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/internal/sqlcheckpoint"
)

// cpConn is the sqlcheckpoint.Conn of a connection: the connection itself
// (its Exec and QueryRow have Conn's shape), or, where the driver cannot
// bind binary parameters, base64Conn around it.
func (s *Sink) cpConn(c *fadbc.Conn) sqlcheckpoint.Conn {
	if s.blobsAsText {
		return base64Conn{c}
	}
	return c
}

// base64Conn stores the checkpoint (the one binary parameter) as base64
// text and decodes it when read. arrow-go's example Flight SQL server
// releases a binary parameter before reading it, so it stores an empty
// value; text parameters arrive intact. The column keeps its BLOB type
// (SQLite stores the text as given).
type base64Conn struct{ c *fadbc.Conn }

func (b base64Conn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return b.c.Exec(ctx, q, encodeArgs(args)...)
}

func (b base64Conn) QueryRow(ctx context.Context, q string, dest []any, args ...any) (bool, error) {
	tmp := make([]any, len(dest))
	raw := make([]any, len(dest))
	for i, d := range dest {
		if _, ok := d.(*[]byte); ok {
			tmp[i] = &raw[i]
		} else {
			tmp[i] = d
		}
	}
	found, err := b.c.QueryRow(ctx, q, tmp, encodeArgs(args)...)
	if err != nil || !found {
		return found, err
	}
	for i, d := range dest {
		p, ok := d.(*[]byte)
		if !ok {
			continue
		}
		var text string
		switch v := raw[i].(type) {
		case nil:
			*p = nil
			continue
		case string:
			text = v
		case []byte:
			text = string(v)
		default:
			return false, fmt.Errorf("%w: checkpoint column holds a %T", flightline.ErrInvalidInput, v)
		}
		if text == "" { // that server answers a NULL blob as empty; a stored checkpoint never is
			*p = nil
			continue
		}
		if *p, err = base64.StdEncoding.DecodeString(text); err != nil {
			return false, fmt.Errorf("%w: checkpoint column is not base64: %w", flightline.ErrInvalidInput, err)
		}
	}
	return true, nil
}

func encodeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if v, ok := a.([]byte); ok && v != nil {
			out[i] = base64.StdEncoding.EncodeToString(v)
		} else {
			out[i] = a
		}
	}
	return out
}
