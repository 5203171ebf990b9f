package delta_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
)

func parquetFiles(t *testing.T, dir string) int {
	m, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	require.NoError(t, err)
	return len(m)
}

// TestStagedDataFiles: the Delta writer is a Stager. Stage writes a data
// file that no commit references; CommitStaged commits it (the table's
// rows come from it, no second file is written); a staged batch that
// turns out to be a replay has its file deleted, and so has one whose
// group is refused before its commit is attempted.
func TestStagedDataFiles(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	ctx := context.Background()
	s, err := delta.New(ctx, delta.Config{URI: dir}, delta.Allocator(mem))
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "st"})
	require.NoError(t, err)
	defer w.Close(ctx)
	st, ok := w.(flightsink.Stager)
	require.True(t, ok, "the Delta writer stages")

	a := sinktest.Batch(mem, 0, 10)
	defer a.Release()
	staged, err := st.Stage(ctx, flightsink.Batch{Rec: a, CP: sinktest.CP(10)})
	require.NoError(t, err)
	require.Equal(t, 1, parquetFiles(t, dir), "Stage wrote the data file")
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: "st"})
	require.NoError(t, err)
	require.Nil(t, cp, "Stage commits nothing")
	require.NoError(t, st.CommitStaged(ctx, []flightsink.Batch{{Rec: a, CP: sinktest.CP(10)}}, []flightsink.Staged{staged}))
	require.Equal(t, 1, parquetFiles(t, dir), "the commit took the staged file")
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, readIDs(t, dir, nil))

	// A replay: staged, then found committed at commit time.
	staged, err = st.Stage(ctx, flightsink.Batch{Rec: a, CP: sinktest.CP(10)})
	require.NoError(t, err)
	require.Equal(t, 2, parquetFiles(t, dir))
	require.NoError(t, st.CommitStaged(ctx, []flightsink.Batch{{Rec: a, CP: sinktest.CP(10)}}, []flightsink.Staged{staged}))
	require.Equal(t, 1, parquetFiles(t, dir), "the replay's staged file is deleted")

	// Refused before any commit attempt (here: the group lacks a
	// checkpoint): the staged file is deleted.
	other := sinktest.Batch(mem, 10, 20)
	defer other.Release()
	staged, err = st.Stage(ctx, flightsink.Batch{Rec: other, CP: sinktest.CP(20)})
	require.NoError(t, err)
	require.Equal(t, 2, parquetFiles(t, dir))
	err = st.CommitStaged(ctx, []flightsink.Batch{{Rec: other, CP: nil}}, []flightsink.Staged{staged})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "a batch without checkpoint")
	require.Equal(t, 1, parquetFiles(t, dir), "the refused group's staged file is deleted")
}
