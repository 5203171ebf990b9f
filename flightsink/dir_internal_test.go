package flightsink

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
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

// Checkpoint reads the newest commit file of the pipeline (and the files
// of other pipelines after it), not the whole target: the files it opens
// do not grow with the number of commits. Checkpoints are merged across
// commits whose positions name different partitions.
func TestDirCheckpointReadsOnlyTheNewestCommit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	d, err := NewDir(t.TempDir(), mem)
	require.NoError(t, err)
	p, q := Pipeline{ID: "p"}, Pipeline{ID: "q"}
	reads := func(p Pipeline, want string) int64 {
		t.Helper()
		before := d.reads.Load()
		cp, err := d.Checkpoint(ctx, p)
		require.NoError(t, err)
		require.Equal(t, want, string(cp))
		return d.reads.Load() - before
	}
	require.Zero(t, reads(p, ""), "no target yet")

	w, _, err := d.Open(ctx, p)
	require.NoError(t, err)
	commit := func(w Writer, i int) {
		rec := oneRow(mem, int64(i))
		defer rec.Release()
		cp := fmt.Sprintf(`{"positions":{"t/%d":%d}}`, i%2, i+1) // two partitions, alternately
		require.NoError(t, w.WriteBatch(ctx, rec, []byte(cp)))
	}
	for i := range 4 {
		commit(w, i)
	}
	require.EqualValues(t, 1, reads(p, `{"positions":{"t/0":3,"t/1":4}}`))
	for i := 4; i < 300; i++ {
		commit(w, i)
	}
	require.EqualValues(t, 1, reads(p, `{"positions":{"t/0":299,"t/1":300}}`), "one file read after 300 commits as after 4")

	// Another pipeline's marker and commits after p's newest are read too.
	wq, _, err := d.Open(ctx, q)
	require.NoError(t, err)
	commit(wq, 0)
	commit(wq, 1)
	require.EqualValues(t, 4, reads(p, `{"positions":{"t/0":299,"t/1":300}}`))
	require.EqualValues(t, 1, reads(q, `{"positions":{"t/0":1,"t/1":2}}`))
}

// A target written before commit files held the merged checkpoint
// (DirMetaMerged) is merged whole, as before; the first new commit holds
// the merge, and from then on one file is read.
func TestDirCheckpointOfOlderFiles(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	d, err := NewDir(root, mem)
	require.NoError(t, err)
	p := Pipeline{ID: "p"}
	w, _, err := d.Open(ctx, p)
	require.NoError(t, err)
	legacy := w.(*dirWriter)
	for i := range 4 { // as older versions wrote them: the batch's checkpoint alone
		rec := oneRow(mem, int64(i))
		ok, err := legacy.linkLegacy(rec, []byte(fmt.Sprintf(`{"positions":{"t/%d":%d}}`, i%2, i+1)))
		rec.Release()
		require.NoError(t, err)
		require.True(t, ok)
	}
	want := `{"positions":{"t/0":3,"t/1":4}}`
	cp, err := d.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, want, string(cp), "older files: every commit merged")

	w, cp, err = d.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, want, string(cp))
	rec := oneRow(mem, 4)
	require.NoError(t, w.WriteBatch(ctx, rec, []byte(`{"positions":{"t/0":5}}`)))
	rec.Release()
	before := d.reads.Load()
	cp, err = d.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, `{"positions":{"t/0":5,"t/1":4}}`, string(cp))
	require.EqualValues(t, 1, d.reads.Load()-before)
}

// linkLegacy commits rec as files were written before DirMetaMerged: the
// batch's own checkpoint, unmarked.
func (w *dirWriter) linkLegacy(rec arrow.RecordBatch, cp []byte) (bool, error) {
	w.d.legacyFiles = true
	defer func() { w.d.legacyFiles = false }()
	ok, err := w.link([]arrow.RecordBatch{rec}, cp, true)
	if ok {
		w.cp = checkpoint.Next(w.cp, cp)
	}
	return ok, err
}
