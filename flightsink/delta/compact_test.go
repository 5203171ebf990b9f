package delta_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// The conformance suite with a compaction after every other commit: the
// background compactor never costs a batch its exactly-once.
func TestConformanceCompacting(t *testing.T) {
	sinktest.Run(t, harness(t.TempDir(), nil, delta.Config{TargetFileSize: 1 << 20, CompactMinFiles: 2}))
}

// writeBatches commits n batches of rows ids each, from 0, and closes.
func writeBatches(t *testing.T, s *delta.Sink, p flightsink.Pipeline, n, rows int) {
	t.Helper()
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	for i := range n {
		rec := sinktest.Batch(mem, int64(i*rows), int64((i+1)*rows))
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(int64((i+1)*rows))))
		rec.Release()
	}
	require.NoError(t, w.Close(ctx))
}

func snapshot(t *testing.T, dir string) *deltalog.Snapshot {
	t.Helper()
	st, err := objstore.Open(context.Background(), dir, nil)
	require.NoError(t, err)
	snap, err := deltalog.NewTable(st, nil).Snapshot(context.Background())
	require.NoError(t, err)
	return snap
}

// operations returns the commitInfo operation of every version.
func operations(t *testing.T, dir string) []string {
	t.Helper()
	st, err := objstore.Open(context.Background(), dir, nil)
	require.NoError(t, err)
	tb := deltalog.NewTable(st, nil)
	var ops []string
	for v := int64(0); ; v++ {
		acts, err := tb.ReadVersion(context.Background(), v)
		if err != nil {
			return ops
		}
		for _, a := range acts {
			if a.CommitInfo != nil {
				ops = append(ops, a.CommitInfo["operation"].(string))
			}
		}
	}
}

// The sink compacts small files in the background: fewer files, the same
// rows, compaction commits with dataChange false only.
func TestSinkCompactsInBackground(t *testing.T) {
	dir := t.TempDir()
	s, err := delta.New(context.Background(), delta.Config{URI: dir, TargetFileSize: 1 << 20, CompactMinFiles: 5, Vacuum: "off"})
	require.NoError(t, err)
	writeBatches(t, s, flightsink.Pipeline{ID: "c"}, 40, 100)
	snap := snapshot(t, dir)
	require.Less(t, len(snap.Files), 40, "compacted")
	ops := operations(t, dir)
	require.Contains(t, ops, "OPTIMIZE")
	require.Equal(t, 40, strings.Count(strings.Join(ops, ","), "WRITE"), "every batch committed once")
	ids := readIDs(t, dir, nil)
	slices.Sort(ids)
	require.Equal(t, seq(0, 4000), ids)
	// Compaction commits change no data.
	st, _ := objstore.Open(context.Background(), dir, nil)
	tb := deltalog.NewTable(st, nil)
	for v := int64(0); v <= snap.Version; v++ {
		acts, err := tb.ReadVersion(context.Background(), v)
		require.NoError(t, err)
		if acts[0].CommitInfo["operation"] != "OPTIMIZE" {
			continue
		}
		for _, a := range acts[1:] {
			switch {
			case a.Add != nil:
				require.False(t, a.Add.DataChange)
				var stats struct{ NumRecords int64 }
				require.NoError(t, json.Unmarshal([]byte(a.Add.Stats), &stats))
				require.Positive(t, stats.NumRecords)
			case a.Remove != nil:
				require.False(t, a.Remove.DataChange)
				require.NotNil(t, a.Remove.DeletionTimestamp)
			default:
				t.Fatalf("compaction commit %d holds %+v", v, a)
			}
		}
	}
	// Compaction off: one file per batch.
	dir2 := t.TempDir()
	s2, err := delta.New(context.Background(), delta.Config{URI: dir2, Compaction: "off"})
	require.NoError(t, err)
	writeBatches(t, s2, flightsink.Pipeline{ID: "c"}, 12, 10)
	require.Len(t, snapshot(t, dir2).Files, 12)
	require.NotContains(t, operations(t, dir2), "OPTIMIZE")
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// Optimize compacts a table written with compaction off into files near
// the target, keeps the rows, and a second run finds nothing to do.
func TestOptimize(t *testing.T) {
	dir := t.TempDir()
	s, err := delta.New(context.Background(), delta.Config{URI: dir, Compaction: "off", TargetFileSize: 64 << 10})
	require.NoError(t, err)
	writeBatches(t, s, flightsink.Pipeline{ID: "o"}, 30, 500)
	before := len(snapshot(t, dir).Files)
	res, err := s.Optimize(context.Background(), "")
	require.NoError(t, err)
	require.Positive(t, res.Commits)
	require.Equal(t, before, res.FilesRemoved)
	after := snapshot(t, dir)
	require.Less(t, len(after.Files), before)
	require.Len(t, after.Files, before-res.FilesRemoved+res.FilesAdded)
	for _, f := range after.Files {
		require.LessOrEqual(t, f.Size, int64(64<<10)*2, f.Path)
	}
	ids := readIDs(t, dir, nil)
	slices.Sort(ids)
	require.Equal(t, seq(0, 15000), ids)
	again, err := s.Optimize(context.Background(), "")
	require.NoError(t, err)
	require.Zero(t, again.Commits)
	// The writer resumes from its checkpoint on the compacted table.
	w, cp, err := s.Open(context.Background(), flightsink.Pipeline{ID: "o"})
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(15000), cp)
	require.NoError(t, w.Close(context.Background()))
}

// Vacuum: with short retentions, expired log entries and files removed by
// compaction or never committed go; what the oldest kept version or the
// current one references stays, and the table reads the same.
func TestVacuum(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := delta.New(ctx, delta.Config{URI: dir, Compaction: "off", TargetFileSize: 64 << 10, CheckpointInterval: 5, Vacuum: "off"}, delta.LogRetention(time.Millisecond), delta.FileRetention(time.Millisecond))
	require.NoError(t, err)
	writeBatches(t, s, flightsink.Pipeline{ID: "v"}, 12, 500)
	// An orphan, as a compaction killed before its commit leaves.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "part-00000-orphan-c000.snappy.parquet"), []byte("x"), 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "part-00000-orphan-c000.snappy.parquet"), old, old))
	// Nothing expired yet before a checkpoint older than the retention:
	// a dry run at once keeps version 0 loadable.
	res, err := s.Optimize(ctx, "")
	require.NoError(t, err)
	require.Positive(t, res.FilesRemoved)
	// Make every data file old, as if written long ago.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".parquet") {
			require.NoError(t, os.Chtimes(filepath.Join(dir, e.Name()), old, old))
		}
	}
	// Commit past a checkpoint so the one at version 10 expires.
	writeBatches(t, s, flightsink.Pipeline{ID: "v"}, 0, 0)
	time.Sleep(5 * time.Millisecond)
	dry, err := s.Vacuum(ctx, "", true)
	require.NoError(t, err)
	require.True(t, dry.DryRun)
	require.NotEmpty(t, dry.LogFiles)
	require.NotEmpty(t, dry.DataFiles)
	require.Contains(t, dry.DataFiles, "part-00000-orphan-c000.snappy.parquet")
	_, err = os.Stat(filepath.Join(dir, "part-00000-orphan-c000.snappy.parquet"))
	require.NoError(t, err, "a dry run deletes nothing")
	got, err := s.Vacuum(ctx, "", false)
	require.NoError(t, err)
	require.Equal(t, dry.LogFiles, got.LogFiles)
	require.Equal(t, dry.DataFiles, got.DataFiles)
	snap := snapshot(t, dir)
	for p := range snap.Files {
		_, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err, "active file %s kept", p)
	}
	for _, k := range got.DataFiles {
		require.NotContains(t, snap.Files, k)
	}
	ids := readIDs(t, dir, nil)
	slices.Sort(ids)
	require.Equal(t, seq(0, 6000), ids)
	// The oldest kept version still loads, and so do the pipeline's txns.
	st, _ := objstore.Open(ctx, dir, nil)
	at, err := deltalog.NewTable(st, nil).SnapshotAt(ctx, got.Oldest)
	require.NoError(t, err)
	for p := range at.Files {
		_, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err, "file %s of the oldest version kept", p)
	}
	require.Contains(t, snap.Txns, "v")
	w, cp, err := s.Open(ctx, flightsink.Pipeline{ID: "v"})
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(6000), cp)
	require.NoError(t, w.Close(ctx))
}
