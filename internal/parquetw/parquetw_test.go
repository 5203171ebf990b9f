package parquetw

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// batch: ids 0..n-1 (every value distinct), a status column of three
// values with some nulls, prices with a NaN and nulls.
func batch(mem memory.Allocator, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, testSchema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%10 == 0 {
			b.Field(1).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append([]string{"new", "paid", "shipped"}[i%3])
		}
		switch {
		case i%7 == 0:
			b.Field(2).(*array.Float64Builder).AppendNull()
		case i == 5:
			b.Field(2).(*array.Float64Builder).Append(math.NaN())
		default:
			b.Field(2).(*array.Float64Builder).Append(float64(i) / 4)
		}
	}
	return b.NewRecordBatch()
}

func TestWriteRoundTripSnappySelectiveDictionaryStats(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const n = 5000
	rec := batch(mem, n)
	defer rec.Release()

	data, st, err := Bytes(rec, Allocator(mem))
	require.NoError(t, err)
	require.EqualValues(t, n, st.NumRecords)

	// Statistics.
	require.Len(t, st.Columns, 3)
	id, status, price := st.Columns[0], st.Columns[1], st.Columns[2]
	require.True(t, id.HasMinMax)
	require.EqualValues(t, 0, id.Min)
	require.EqualValues(t, n-1, id.Max)
	require.Zero(t, id.NullCount)
	require.EqualValues(t, n/10, status.NullCount)
	require.EqualValues(t, (n+6)/7, price.NullCount)
	require.True(t, price.HasMinMax)
	require.EqualValues(t, 0.25, price.Min, "NaN is ignored")
	require.EqualValues(t, float64(n-1)/4, price.Max)

	// An independent reader: the file's own metadata and pqarrow.
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	require.NoError(t, err)
	defer pf.Close()
	rg := pf.MetaData().RowGroup(0)
	for i := range 3 {
		cc, err := rg.ColumnChunk(i)
		require.NoError(t, err)
		require.Equal(t, compress.Codecs.Snappy, cc.Compression(), "column %d", i)
	}
	idChunk, _ := rg.ColumnChunk(0)
	statusChunk, _ := rg.ColumnChunk(1)
	require.False(t, idChunk.HasDictionaryPage(), "distinct ids: no dictionary")
	require.True(t, statusChunk.HasDictionaryPage(), "three statuses: dictionary pays")

	rdr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	require.NoError(t, err)
	tbl, err := rdr.ReadTable(context.Background())
	require.NoError(t, err)
	defer tbl.Release()
	require.EqualValues(t, n, tbl.NumRows())
	tr := array.NewTableReader(tbl, n)
	defer tr.Release()
	require.True(t, tr.Next())
	got := tr.RecordBatch()
	for i := range 3 {
		require.Truef(t, array.ApproxEqual(rec.Column(i), got.Column(i), array.WithNaNsEqual(true)), "column %s", rec.ColumnName(i))
	}
}

func TestDictionaryPays(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batch(mem, 2000)
	defer rec.Release()
	require.False(t, DictionaryPays(rec.Column(0)))
	require.True(t, DictionaryPays(rec.Column(1)))
	empty := batch(mem, 0)
	defer empty.Release()
	require.False(t, DictionaryPays(empty.Column(1)))
}

func TestDictionaryOverrides(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batch(mem, 1000)
	defer rec.Release()
	for _, tc := range []struct {
		opt  Option
		want bool
	}{{DictionaryAlways(), true}, {DictionaryNever(), false}} {
		data, _, err := Bytes(rec, tc.opt, Allocator(mem))
		require.NoError(t, err)
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		require.NoError(t, err)
		cc, err := pf.MetaData().RowGroup(0).ColumnChunk(0)
		require.NoError(t, err)
		require.Equal(t, tc.want, cc.HasDictionaryPage())
		pf.Close()
	}
}

// KeepTimestampUnit stores nanoseconds as nanoseconds; the default
// coerces them to microseconds, truncating.
func TestKeepTimestampUnit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ns}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	b.Field(0).(*array.TimestampBuilder).Append(1_700_000_000_123_456_789)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	read := func(opts ...Option) arrow.Timestamp {
		data, _, err := Bytes(rec, append(opts, Allocator(mem))...)
		require.NoError(t, err)
		r, err := file.NewParquetReader(bytes.NewReader(data))
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, mem)
		require.NoError(t, err)
		tbl, err := fr.ReadTable(context.Background())
		require.NoError(t, err)
		defer tbl.Release()
		col := tbl.Column(0).Data().Chunk(0).(*array.Timestamp)
		unit := col.DataType().(*arrow.TimestampType).Unit
		return arrow.Timestamp(col.Value(0).ToTime(unit).UnixNano())
	}
	require.Equal(t, arrow.Timestamp(1_700_000_000_123_456_789), read(KeepTimestampUnit()))
	require.Equal(t, arrow.Timestamp(1_700_000_000_123_456_000), read())
}
