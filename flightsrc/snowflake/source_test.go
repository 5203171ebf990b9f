package snowflake_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/snowflake"
	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// A timestamp cursor with ties and a string tiebreak: reading two rows at a
// time, restarting from every checkpoint, returns every row once, in
// (cursor, tiebreak) order.
func TestIntegrationTimestampCursorWithTies(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	db := snowtest.DB(t)
	table := strings.ToUpper(snowtest.Name("ts_cursor"))
	_, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (TS TIMESTAMP_NTZ(6) NOT NULL, K VARCHAR NOT NULL, N NUMBER(19,0))`)
	require.NoError(t, err)
	var vals, want []string
	base := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	for i := range 11 {
		ts := base.Add(time.Duration(i/3) * time.Microsecond) // ties of three, a microsecond apart
		k := fmt.Sprintf("k%02d", 10-i)                       // tiebreak order differs from insertion order
		vals = append(vals, fmt.Sprintf("('%s', '%s', %d)", ts.Format("2006-01-02 15:04:05.000000"), k, i))
	}
	_, err = db.ExecContext(ctx, `INSERT INTO `+table+` VALUES `+strings.Join(vals, ", "))
	require.NoError(t, err)
	rows, err := db.QueryContext(ctx, `SELECT K FROM `+table+` ORDER BY TS, K`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		want = append(want, k)
	}
	require.NoError(t, rows.Err())
	rows.Close()

	src, err := snowflake.New(context.Background(), snowflake.Config{Config: snowtest.Config(t),
		Tables: []snowflake.Table{{Name: table, Cursor: "TS", Tiebreak: "K"}}, BatchRows: 2}, snowflake.Allocator(mem))
	require.NoError(t, err)
	defer src.Close()
	var got []string
	var cp []byte
	for len(got) < len(want) {
		// A fresh reader after each batch: every read resumes from a checkpoint.
		r, err := src.Read(ctx, flightsrc.ReadRequest{Stream: table, After: cp})
		require.NoError(t, err)
		rec, next, err := r.Next(ctx)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		require.Positive(t, rec.NumRows(), "stuck after %d rows at %s", len(got), cp)
		ks := rec.Column(1).(*array.String)
		for i := range ks.Len() {
			got = append(got, ks.Value(i))
		}
		rec.Release()
		cp = next
	}
	require.Equal(t, want, got)
	require.Contains(t, string(cp), `"cursor":"2026-03-01T12:00:00.123459Z"`)

	_, err = src.Read(ctx, flightsrc.ReadRequest{Stream: table, After: []byte(`{"cursor":"x"}`)})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = src.Read(ctx, flightsrc.ReadRequest{Stream: "NOPE"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
}
