package coordinator_test

import (
	"testing"

	"github.com/flightline/flightline/coordinator/coordtest"
	"github.com/flightline/flightline/flightsink"
)

// The coordinator holds at most its window of batches: its live heap does
// not grow over a stream 100 windows long.
func TestCoordinatorMemoryFlat(t *testing.T) {
	sink := flightsink.NewNull()
	coordtest.SinkFlat(t, sink, flightsink.Pipeline{ID: "flat"}, 400_000, 1000, 4<<20, nil)
}
