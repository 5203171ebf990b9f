package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/flightline/flightline"
)

// maxResponse bounds what the sink reads of one answer: its queries return
// a checkpoint row or a table's columns, never data.
const maxResponse = 4 << 20

// ServerError is an error ClickHouse answered with: its exception code
// (X-ClickHouse-Exception-Code), the HTTP status and the exception text.
// It unwraps to the flightline sentinel its code maps to (Unwrap), so
// errors.Is(err, flightline.ErrUnauthenticated) holds for a wrong password.
type ServerError struct {
	Code   int
	Status int
	Text   string
}

func (e *ServerError) Error() string {
	msg := fmt.Sprintf("clickhouse: HTTP %d, code %d: %s", e.Status, e.Code, e.Text)
	if s := e.Unwrap(); s != nil {
		return s.Error() + ": " + msg
	}
	return msg
}

// Unwrap maps ClickHouse's exception codes (src/Common/ErrorCodes.cpp) to
// flightline's vocabulary; codes not listed map to nothing.
func (e *ServerError) Unwrap() error {
	switch e.Code {
	case 192, 193, 194, 516: // UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, AUTHENTICATION_FAILED
		return flightline.ErrUnauthenticated
	case 497: // ACCESS_DENIED
		return flightline.ErrPermissionDenied
	case 60, 81: // UNKNOWN_TABLE, UNKNOWN_DATABASE
		return flightline.ErrNotFound
	case 16, 53, 70: // NO_SUCH_COLUMN_IN_TABLE, TYPE_MISMATCH, CANNOT_CONVERT_TYPE
		return flightline.ErrSchemaMismatch
	case 202, 241, 242: // TOO_MANY_SIMULTANEOUS_QUERIES, MEMORY_LIMIT_EXCEEDED, TABLE_IS_READ_ONLY
		return flightline.ErrUnavailable
	}
	switch {
	case e.Status == http.StatusUnauthorized:
		return flightline.ErrUnauthenticated
	case e.Status == http.StatusBadGateway, e.Status == http.StatusServiceUnavailable, e.Status == http.StatusGatewayTimeout:
		return flightline.ErrUnavailable
	}
	return nil
}

// client speaks ClickHouse's HTTP interface: one POST per statement, the
// statement in the query parameter (or the body, when the body is not
// data), settings as further parameters, the user in X-ClickHouse-User and
// X-ClickHouse-Key.
type client struct {
	base     *url.URL
	db       string
	user     string
	password string
	hc       *http.Client
}

// exec runs query with settings; body, when not nil, is the statement's
// data (INSERT … FORMAT …). It returns the answer, at most maxResponse
// bytes of it.
func (c *client) exec(ctx context.Context, query string, settings url.Values, body io.Reader) ([]byte, error) {
	u := *c.base
	q := url.Values{}
	for k, v := range settings {
		q[k] = v
	}
	if c.db != "" {
		q.Set("database", c.db)
	}
	var rd io.Reader = strings.NewReader(query)
	if body != nil {
		q.Set("query", query)
		rd = body
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("%w: clickhouse: %w", flightline.ErrInvalidInput, err)
	}
	req.Header.Set("X-ClickHouse-User", c.user)
	if c.password != "" {
		req.Header.Set("X-ClickHouse-Key", c.password)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: clickhouse at %s: %w", flightline.ErrUnavailable, c.base.Host, redact(err, c.password))
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("%w: clickhouse at %s: reading the answer: %w", flightline.ErrUnavailable, c.base.Host, err)
	}
	if code := resp.Header.Get("X-ClickHouse-Exception-Code"); code != "" || resp.StatusCode != http.StatusOK {
		n, _ := strconv.Atoi(code)
		text := strings.TrimSpace(string(out))
		if len(text) > 2000 {
			text = text[:2000] + "…"
		}
		return nil, &ServerError{Code: n, Status: resp.StatusCode, Text: text}
	}
	if len(out) > maxResponse {
		return nil, fmt.Errorf("%w: clickhouse: answer over %d bytes", flightline.ErrInvalidInput, maxResponse)
	}
	return out, nil
}

// redact removes the password from a transport error's text.
func redact(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "***"))
}

// ident quotes a ClickHouse identifier with backticks.
func ident(s string) string {
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(s) + "`"
}

// literal quotes a ClickHouse string literal.
func literal(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// tableName quotes "table" or "db.table".
func tableName(s string) string {
	if db, t, ok := strings.Cut(s, "."); ok {
		return ident(db) + "." + ident(t)
	}
	return ident(s)
}

// unescapeTSV undoes TabSeparated's escaping of one field (\\, \t, \n,
// \', …).
func unescapeTSV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
