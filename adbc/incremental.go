package adbc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
)

// Querier runs a query with positional arguments and returns its result as
// Arrow. *Conn is one; any client that reads Arrow (a warehouse's native
// Arrow result batches) can be adapted to it and reuse Incremental.
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (array.RecordReader, error)
}

// Incremental reads a table in (cursor, tiebreak) order, a page at a time,
// each page starting strictly after the last row of the one before:
//
//	SELECT cols FROM t WHERE cursor IS NOT NULL
//	  AND (cursor > $1 OR (cursor = $1 AND tiebreak > $2))
//	ORDER BY cursor, tiebreak LIMIT n
//
// The tie rule: (cursor, tiebreak) must be unique and never NULL. Rows
// sharing a cursor value are then ordered by the tiebreak, and a resume
// after (c, k) neither repeats nor skips any of them. The tiebreak may be
// the cursor column itself when the cursor is unique. Rows whose cursor is
// NULL are never read; deletes are not seen; a row committed later with a
// cursor below one already read is missed (use a cursor assigned in commit
// order, or read with a lag, where that matters).
//
// Cursor and tiebreak columns must be integers, floating point, text,
// binary or timestamps (their values go into the checkpoint and back as
// parameters; a timestamp is bound with its column's type, TimestampArg).
type Incremental struct {
	// Table is the table read; Columns the columns selected (nil: all, *).
	Table   Table
	Columns []string
	// Cursor and Tiebreak are the ordering columns.
	Cursor, Tiebreak string
	// Limit is the page size in rows.
	Limit int
	// Placeholder spells the n-th bind parameter (Caps.Placeholder).
	Placeholder func(n int) string
	// Quote quotes an identifier; nil means Quote.
	Quote func(string) string
	// Inline, when set, spells a position value as an SQL literal (ok
	// false: bind it). Query inlines the position when both its values
	// have a literal (InlineInt), which spares the Flight SQL driver a
	// prepare and a DoPut (see Conn.PrefersLiterals).
	Inline func(v any) (lit string, ok bool)
}

// InlineInt spells an int64 position value as an SQL literal: digits and
// a sign only, so nothing a checkpoint carries can change the query.
func InlineInt(v any) (string, bool) {
	i, ok := v.(int64)
	if !ok || i == math.MinInt64 { // some parsers read -9223372036854775808 as minus an overflow
		return "", false
	}
	return strconv.FormatInt(i, 10), true
}

// Position is where a read stands: the (cursor, tiebreak) of the last row
// read; the zero Position is before the first row.
type Position struct {
	Cursor, Tiebreak any // int64, float64, string, []byte or time.Time; nil before the first row
}

// Started reports whether p is past some row.
func (p Position) Started() bool { return p.Cursor != nil }

type posJSON struct {
	Cursor       *string `json:"cursor"`
	CursorType   string  `json:"cursor_type,omitempty"`
	Tiebreak     *string `json:"tiebreak"`
	TiebreakType string  `json:"tiebreak_type,omitempty"`
}

// Encode returns the position as JSON, each value as text with its type
// (int64, float64, string, bytes as base64, timestamp as RFC 3339 in UTC
// with nanoseconds), so it comes back exactly:
//
//	{"cursor":"42","cursor_type":"int64","tiebreak":"7","tiebreak_type":"int64"}
func (p Position) Encode() []byte {
	var j posJSON
	if p.Started() {
		c, ct := encodeValue(p.Cursor)
		k, kt := encodeValue(p.Tiebreak)
		j = posJSON{Cursor: &c, CursorType: ct, Tiebreak: &k, TiebreakType: kt}
	}
	b, _ := json.Marshal(j) // cannot fail
	return b
}

func encodeValue(v any) (string, string) {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10), "int64"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), "float64"
	case []byte:
		return base64.StdEncoding.EncodeToString(x), "bytes"
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), "timestamp"
	default:
		return fmt.Sprint(x), "string"
	}
}

func decodeValue(s, typ string) (any, error) {
	switch typ {
	case "int64":
		return strconv.ParseInt(s, 10, 64)
	case "float64":
		return strconv.ParseFloat(s, 64)
	case "bytes":
		return base64.StdEncoding.DecodeString(s)
	case "string":
		return s, nil
	case "timestamp":
		return time.Parse(time.RFC3339Nano, s)
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

// ParsePosition decodes Encode's JSON; nil or empty is the zero Position.
func ParsePosition(b []byte) (Position, error) {
	if len(b) == 0 {
		return Position{}, nil
	}
	bad := func() (Position, error) {
		return Position{}, fmt.Errorf("%w: not an adbc source checkpoint: %q", flightline.ErrInvalidInput, b)
	}
	var j posJSON
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil || (j.Cursor == nil) != (j.Tiebreak == nil) {
		return bad()
	}
	if j.Cursor == nil {
		return Position{}, nil
	}
	c, err := decodeValue(*j.Cursor, j.CursorType)
	if err != nil {
		return bad()
	}
	k, err := decodeValue(*j.Tiebreak, j.TiebreakType)
	if err != nil {
		return bad()
	}
	return Position{Cursor: c, Tiebreak: k}, nil
}

// Query returns the SQL and arguments of the page after p.
func (q Incremental) Query(p Position) (string, []any) {
	quote := q.Quote
	if quote == nil {
		quote = Quote
	}
	cols := "*"
	if len(q.Columns) > 0 {
		qc := make([]string, len(q.Columns))
		for i, c := range q.Columns {
			qc[i] = quote(c)
		}
		cols = strings.Join(qc, ", ")
	}
	tbl := quote(q.Table.Name)
	if q.Table.Schema != "" {
		tbl = quote(q.Table.Schema) + "." + tbl
	}
	c, k := quote(q.Cursor), quote(q.Tiebreak)
	sql := "SELECT " + cols + " FROM " + tbl + " WHERE " + c + " IS NOT NULL"
	var args []any
	cl, okC := q.inline(p.Cursor)
	kl, okK := q.inline(p.Tiebreak)
	switch {
	case p.Started() && okC && okK:
		sql += " AND (" + c + " > " + cl + " OR (" + c + " = " + cl + " AND " + k + " > " + kl + "))"
	case p.Started():
		ph := q.Placeholder
		if strings.HasPrefix(ph(1), "$") { // numbered: each value once
			sql += " AND (" + c + " > " + ph(1) + " OR (" + c + " = " + ph(1) + " AND " + k + " > " + ph(2) + "))"
			args = []any{p.Cursor, p.Tiebreak}
		} else {
			sql += " AND (" + c + " > " + ph(1) + " OR (" + c + " = " + ph(2) + " AND " + k + " > " + ph(3) + "))"
			args = []any{p.Cursor, p.Cursor, p.Tiebreak}
		}
	}
	sql += " ORDER BY " + c + ", " + k + " LIMIT " + strconv.Itoa(q.Limit)
	return sql, args
}

func (q Incremental) inline(v any) (string, bool) {
	if q.Inline == nil || v == nil {
		return "", false
	}
	return q.Inline(v)
}

// Page is one page of an incremental read: the batches the query returned,
// each converted to the stream's schema in memory of the caller's
// allocator, with the Position after its last row.
type Page struct {
	Batches   []arrow.RecordBatch
	Positions []Position
	Rows      int // rows in the page: fewer than Limit means caught up
}

// Release releases every batch of the page.
func (p *Page) Release() {
	for _, b := range p.Batches {
		b.Release()
	}
	p.Batches = nil
}

// ReadPage runs the page after p on qr and returns it. Each batch is copied
// into mem, its columns converted to schema's types where the driver
// answered others (SQLite infers a result's types from its values).
func (q Incremental) ReadPage(ctx context.Context, qr Querier, mem memory.Allocator, schema *arrow.Schema, p Position) (*Page, error) {
	ci, ki := schema.FieldIndices(q.Cursor), schema.FieldIndices(q.Tiebreak)
	if len(ci) != 1 || len(ki) != 1 {
		return nil, fmt.Errorf("%w: table %s: no single column %q and %q (cursor, tiebreak)", flightline.ErrInvalidInput, q.Table, q.Cursor, q.Tiebreak)
	}
	sql, args := q.Query(p)
	for i, a := range args { // a timestamp binds with its column's type
		if t, ok := a.(time.Time); ok {
			f := schema.Field(ki[0])
			if i < len(args)-1 {
				f = schema.Field(ci[0])
			}
			if tt, ok := f.Type.(*arrow.TimestampType); ok {
				args[i] = TimestampArg{Time: t, Type: tt}
			}
		}
	}
	r, err := qr.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	page := &Page{}
	for r.Next() {
		in := r.RecordBatch()
		if in.NumRows() == 0 {
			continue
		}
		out, err := Conform(in, schema, mem)
		if err != nil {
			page.Release()
			return nil, fmt.Errorf("table %s: %w", q.Table, err)
		}
		last := int(out.NumRows()) - 1
		c, err1 := Value(out.Column(ci[0]), last)
		k, err2 := Value(out.Column(ki[0]), last)
		if err1 != nil || err2 != nil || c == nil || k == nil {
			out.Release()
			page.Release()
			return nil, fmt.Errorf("%w: table %s: cursor %q and tiebreak %q must be non-NULL integers, floats, text, binary or timestamps",
				flightline.ErrInvalidInput, q.Table, q.Cursor, q.Tiebreak)
		}
		page.Batches = append(page.Batches, out)
		page.Positions = append(page.Positions, Position{Cursor: c, Tiebreak: k})
		page.Rows += int(out.NumRows())
	}
	if err := r.Err(); err != nil {
		page.Release()
		return nil, Wrap(err, "adbc: read %s", q.Table)
	}
	return page, nil
}

// Conform copies rec into mem with schema's fields: columns are matched by
// position and must have the same names; a column of another type is
// converted value by value (integer, float, text, binary, boolean).
func Conform(rec arrow.RecordBatch, schema *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	if int(rec.NumCols()) != schema.NumFields() {
		return nil, fmt.Errorf("%w: result has %d columns, the stream %d", flightline.ErrSchemaMismatch, rec.NumCols(), schema.NumFields())
	}
	cols := make([]arrow.Array, 0, schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, f := range schema.Fields() {
		in := rec.Column(i)
		if rec.ColumnName(i) != f.Name {
			return nil, fmt.Errorf("%w: result column %d is %q, the stream's %q", flightline.ErrSchemaMismatch, i, rec.ColumnName(i), f.Name)
		}
		var out arrow.Array
		var err error
		if arrow.TypeEqual(in.DataType(), f.Type) {
			out, err = array.Concatenate([]arrow.Array{in}, mem)
		} else {
			out, err = convert(in, f.Type, mem)
		}
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols = append(cols, out)
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows()), nil
}

// convert builds a column of type t from in's values.
func convert(in arrow.Array, t arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	b := array.NewBuilder(mem, t)
	defer b.Release()
	for i := 0; i < in.Len(); i++ {
		v, err := Value(in, i)
		if err != nil {
			return nil, err
		}
		if v == nil {
			b.AppendNull()
			continue
		}
		ok := false
		switch bb := b.(type) {
		case *array.Int64Builder:
			switch x := v.(type) {
			case int64:
				bb.Append(x)
				ok = true
			case float64:
				if x == float64(int64(x)) {
					bb.Append(int64(x))
					ok = true
				}
			}
		case *array.Float64Builder:
			switch x := v.(type) {
			case float64:
				bb.Append(x)
				ok = true
			case int64:
				bb.Append(float64(x))
				ok = true
			}
		case *array.StringBuilder:
			switch x := v.(type) {
			case string:
				bb.Append(x)
				ok = true
			case []byte:
				bb.Append(string(x))
				ok = true
			}
		case *array.BinaryBuilder:
			switch x := v.(type) {
			case []byte:
				bb.Append(x)
				ok = true
			case string:
				bb.Append([]byte(x))
				ok = true
			}
		case *array.BooleanBuilder:
			switch x := v.(type) {
			case bool:
				bb.Append(x)
				ok = true
			case int64:
				bb.Append(x != 0)
				ok = true
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w: cannot store %T %v as %s", flightline.ErrSchemaMismatch, v, v, t)
		}
	}
	return b.NewArray(), nil
}
