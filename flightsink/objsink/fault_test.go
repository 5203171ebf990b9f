package objsink_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/sinktest"
)

// faulty fails the operations its switches name, as a process that dies
// at that step would leave the store.
type faulty struct {
	*objsink.Local
	failCommit  atomic.Bool // PutIfAbsent of commit records
	failPublish atomic.Bool
	// lostRace: another process publishes and removes the staged copy
	// just before this one links it.
	lostRace atomic.Bool
}

var errDied = errors.New("the writer died here")

func (f *faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if f.failCommit.Load() {
		return errDied
	}
	return f.Local.PutIfAbsent(ctx, key, data)
}

func (f *faulty) Publish(ctx context.Context, from, to string) error {
	if f.failPublish.Load() {
		return errDied
	}
	if f.lostRace.Load() {
		if err := f.Local.Publish(ctx, from, to); err != nil {
			return err
		}
		if err := f.Local.Delete(ctx, from); err != nil {
			return err
		}
		return fmt.Errorf("link %s: %w", to, fs.ErrNotExist)
	}
	return f.Local.Publish(ctx, from, to)
}

func (f *faulty) Delete(ctx context.Context, key string) error {
	if f.failPublish.Load() || f.failCommit.Load() {
		return errDied // a dead writer cleans nothing up
	}
	return f.Local.Delete(ctx, key)
}

func newFaulty(t *testing.T, root string) (*faulty, *objsink.Sink) {
	l, err := objsink.NewLocal(root)
	require.NoError(t, err)
	f := &faulty{Local: l}
	s, err := objsink.New(context.Background(), objsink.Config{Backend: f, Name: "file sink"})
	require.NoError(t, err)
	return f, s
}

func visible(t *testing.T, root string) []string {
	files, err := filepath.Glob(filepath.Join(root, "default", "*"))
	require.NoError(t, err)
	var out []string
	for _, f := range files {
		if b := filepath.Base(f); !strings.HasPrefix(b, "_") && !strings.HasPrefix(b, ".") {
			out = append(out, b)
		}
	}
	return out
}

// A writer that dies after staging, before its commit record: a reader
// sees nothing of the batch, the checkpoint does not move, and the retry
// commits it once.
func TestDiedBeforeCommitLeavesNothingVisible(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	f, s := newFaulty(t, root)
	p := flightsink.Pipeline{ID: "p"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 10)
	defer rec.Release()
	f.failCommit.Store(true)
	require.ErrorIs(t, w.WriteBatch(ctx, rec, sinktest.CP(10)), errDied)
	require.Empty(t, visible(t, root))
	staged, err := os.ReadDir(filepath.Join(root, "default", "_flightline", "staging"))
	require.NoError(t, err)
	require.Len(t, staged, 1, "the staged data is there, hidden under _flightline")

	_, s2 := newFaulty(t, root)
	w2, cp, err := s2.Open(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
	require.NoError(t, w2.WriteBatch(ctx, rec, sinktest.CP(10)))
	require.Equal(t, []string{objsink.PartName(3, 0, 1, objsink.Parquet)}, visible(t, root))
	require.Equal(t, sinktest.CP(10), mustCP(t, s2, p))
}

// A writer that dies between its commit record and the publication of
// the part file: the checkpoint has the batch, and the next Open publishes
// it, once.
func TestDiedBeforePublishIsFinishedByOpen(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	f, s := newFaulty(t, root)
	p := flightsink.Pipeline{ID: "p"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 10)
	defer rec.Release()
	f.failPublish.Store(true)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(10)), "committed: publication is finished later")
	require.Empty(t, visible(t, root))
	require.Equal(t, sinktest.CP(10), mustCP(t, s, p))

	_, s2 := newFaulty(t, root)
	w2, cp, err := s2.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(10), cp)
	require.NoError(t, w2.WriteBatch(ctx, rec, sinktest.CP(10)), "a replay is a no-op")
	require.Equal(t, []string{objsink.PartName(2, 0, 1, objsink.Parquet)}, visible(t, root))
	require.Equal(t, seqIDs(0, 10), sortedIDs(partIDs(t, root, objsink.Parquet, p)))
	staged, err := os.ReadDir(filepath.Join(root, "default", "_flightline", "staging"))
	require.NoError(t, err)
	require.Empty(t, staged, "the staged copy is removed once published")
}

// Recovery that loses the race to publish a part file to another process
// (which then removed the staged copy) finds the part file there: no error.
func TestPublishRaceLost(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	f, s := newFaulty(t, root)
	p := flightsink.Pipeline{ID: "p"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 10)
	defer rec.Release()
	f.failPublish.Store(true)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(10)))
	f.failPublish.Store(false)
	f.lostRace.Store(true)
	_, cp, err := s.Open(ctx, p)
	require.NoError(t, err, "the part file is there: recovery's own link failing is no error")
	require.Equal(t, sinktest.CP(10), cp)
	require.Equal(t, seqIDs(0, 10), sortedIDs(partIDs(t, root, objsink.Parquet, p)))
}

func mustCP(t *testing.T, s flightsink.Sink, p flightsink.Pipeline) []byte {
	cp, err := s.Checkpoint(context.Background(), p)
	require.NoError(t, err)
	return cp
}

// A full file system: the commit fails with ErrUnavailable saying so,
// nothing is visible or committed, and the pipeline goes on once space
// returns. It mounts a small tmpfs, so it needs root.
func TestDiskFull(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounts a tmpfs: needs root")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "flightline-objsink", root).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", root).Run() })

	_, s := newFaulty(t, root)
	p := flightsink.Pipeline{ID: "p"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 1000)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(1000)))

	filler := filepath.Join(root, "filler")
	fh, err := os.Create(filler)
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(buf); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, fh.Close())
	more := sinktest.Batch(mem, 1000, 2000)
	defer more.Release()
	err = w.WriteBatch(ctx, more, sinktest.CP(2000))
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorContains(t, err, "the file system is full")
	require.Equal(t, sinktest.CP(1000), mustCP(t, s, p))
	require.Len(t, visible(t, root), 1)

	require.NoError(t, os.Remove(filler))
	require.NoError(t, w.WriteBatch(ctx, more, sinktest.CP(2000)))
	require.Equal(t, seqIDs(0, 2000), sortedIDs(partIDs(t, root, objsink.Parquet, p)))
}

func seqIDs(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func sortedIDs(ids []int64) []int64 {
	slices.Sort(ids)
	return ids
}

// unsure creates commit records but answers as a store whose answer was
// lost does: with an error (a cancelled or cut request), or, retried by
// its client, with ErrExists for the record it just created.
type unsure struct {
	*objsink.Local
	mode atomic.Int32 // 0: honest; 1: created, then an error; 2: created, then ErrExists
}

func (u *unsure) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := u.Local.PutIfAbsent(ctx, key, data)
	if err != nil || !strings.Contains(key, "/commits/") {
		return err
	}
	switch u.mode.Load() {
	case 1:
		return fmt.Errorf("%w: the answer was lost", flightline.ErrUnavailable)
	case 2:
		return fmt.Errorf("%s (a retry): %w", key, objsink.ErrExists)
	}
	return nil
}

// A commit record the store created while the writer saw an error (the
// run process killed mid-request, found by the azblob Kafka kill test:
// the writer dropped the staged data of a committed record, and every
// later Open failed): the staged data stays, the next Open publishes it,
// and the batch is there once. A retried request answered ErrExists for
// the writer's own record is the writer's commit, not a fence.
func TestCommitOutcomeUnknown(t *testing.T) {
	for mode, name := range map[int32]string{1: "error", 2: "exists"} {
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			ctx := context.Background()
			root := t.TempDir()
			l, err := objsink.NewLocal(root)
			require.NoError(t, err)
			u := &unsure{Local: l}
			s, err := objsink.New(context.Background(), objsink.Config{Backend: u, Name: "file sink"})
			require.NoError(t, err)
			p := flightsink.Pipeline{ID: "p"}
			w, _, err := s.Open(ctx, p)
			require.NoError(t, err)
			rec := sinktest.Batch(mem, 0, 10)
			defer rec.Release()
			require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(10)))
			u.mode.Store(mode)
			rec2 := sinktest.Batch(mem, 10, 20)
			defer rec2.Release()
			err = w.WriteBatch(ctx, rec2, sinktest.CP(20))
			if mode == 1 {
				require.ErrorIs(t, err, flightline.ErrUnavailable)
			} else {
				require.NoError(t, err, "the writer's own record is its commit")
			}
			u.mode.Store(0)
			w, cp, err := s.Open(ctx, p)
			require.NoError(t, err, "the next Open")
			require.Equal(t, sinktest.CP(20), cp, "the record was created: the batch is committed")
			require.NoError(t, w.WriteBatch(ctx, rec2, sinktest.CP(20)), "the coordinator's replay is a no-op")
			ids := partIDs(t, root, objsink.Parquet, p)
			slices.Sort(ids)
			want := make([]int64, 20)
			for i := range want {
				want[i] = int64(i)
			}
			require.Equal(t, want, ids, "every id once")
		})
	}
}
