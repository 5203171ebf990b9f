package deltalog

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
)

// CopyV2CheckpointTable copies testdata/v2checkpoint, a table Spark 4.0.1
// with delta-spark 4.0.1 wrote with delta.checkpointPolicy=v2 (a v2
// checkpoint at version 2: 00000000000000000002.checkpoint.<uuid>.json
// with a sidecar, _last_checkpoint naming it), to a temp dir.
func copyV2CheckpointTable(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src := "testdata/v2checkpoint"
	require.NoError(t, filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	return dst
}

// v2 checkpoints are refused by name however the checkpoint is found:
// through _last_checkpoint (with or without its v2Checkpoint field), by
// listing the log, or for time travel; the error was "no such object".
func TestV2CheckpointRefusedByName(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, ErrUnsupportedFeature)
		require.ErrorContains(t, err, "v2Checkpoint")
	}
	t.Run("last checkpoint", func(t *testing.T) {
		st, err := objstore.NewLocal(copyV2CheckpointTable(t))
		require.NoError(t, err)
		_, err = NewTable(st, nil).Snapshot(ctx)
		check(t, err)
	})
	t.Run("last checkpoint without v2 field", func(t *testing.T) {
		dir := copyV2CheckpointTable(t)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "_delta_log/_last_checkpoint"), []byte(`{"version":2,"size":6}`), 0o644))
		st, err := objstore.NewLocal(dir)
		require.NoError(t, err)
		_, err = NewTable(st, nil).Snapshot(ctx)
		check(t, err)
	})
	t.Run("listed", func(t *testing.T) {
		dir := copyV2CheckpointTable(t)
		require.NoError(t, os.Remove(filepath.Join(dir, "_delta_log/_last_checkpoint")))
		st, err := objstore.NewLocal(dir)
		require.NoError(t, err)
		_, err = NewTable(st, nil).Snapshot(ctx)
		check(t, err)
		_, err = NewTable(st, nil).SnapshotAt(ctx, 3)
		check(t, err)
		s, err := NewTable(st, nil).SnapshotAt(ctx, 1) // before the checkpoint: plain JSON
		require.NoError(t, err)
		check(t, s.CheckRead())
	})
}
