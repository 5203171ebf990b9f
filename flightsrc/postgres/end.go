package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flightline/flightline/flightsrc"
)

var _ flightsrc.Ender = (*Source)(nil)

// End implements flightsrc.Ender: the end of a table is its greatest
// (watermark, key) when End is called. A checkpoint covers it when no row
// lies after the checkpoint and at or before that end, compared by
// PostgreSQL in the columns' own types, as the reads compare. Rows that
// arrive later with a greater (watermark, key) are not waited for.
func (s *Source) End(ctx context.Context, stream string) (flightsrc.End, error) {
	t, err := s.o.Table(stream)
	if err != nil {
		return flightsrc.End{}, err
	}
	c, err := s.connect(ctx)
	if err != nil {
		return flightsrc.End{}, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	// Qualified names: ORDER BY would otherwise sort the ::text outputs.
	wm, key := "src."+pgx.Identifier{t.Cursor}.Sanitize(), "src."+pgx.Identifier{t.Tiebreak}.Sanitize()
	var end Checkpoint
	err = c.QueryRow(ctx, "SELECT "+wm+"::text, "+key+"::text FROM "+t.ID.Sanitize()+" AS src"+
		" WHERE "+wm+" IS NOT NULL ORDER BY "+wm+" DESC, "+key+" DESC LIMIT 1").Scan(&end.Watermark, &end.Key)
	if err == pgx.ErrNoRows {
		return flightsrc.End{Desc: string(end.Encode()), Covered: func(context.Context, []byte) (bool, error) { return true, nil }}, nil
	}
	if err != nil {
		return flightsrc.End{}, s.wrap(err, "postgres source %s: the last row of %s", s.server, t.ID.Sanitize())
	}
	// Rows in (checkpoint, end]: none left means covered.
	left := "SELECT EXISTS (SELECT 1 FROM " + t.ID.Sanitize() + " AS src WHERE (" + wm + ", " + key + ") <= ($1, $2)"
	after := left + " AND (" + wm + ", " + key + ") > ($3, $4))"
	first := left + " AND " + wm + " IS NOT NULL)"
	count := func(q string) string {
		return strings.Replace(strings.TrimSuffix(q, ")"), "SELECT EXISTS (SELECT 1 FROM", "SELECT count(*) FROM", 1)
	}
	rowsLeft := func(ctx context.Context, b []byte) (int64, error) {
		cp, err := ParseCheckpoint(b)
		if err != nil {
			return 0, err
		}
		c, err := s.connect(ctx)
		if err != nil {
			return 0, err
		}
		defer c.Close(context.WithoutCancel(ctx))
		var n int64
		if cp.Watermark == nil {
			err = c.QueryRow(ctx, count(first), *end.Watermark, *end.Key).Scan(&n)
		} else {
			err = c.QueryRow(ctx, count(after), *end.Watermark, *end.Key, *cp.Watermark, *cp.Key).Scan(&n)
		}
		if err != nil {
			return 0, s.wrap(err, "postgres source %s: rows left in %s", s.server, t.ID.Sanitize())
		}
		return n, nil
	}
	return flightsrc.End{
		Desc: string(end.Encode()),
		Covered: func(ctx context.Context, b []byte) (bool, error) {
			cp, err := ParseCheckpoint(b)
			if err != nil {
				return false, err
			}
			c, err := s.connect(ctx)
			if err != nil {
				return false, err
			}
			defer c.Close(context.WithoutCancel(ctx))
			var more bool
			if cp.Watermark == nil {
				err = c.QueryRow(ctx, first, *end.Watermark, *end.Key).Scan(&more)
			} else {
				err = c.QueryRow(ctx, after, *end.Watermark, *end.Key, *cp.Watermark, *cp.Key).Scan(&more)
			}
			if err != nil {
				return false, s.wrap(err, "postgres source %s: rows left in %s", s.server, t.ID.Sanitize())
			}
			return !more, nil
		},
		Left: rowsLeft,
	}, nil
}
