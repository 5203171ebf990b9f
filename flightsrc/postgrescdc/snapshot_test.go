package postgrescdc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgrescdc"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// The snapshot reads pages with COPY (SELECT …) (FORMAT binary): every type
// of the binary map comes out as its Arrow type, nulls included; pages end
// inside a run of equal first key columns; keys with quotes and
// backslashes (written into the page's COPY as literals) resume exactly: a
// read closed after its first page and resumed from that page's checkpoint
// returns the rest, the two together the same rows, in key order, as an
// uninterrupted read.
func TestIntegrationSnapshotTypesAndResume(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := pgtest.Conn(t)
	ctx := context.Background()
	table := newTable(t, c, "cdcsnaptypes", `k1 int, k2 text, i2 smallint, i8 bigint, f4 real, f8 double precision, b boolean,
		by bytea, vc varchar(10), bp char(3), j json, jb jsonb, ts timestamp, tz timestamptz, d date, n numeric(12,2),
		ai int[], at text[], PRIMARY KEY (k1, k2)`)
	pgtest.Exec(t, c, `INSERT INTO `+table+` SELECT i / 5, (ARRAY['a', 'O''Brien', 'back\slash', 'é', 'z''''$$'])[i % 5 + 1],
		CASE WHEN i % 4 <> 3 THEN i - 300 END, CASE WHEN i % 4 <> 3 THEN i::bigint << 40 END,
		CASE WHEN i % 4 <> 3 THEN i / 3.0 END, CASE WHEN i % 4 <> 3 THEN i * -1.25 END, CASE WHEN i % 4 <> 3 THEN i % 2 = 0 END,
		CASE WHEN i % 4 <> 3 THEN decode(lpad(to_hex(i), 4, '0'), 'hex') END, CASE WHEN i % 4 <> 3 THEN 'v' || i END,
		CASE WHEN i % 4 <> 3 THEN 'c' END, CASE WHEN i % 4 <> 3 THEN ('{"i": ' || i || '}')::json END,
		CASE WHEN i % 4 <> 3 THEN ('{"i": ' || i || '}')::jsonb END,
		CASE WHEN i % 4 <> 3 THEN '2026-01-02 03:04:05.123456'::timestamp + i * interval '1 day' END,
		CASE WHEN i % 4 <> 3 THEN '2026-01-02 03:04:05.123456+00'::timestamptz + i * interval '1 hour' END,
		CASE WHEN i % 4 <> 3 THEN '2026-01-02'::date + i END, CASE WHEN i % 4 <> 3 THEN i * 1.01 - 3 END,
		CASE WHEN i % 4 <> 3 THEN ARRAY[i, NULL, -i] END, CASE WHEN i % 4 <> 3 THEN ARRAY['p', '', 'q''r'] END
		FROM generate_series(0, 22) i`)
	var wantKeys []string
	rows, err := c.Query(ctx, `SELECT k1::text || ' ' || k2 FROM `+table+` ORDER BY k1, k2 COLLATE "C"`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		wantKeys = append(wantKeys, k)
	}
	require.NoError(t, rows.Err())
	require.Len(t, wantKeys, 23)

	newSrc := func() *postgrescdc.Source {
		s, err := postgrescdc.New(ctx, postgrescdc.Config{DSN: pgtest.DSN(t), Table: table, Slot: table, Publication: table,
			BatchRows: 4, PollInterval: 20 * time.Millisecond}, postgrescdc.Allocator(mem), postgrescdc.Logger(quiet))
		require.NoError(t, err)
		return s
	}
	// render is each row of rec, its columns' values joined by "|".
	render := func(rec arrow.RecordBatch) []string {
		var out []string
		for i := range int(rec.NumRows()) {
			var vals []string
			for _, col := range rec.Columns() {
				vals = append(vals, col.ValueStr(i))
			}
			out = append(out, strings.Join(vals, "|"))
		}
		return out
	}
	// read reads the snapshot from after (nil: a new one), at most pages
	// pages (0: to its end), returning the rows and the last checkpoint.
	read := func(after []byte, pages int) ([]string, []byte) {
		rd, err := newSrc().Read(ctx, flightsrc.ReadRequest{Stream: table, After: after})
		require.NoError(t, err)
		defer func() { require.NoError(t, rd.Close()) }()
		if after == nil {
			want := []arrow.DataType{arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int16,
				arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean,
				arrow.BinaryTypes.Binary, arrow.BinaryTypes.String, arrow.BinaryTypes.String, arrow.BinaryTypes.String,
				arrow.BinaryTypes.String, &arrow.TimestampType{Unit: arrow.Microsecond},
				&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, arrow.FixedWidthTypes.Date32,
				&arrow.Decimal128Type{Precision: 12, Scale: 2}, arrow.ListOf(arrow.PrimitiveTypes.Int32), arrow.ListOf(arrow.BinaryTypes.String)}
			for i, dt := range want {
				require.Truef(t, arrow.TypeEqual(dt, rd.Schema().Field(i).Type), "column %s: %s", rd.Schema().Field(i).Name, rd.Schema().Field(i).Type)
			}
		}
		var out []string
		var cp []byte
		for n := 0; pages == 0 || n < pages; n++ {
			rec, c, err := rd.Next(ctx)
			require.NoError(t, err)
			require.LessOrEqual(t, rec.NumRows(), int64(4), "a batch holds at most BatchRows rows")
			out = append(out, render(rec)...)
			if n == 0 && after == nil {
				// The first row, value by value.
				require.Equal(t, int32(0), rec.Column(0).(*array.Int32).Value(0))
				require.Equal(t, "O'Brien", rec.Column(1).(*array.String).Value(0))
				require.Equal(t, []byte{0, 1}, rec.Column(7).(*array.Binary).Value(0))
				require.Equal(t, "c  ", rec.Column(9).(*array.String).Value(0), "char(3) is blank-padded")
				require.Equal(t, `{"i": 1}`, rec.Column(11).(*array.String).Value(0), "jsonb as its text")
				require.Equal(t, "2026-01-02T04:04:05.123456Z", rec.Column(13).(*array.Timestamp).Value(0).ToTime(arrow.Microsecond).Format(time.RFC3339Nano))
				require.Equal(t, "-1.99", rec.Column(15).(*array.Decimal128).Value(0).ToString(2))
				ai := rec.Column(16).(*array.List).ListValues().(*array.Int32)
				require.Equal(t, []any{int32(1), nil, int32(-1)}, []any{ai.Value(0), ai.GetOneForMarshal(1), ai.Value(2)}, "int[]")
			}
			rec.Release()
			cp = c
			if !strings.Contains(string(c), `"snapshot"`) {
				break
			}
		}
		return out, cp
	}
	first, cp := read(nil, 1)
	require.Len(t, first, 4)
	require.Contains(t, string(cp), `"snapshot"`, "the checkpoint is inside the snapshot")
	rest, _ := read(cp, 0)
	whole, _ := read(nil, 0)
	require.Equal(t, whole, append(first, rest...), "closed after a page and resumed = read at once")
	var gotKeys []string
	for _, r := range whole {
		f := strings.Split(r, "|")
		gotKeys = append(gotKeys, f[0]+" "+f[1])
	}
	require.Equal(t, wantKeys, gotKeys, "every row once, in key order")
	require.True(t, strings.HasPrefix(whole[4], "0|é|(null)|(null)|"), "a row of nulls (é sorts after z in byte order): %s", whole[4])
}
