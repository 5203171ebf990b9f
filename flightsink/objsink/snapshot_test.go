package objsink_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/sinktest"
)

// counting counts the backend calls a sink makes.
type counting struct {
	*objsink.Local
	gets, lists atomic.Int64
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	return c.Local.Get(ctx, key)
}

func (c *counting) List(ctx context.Context, dir string) ([]objsink.Object, error) {
	c.lists.Add(1)
	return c.Local.List(ctx, dir)
}

func newCounting(t *testing.T, root string) (*counting, *objsink.Sink) {
	l, err := objsink.NewLocal(root)
	require.NoError(t, err)
	c := &counting{Local: l}
	s, err := objsink.New(context.Background(), objsink.Config{Backend: c, Name: "file sink"})
	require.NoError(t, err)
	return c, s
}

// The cost of Open and Checkpoint does not grow with the number of commit
// records (the file sink's Kafka kill test overran its recovery bound when
// every Open and Checkpoint read every record, and every commit listed
// them all): a restarted process's Open reads the newest snapshot and the
// records after it, a long-lived sink's Checkpoint only the records since
// its last call, and a commit one record past the last it saw.
func TestOpenAndCheckpointReadOnlyNewRecords(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	p := flightsink.Pipeline{ID: "p"}
	other := flightsink.Pipeline{ID: "q"}
	const batches = 60

	_, s := newCounting(t, root)
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	wq, _, err := s.Open(ctx, other)
	require.NoError(t, err)
	c, s2 := newCounting(t, root) // a second process watching the checkpoint
	for i := range int64(batches) {
		rec := sinktest.Batch(mem, i*10, i*10+10)
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(i*10+10)))
		require.NoError(t, wq.WriteBatch(ctx, rec, sinktest.CP(i+1)))
		rec.Release()
		before := c.gets.Load()
		require.Equal(t, sinktest.CP(i*10+10), mustCP(t, s2, p))
		if i > 0 {
			require.LessOrEqual(t, c.gets.Load()-before, int64(3), "Checkpoint read more than the two new records and the first missing one")
		}
	}

	// A restarted process: the records after the last snapshot (none was
	// written after the first Opens: 2 markers), all of them once.
	c3, s3 := newCounting(t, root)
	w3, cp, err := s3.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(batches*10), cp)
	t.Logf("first Open after %d commits: %d gets, %d lists", 2*batches, c3.gets.Load(), c3.lists.Load())
	require.NoError(t, w3.Close(ctx))
	snaps, err := os.ReadDir(filepath.Join(root, "default", "_flightline", "snapshots"))
	require.NoError(t, err)
	require.NotEmpty(t, snaps, "Open wrote a snapshot")

	// Another restart: the newest snapshot and the one marker after it.
	c4, s4 := newCounting(t, root)
	w4, cp, err := s4.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(batches*10), cp)
	t.Logf("Open after a snapshot: %d gets, %d lists", c4.gets.Load(), c4.lists.Load())
	require.LessOrEqual(t, c4.gets.Load(), int64(6), "Open read records the snapshot covers")
	cq, err := s4.Checkpoint(ctx, other)
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(batches), cq, "the other pipeline's checkpoint is in the snapshot")

	// The writer fenced by the restarts is still refused, the replay
	// still a no-op, and the new writer goes on.
	rec := sinktest.Batch(mem, batches*10, batches*10+10)
	defer rec.Release()
	require.Error(t, w.WriteBatch(ctx, rec, sinktest.CP(batches*10+10)), "a zombie writer is fenced")
	require.NoError(t, w4.WriteBatch(ctx, rec, sinktest.CP(batches*10+10)))
	require.Equal(t, sinktest.CP(batches*10+10), mustCP(t, s2, p))
	require.Len(t, partIDs(t, root, objsink.Parquet, p), (batches+1)*10*2-10, "every batch of both pipelines once")
}

// A snapshot is only a shortcut: with every snapshot removed, a new
// process reads the commit records from the first and finds the same
// checkpoint; a damaged one is an error naming it.
func TestSnapshotRemovedOrDamaged(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	p := flightsink.Pipeline{ID: "p"}
	_, s := newCounting(t, root)
	for i := range int64(3) {
		w, _, err := s.Open(ctx, p)
		require.NoError(t, err)
		rec := sinktest.Batch(mem, i*10, i*10+10)
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(i*10+10)))
		rec.Release()
	}
	dir := filepath.Join(root, "default", "_flightline", "snapshots")
	snaps, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, snaps, 2, "the second and third Open found new records")
	require.NoError(t, os.RemoveAll(dir))
	_, s2 := newCounting(t, root)
	require.Equal(t, sinktest.CP(30), mustCP(t, s2, p))

	_, s3 := newCounting(t, root)
	w, cp, err := s3.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(30), cp)
	require.NoError(t, w.Close(ctx))
	snaps, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, snaps[0].Name()), []byte("{not json"), 0o644))
	_, s4 := newCounting(t, root)
	_, _, err = s4.Open(ctx, p)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), snaps[0].Name()), "%v", err)
}
