package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	sinkpg "github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgres"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// mapped lists every mapped Arrow type with the Arrow type the source reads
// it back as.
var mapped = []struct {
	name     string
	in, out  arrow.DataType
	jsonText bool // read back as JSON text
}{
	{"i8", arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, false},
	{"i16", arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int16, false},
	{"i32", arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32, false},
	{"i64", arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int64, false},
	{"u8", arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Int16, false},
	{"u16", arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Int32, false},
	{"u32", arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Int64, false},
	{"f32", arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float32, false},
	{"f64", arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Float64, false},
	{"b", arrow.FixedWidthTypes.Boolean, arrow.FixedWidthTypes.Boolean, false},
	{"s", arrow.BinaryTypes.String, arrow.BinaryTypes.String, false},
	{"ls", arrow.BinaryTypes.LargeString, arrow.BinaryTypes.String, false},
	{"bin", arrow.BinaryTypes.Binary, arrow.BinaryTypes.Binary, false},
	{"lbin", arrow.BinaryTypes.LargeBinary, arrow.BinaryTypes.Binary, false},
	{"ts_s", &arrow.TimestampType{Unit: arrow.Second}, &arrow.TimestampType{Unit: arrow.Microsecond}, false},
	{"ts_ms_tz", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, false},
	{"ts_us", &arrow.TimestampType{Unit: arrow.Microsecond}, &arrow.TimestampType{Unit: arrow.Microsecond}, false},
	{"ts_ns_tz", &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, false},
	{"d32", arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Date32, false},
	{"dec", &arrow.Decimal128Type{Precision: 10, Scale: 2}, &arrow.Decimal128Type{Precision: 10, Scale: 2}, false},
	{"dec38", &arrow.Decimal128Type{Precision: 38, Scale: 7}, &arrow.Decimal128Type{Precision: 38, Scale: 7}, false},
	{"l_i32", arrow.ListOf(arrow.PrimitiveTypes.Int32), arrow.ListOf(arrow.PrimitiveTypes.Int32), false},
	{"ll_s", arrow.LargeListOf(arrow.BinaryTypes.String), arrow.ListOf(arrow.BinaryTypes.String), false},
	{"l_ts", arrow.ListOf(&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}), arrow.ListOf(&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}), false},
	{"l_dec", arrow.ListOf(&arrow.Decimal128Type{Precision: 9, Scale: 3}), arrow.ListOf(&arrow.Decimal128Type{Precision: 9, Scale: 3}), false},
	{"st", arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), arrow.BinaryTypes.String, true},
	{"m", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), arrow.BinaryTypes.String, true},
}

const rtRows = 6

// fill appends rtRows values to b; row 5 is null for nullable columns.
func fill(t *testing.T, b array.Builder, row int) {
	if row == 5 {
		b.AppendNull()
		return
	}
	i := int64(row)
	decs := []string{"0", "-12.34", "99999999.99", "0.01", "12345678.9"}
	dec38 := []string{"0", "-1234567890123456789012345678901.2345678", "0.0000001", "9999999999999999999999999999999.9999999", "-0.5"}
	switch b := b.(type) {
	case *array.Int8Builder:
		b.Append([]int8{-128, 0, 127, 1, -1}[row])
	case *array.Int16Builder:
		b.Append([]int16{-32768, 0, 32767, 1, -1}[row])
	case *array.Int32Builder:
		b.Append([]int32{-2147483648, 0, 2147483647, 1, -1}[row])
	case *array.Int64Builder:
		b.Append([]int64{-9223372036854775808, 0, 9223372036854775807, 1, -1}[row])
	case *array.Uint8Builder:
		b.Append([]uint8{0, 1, 255, 7, 128}[row])
	case *array.Uint16Builder:
		b.Append([]uint16{0, 1, 65535, 7, 32768}[row])
	case *array.Uint32Builder:
		b.Append([]uint32{0, 1, 4294967295, 7, 2147483648}[row])
	case *array.Float32Builder:
		b.Append([]float32{0, -1.5, 3.4028235e38, 1e-30, 0.1}[row])
	case *array.Float64Builder:
		b.Append([]float64{0, -1.5, 1.7976931348623157e308, 5e-324, 0.1}[row])
	case *array.BooleanBuilder:
		b.Append(row%2 == 0)
	case *array.StringBuilder:
		b.Append([]string{"", "héllo", "quote'\"\\", "tab\tnewline\n", "✓ 日本"}[row])
	case *array.LargeStringBuilder:
		b.Append([]string{"", "x", "long " + string(make([]byte, 0)), "ü", "z"}[row])
	case *array.BinaryBuilder:
		b.Append([][]byte{{}, {0}, {0xff, 0x00, 0x7f}, []byte("bytes"), {1, 2, 3}}[row])
	case *array.TimestampBuilder:
		unit := b.Type().(*arrow.TimestampType).Unit
		tm := []time.Time{
			time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC),
			time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(2026, 7, 4, 12, 30, 15, 123456000, time.UTC),
			time.Date(1900, 2, 28, 1, 2, 3, 4000, time.UTC),
		}[row]
		v, err := arrow.TimestampFromTime(tm.Truncate(map[arrow.TimeUnit]time.Duration{arrow.Second: time.Second, arrow.Millisecond: time.Millisecond}[unit]), unit)
		require.NoError(t, err)
		b.Append(v)
	case *array.Date32Builder:
		b.Append(arrow.Date32FromTime(time.Date(1900+row*40, time.Month(row+1), 1+row, 0, 0, 0, 0, time.UTC)))
	case *array.Decimal128Builder:
		dt := b.Type().(*arrow.Decimal128Type)
		src := decs
		if dt.Precision == 38 {
			src = dec38
		}
		if dt.Precision == 9 {
			src = []string{"0", "-123456.789", "0.001", "999999.999", "1"}
		}
		n, err := decimal128.FromString(src[row], dt.Precision, dt.Scale)
		require.NoError(t, err)
		b.Append(n)
	case *array.ListBuilder:
		if row == 0 {
			b.Append(true) // empty list
			return
		}
		b.Append(true)
		for j := range row {
			if j == 1 {
				b.ValueBuilder().AppendNull()
				continue
			}
			fill(t, b.ValueBuilder(), (row+j)%5)
		}
	case *array.LargeListBuilder:
		b.Append(true)
		for j := range row {
			fill(t, b.ValueBuilder(), (row+j)%5)
		}
	case *array.StructBuilder:
		b.Append(true)
		fill(t, b.FieldBuilder(0), row)
		if row == 2 {
			b.FieldBuilder(1).AppendNull()
		} else {
			fill(t, b.FieldBuilder(1), row)
		}
	case *array.MapBuilder:
		b.Append(true)
		for j := range row {
			b.KeyBuilder().(*array.StringBuilder).Append(string(rune('a' + j)))
			b.ItemBuilder().(*array.Int64Builder).Append(i * int64(j))
		}
	default:
		t.Fatalf("no filler for %T", b)
	}
}

// norm is a comparable form of row i of a: its JSON, or for JSON text
// columns, the parsed JSON re-encoded.
func norm(t *testing.T, a arrow.Array, i int, jsonText bool) string {
	v := a.GetOneForMarshal(i)
	if ts, ok := a.(*array.Timestamp); ok && ts.IsValid(i) { // compare instants
		v = ts.Value(i).ToTime(ts.DataType().(*arrow.TimestampType).Unit).UTC().Format(time.RFC3339Nano)
	}
	if m, ok := a.(*array.Map); ok && m.IsValid(i) { // documented: string-keyed maps are JSON objects
		start, end := m.ValueOffsets(i)
		obj := map[string]any{}
		for j := start; j < end; j++ {
			obj[m.Keys().(*array.String).Value(int(j))] = m.Items().GetOneForMarshal(int(j))
		}
		v = obj
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	if !jsonText {
		return string(b)
	}
	if s, ok := v.(string); ok {
		b = []byte(s)
	}
	// Parse keeping numbers exact (jsonb stores them as numeric), re-encode
	// with sorted keys and no white space.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	require.NoError(t, dec.Decode(&x))
	b, err = json.Marshal(x)
	require.NoError(t, err)
	return string(b)
}

func TestIntegrationTypeMapRoundTrip(t *testing.T) {
	dsn := pgtest.DSN(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := pgtest.Name("roundtrip")

	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	for _, m := range mapped {
		fields = append(fields, arrow.Field{Name: m.name, Type: m.in, Nullable: true})
	}
	sc := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(mem, sc)
	for row := range rtRows {
		b.Field(0).(*array.Int64Builder).Append(int64(row))
		for c := range mapped {
			fill(t, b.Field(c+1), row)
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()

	sink, err := sinkpg.New(context.Background(), sinkpg.Config{DSN: dsn})
	require.NoError(t, err)
	defer sink.Close()
	w, _, err := sink.Open(ctx, flightsink.Pipeline{ID: table, Target: table})
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, []byte("cp-1")))

	src := newSource(t, mem, postgres.Config{Tables: []postgres.Table{{Name: table, Watermark: "id", Key: "id"}}})
	r, err := src.Read(ctx, flightsrc.ReadRequest{Stream: table})
	require.NoError(t, err)
	defer r.Close()
	got, _, err := r.Next(ctx)
	require.NoError(t, err)
	defer got.Release()
	require.EqualValues(t, rtRows, got.NumRows())

	require.False(t, got.Schema().Field(0).Nullable, "NOT NULL survives the round trip")
	for c, m := range mapped {
		f := got.Schema().Field(c + 1)
		require.Equal(t, m.name, f.Name)
		require.Truef(t, arrow.TypeEqual(m.out, f.Type), "%s: read back as %s, want %s", m.name, f.Type, m.out)
		for row := range rtRows {
			require.Equalf(t, norm(t, rec.Column(c+1), row, m.jsonText), norm(t, got.Column(c+1), row, m.jsonText),
				"column %s (%s) row %d", m.name, m.in, row)
		}
	}
}

func TestIntegrationSubMicrosecondRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := pgtest.Name("ns")
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ns}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	b.Field(1).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1000, 1001}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	sink, err := sinkpg.New(context.Background(), sinkpg.Config{DSN: dsn})
	require.NoError(t, err)
	defer sink.Close()
	w, _, err := sink.Open(ctx, flightsink.Pipeline{ID: table, Target: table})
	require.NoError(t, err)
	err = w.WriteBatch(ctx, rec, []byte("cp"))
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	var exists bool
	require.NoError(t, c.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists))
	require.False(t, exists, "the refused batch's transaction (and its CREATE TABLE) rolled back")
}
