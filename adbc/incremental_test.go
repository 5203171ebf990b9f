package adbc

import (
	"math"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// A timestamp cursor goes into the checkpoint and comes back to the
// nanosecond, in UTC, and binds with its column's type.
func TestPositionTimestamp(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	p := Position{Cursor: ts, Tiebreak: int64(7)}
	b := p.Encode()
	require.JSONEq(t, `{"cursor":"2026-01-02T02:04:05.123456789Z","cursor_type":"timestamp","tiebreak":"7","tiebreak_type":"int64"}`, string(b))
	got, err := ParsePosition(b)
	require.NoError(t, err)
	require.True(t, ts.Equal(got.Cursor.(time.Time)))
	require.Equal(t, int64(7), got.Tiebreak)

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ntz := &arrow.TimestampType{Unit: arrow.Microsecond}
	rec, err := argsRecord(mem, []any{TimestampArg{Time: ts, Type: ntz}, ts})
	require.NoError(t, err)
	defer rec.Release()
	require.True(t, arrow.TypeEqual(ntz, rec.Column(0).DataType()), "%s", rec.Column(0).DataType())
	require.Equal(t, "UTC", rec.Column(1).DataType().(*arrow.TimestampType).TimeZone)
	for i := range 2 {
		v, err := Value(rec.Column(i), 0)
		require.NoError(t, err)
		require.True(t, ts.Truncate(time.Microsecond).Equal(v.(time.Time)), "column %d: %v", i, v)
	}
}

// Inline spells integer positions as literals and binds nothing; other
// values, and an int64 some parsers cannot read back, are still bound.
func TestIncrementalInline(t *testing.T) {
	q := Incremental{Table: Table{Name: "t"}, Cursor: "wm", Tiebreak: "id", Limit: 10,
		Placeholder: func(int) string { return "?" }, Inline: InlineInt}
	sql, args := q.Query(Position{Cursor: int64(-4), Tiebreak: int64(17)})
	require.Equal(t, `SELECT * FROM "t" WHERE "wm" IS NOT NULL AND ("wm" > -4 OR ("wm" = -4 AND "id" > 17)) ORDER BY "wm", "id" LIMIT 10`, sql)
	require.Empty(t, args)

	sql, args = q.Query(Position{Cursor: "x' OR 1=1 --", Tiebreak: int64(17)})
	require.Contains(t, sql, `"wm" > ? OR ("wm" = ? AND "id" > ?)`)
	require.Equal(t, []any{"x' OR 1=1 --", "x' OR 1=1 --", int64(17)}, args)

	_, args = q.Query(Position{Cursor: int64(math.MinInt64), Tiebreak: int64(1)})
	require.Len(t, args, 3)

	sql, args = q.Query(Position{})
	require.NotContains(t, sql, "AND")
	require.Empty(t, args)
}
