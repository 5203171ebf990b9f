package kafka_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/coordinator/coordtest"
	"github.com/flightline/flightline/flightsink"
)

// The Kafka sink's live heap does not grow with the stream it produces:
// 50 transactions of 1,000 records each into the real broker.
func TestIntegrationMemoryFlat(t *testing.T) {
	mem := checkedMem(t)
	s := newSink(t)
	topic := createTopic(t, "flat", 2, nil)
	coordtest.SinkFlat(t, s, flightsink.Pipeline{ID: topic + "-pipe", Target: topic}, 50_000, 1000, 4<<20, withValue(mem))
}

// withValue adds a binary "value" column (the row's id in decimal) to the
// generator's batches, which is what the Kafka sink writes.
func withValue(mem memory.Allocator) func(context.Context, arrow.RecordBatch) (arrow.RecordBatch, error) {
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		ids := rec.Column(0).(*array.Int64)
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		defer b.Release()
		for i := range ids.Len() {
			b.Append(strconv.AppendInt(nil, ids.Value(i), 10))
		}
		vals := b.NewArray()
		defer vals.Release()
		sc := arrow.NewSchema([]arrow.Field{rec.Schema().Field(0), {Name: "value", Type: arrow.BinaryTypes.Binary}}, nil)
		return array.NewRecordBatch(sc, []arrow.Array{rec.Column(0), vals}, rec.NumRows()), nil
	}
}
