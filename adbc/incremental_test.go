package adbc

import (
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
