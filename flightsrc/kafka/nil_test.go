package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
)

// Logger(nil) and Allocator(nil) mean the defaults, as everywhere in
// Flightline: the source reads (and logs as it starts the reader) instead
// of panicking on a nil logger.
func TestKfakeNilLoggerAndAllocatorMeanDefaults(t *testing.T) {
	brokers := fakeCluster(t, 1, "nil")
	produce(t, brokers, "nil", 0, 10, 0)
	src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"nil"}, GroupID: "g", WithoutGroupMembership: true, BatchWait: 10 * time.Millisecond},
		kafka.Logger(nil), kafka.Allocator(nil))
	require.NoError(t, err)
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: "nil"})
	require.NoError(t, err)
	defer rd.Close()
	rows := int64(0)
	for rows < 10 {
		rec, _, err := rd.Next(ctx)
		require.NoError(t, err)
		rows += rec.NumRows()
		rec.Release()
	}
}
