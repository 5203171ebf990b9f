package flightsink

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

func oneRow(mem memory.Allocator, v int64) arrow.RecordBatch {
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.Append(v)
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, 1)
}

// A zombie's commit that lands after a new Open scanned the directory but
// before its epoch marker is linked must be reflected in the checkpoint Open
// returns; otherwise the new writer resumes too early and duplicates it.
func TestDirOpenSeesCommitRacingItsScan(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	p := Pipeline{ID: "p", Target: "t"}

	zombieSink, err := NewDir(root, mem)
	require.NoError(t, err)
	zombie, _, err := zombieSink.Open(ctx, p)
	require.NoError(t, err)
	rec := oneRow(mem, 1)
	require.NoError(t, zombie.WriteBatch(ctx, rec, []byte("cp-1")))
	rec.Release()

	newSink, err := NewDir(root, mem) // another process
	require.NoError(t, err)
	newSink.testHookOpenScanned = func() {
		newSink.testHookOpenScanned = nil
		rec := oneRow(mem, 2)
		require.NoError(t, zombie.WriteBatch(ctx, rec, []byte("cp-2")))
		rec.Release()
	}
	w, cp, err := newSink.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, "cp-2", string(cp), "Open must return the checkpoint of the commit that raced its scan")

	rec = oneRow(mem, 3)
	err = zombie.WriteBatch(ctx, rec, []byte("cp-3"))
	require.ErrorIs(t, err, flightline.ErrFenced)
	require.NoError(t, w.WriteBatch(ctx, rec, []byte("cp-3")))
	rec.Release()
	got, err := newSink.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, "cp-3", string(got))
}
