package iceberg_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	icesink "github.com/flightline/flightline/flightsink/iceberg"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/kafkadecode"
)

// The Kafka source's batches (binary views, millisecond timestamps, a
// list of header structs) are stored with lossless widenings and read
// back by iceberg-go's scan with the same values.
func TestKafkaSchemaStored(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := kafkadecode.Schema("orders", nil)
	b := array.NewRecordBuilder(mem, sc)
	ts := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 5 {
		b.Field(0).(*array.Int32Builder).Append(int32(i % 2))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(ts + int64(i)))
		b.Field(3).(*array.BinaryViewBuilder).Append([]byte{'k', byte('0' + i)})
		if i == 2 {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.BinaryViewBuilder).Append([]byte("value"))
		}
		lb := b.Field(5).(*array.ListBuilder)
		lb.Append(true)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		for j := 0; j < i%3; j++ {
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append("h")
			sb.FieldBuilder(1).(*array.BinaryBuilder).Append([]byte{byte(j)})
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()

	s := newSink(t, icesink.Config{Warehouse: t.TempDir()}, icesink.Allocator(mem))
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "k"})
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(5)))
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(10)))
	require.NoError(t, w.Close(ctx))

	ident, _ := s.Ident("")
	tbl, err := s.CatalogForTest().LoadTable(ctx, ident)
	require.NoError(t, err)
	at, err := tbl.Scan().ToArrowTable(ctx)
	require.NoError(t, err)
	defer at.Release()
	require.EqualValues(t, 10, at.NumRows())
	col := func(name string) arrow.Array { return at.Column(at.Schema().FieldIndices(name)[0]).Data().Chunk(0) }
	tsc := col("timestamp").(*array.Timestamp)
	require.Equal(t, arrow.Microsecond, tsc.DataType().(*arrow.TimestampType).Unit)
	require.Equal(t, arrow.Timestamp((ts+1)*1000), tsc.Value(1))
	require.Equal(t, []byte("k3"), col("key").(*array.Binary).Value(3))
	require.True(t, col("value").IsNull(2))
	off := col("headers").(*array.List).Offsets()
	require.Equal(t, int32(2), off[3]-off[2], "row 2 has two headers")
}
