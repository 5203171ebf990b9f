package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flightline/flightline/coordinator/coordtest"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// The PostgreSQL sink's live heap does not grow with the stream it copies:
// 200 transactions of 1,000 rows each into a real server.
func TestIntegrationMemoryFlat(t *testing.T) {
	s := newSink(t, postgres.Config{DSN: pgtest.DSN(t)})
	table := fmt.Sprintf("flat_%d", time.Now().UnixNano())
	coordtest.SinkFlat(t, s, flightsink.Pipeline{ID: table, Target: table}, 200_000, 1000, 4<<20, nil)
}
