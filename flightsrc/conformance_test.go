package flightsrc_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/srctest"
)

// The generator's stream is its configuration: rows [0, GenRows). Appending
// records is restarting it with a larger GenRows, so the suite runs it as a
// bounded source whose Readers see the rows configured when they opened.
func TestGeneratorConformance(t *testing.T) {
	var (
		mu   sync.Mutex
		rows = map[string]int64{}
	)
	srctest.Run(t, srctest.Harness{
		NewStream: func(t *testing.T) string { return fmt.Sprintf("gen%06d", rand.IntN(1e6)) },
		Append: func(t *testing.T, stream string, from, to int64) {
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, rows[stream], from)
			rows[stream] = to
		},
		NewSource: func(t *testing.T, mem memory.Allocator, stream string) flightsrc.Source {
			mu.Lock()
			n := rows[stream]
			mu.Unlock()
			require.Positive(t, n, "GenRows(0) would be unbounded")
			g, err := flightsrc.NewGenerator(flightsrc.GenStream(stream), flightsrc.GenRows(n), flightsrc.GenBatchRows(7), flightsrc.GenAllocator(mem))
			require.NoError(t, err)
			return g
		},
		Records: func(t *testing.T, _ string, rec arrow.RecordBatch) []srctest.Record {
			out := make([]srctest.Record, rec.NumRows())
			for i, id := range rec.Column(0).(*array.Int64).Int64Values() {
				out[i].ID = id
			}
			return out
		},
		Bounded:                 true,
		DeterministicBoundaries: true,
	})
}
