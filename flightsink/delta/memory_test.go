package delta_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/coordinator/coordtest"
	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
)

// The Delta sink's live heap does not grow with the stream it commits:
// 200 commits (with log checkpoints every 10) of 2,000 rows each. The
// append path alone: a background compaction holds its output file while
// it runs (see TestDeltaSinkMemoryFlatCompacting).
func TestDeltaSinkMemoryFlat(t *testing.T) {
	s, err := delta.New(context.Background(), delta.Config{URI: t.TempDir(), CheckpointInterval: 10, Compaction: "off"})
	require.NoError(t, err)
	coordtest.SinkFlat(t, s, flightsink.Pipeline{ID: "flat"}, 400_000, 2000, 8<<20, nil) // ~2 MiB of jitter: what the writer holds at the sample
}

// With compaction on, the live heap stays flat too: what a compaction
// holds is bounded by its target file size, not by the table.
func TestDeltaSinkMemoryFlatCompacting(t *testing.T) {
	s, err := delta.New(context.Background(), delta.Config{URI: t.TempDir(), CheckpointInterval: 10, TargetFileSize: 2 << 20, CompactMinFiles: 10})
	require.NoError(t, err)
	coordtest.SinkFlat(t, s, flightsink.Pipeline{ID: "flat"}, 200_000, 2000, 24<<20, nil) // a compaction in flight: its output, a row group, the readers and encoders
}
