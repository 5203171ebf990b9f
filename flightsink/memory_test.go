package flightsink_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
)

// IDsOf returns the "id" column of every batch a Memory sink holds for target.
func memoryIDs(m *flightsink.Memory, target string) []int64 {
	var out []int64
	for _, b := range m.Batches(target) {
		out = append(out, b.Column(0).(*array.Int64).Int64Values()...)
		b.Release()
	}
	return out
}

func TestMemoryConformance(t *testing.T) {
	m := flightsink.NewMemory()
	sinktest.Run(t, sinktest.Harness{
		NewSink: func(t *testing.T) flightsink.Sink {
			t.Cleanup(m.Release)
			return m
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			return memoryIDs(m, p.Target)
		},
		Guarantee: flightsink.ExactlyOnce,
	})
}
