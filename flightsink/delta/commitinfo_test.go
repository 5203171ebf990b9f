package delta_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// commitInfo.operationMetrics has numFiles, numOutputRows and
// numOutputBytes as strings, as Spark writes them; the claim of a resume
// carries no data and says so (no metrics, not a blind append).
func TestCommitInfoOperationMetrics(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s, err := delta.New(ctx, delta.Config{URI: dir}, delta.Allocator(mem))
	require.NoError(t, err)
	p := flightsink.Pipeline{ID: "m"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	for i, n := range []int64{10, 0} {
		rec := sinktest.Batch(mem, 0, n)
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(int64(10*(i+1)))))
		rec.Release()
	}
	require.NoError(t, w.Close(ctx))
	w, _, err = s.Open(ctx, p) // a resume: the claim commit
	require.NoError(t, err)
	require.NoError(t, w.Close(ctx))

	st, _ := objstore.NewLocal(dir)
	tbl := deltalog.NewTable(st, nil)
	version := func(v int64) (map[string]any, *deltalog.Add) {
		acts, err := tbl.ReadVersion(ctx, v)
		require.NoError(t, err)
		var ci map[string]any
		var add *deltalog.Add
		for _, a := range acts {
			if a.CommitInfo != nil {
				ci = a.CommitInfo
			}
			if a.Add != nil {
				add = a.Add
			}
		}
		require.NotNil(t, ci)
		return ci, add
	}
	ci, add := version(0)
	require.NotNil(t, add)
	require.Equal(t, "WRITE", ci["operation"])
	require.Equal(t, map[string]any{"numFiles": "1", "numOutputRows": "10", "numOutputBytes": strconv.FormatInt(add.Size, 10)}, ci["operationMetrics"])
	require.Equal(t, true, ci["isBlindAppend"])
	ci, add = version(1)
	require.Nil(t, add)
	require.Equal(t, map[string]any{"numFiles": "0", "numOutputRows": "0", "numOutputBytes": "0"}, ci["operationMetrics"])
	ci, add = version(2)
	require.Nil(t, add)
	require.Equal(t, "FLIGHTLINE CLAIM", ci["operation"])
	require.Equal(t, map[string]any{}, ci["operationMetrics"])
	require.Equal(t, map[string]any{}, ci["operationParameters"])
	require.Equal(t, false, ci["isBlindAppend"])
}
