package deltalog

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
)

// soakStats is an add's stats of the soak's Kafka-shaped batches.
const soakStats = `{"numRecords":500,"minValues":{"topic":"soak","partition":0,"offset":123456,"timestamp":"2026-12-03T15:00:00.000Z","value":"{\"n\":123456}"},` +
	`"maxValues":{"topic":"soak","partition":3,"offset":123955,"timestamp":"2026-12-03T15:00:00.500Z","value":"{\"n\":123955}"},` +
	`"nullCount":{"topic":0,"partition":0,"offset":0,"timestamp":0,"key":0,"value":0}}`

// A lean snapshot's checkpoints hold what a full snapshot's hold: the
// stats of files it keeps no stats of, and the tombstones of the
// checkpoint it was loaded from, across two checkpoints of its own.
func TestLeanCheckpointsMatchFull(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	st, err := objstore.Open(ctx, t.TempDir(), nil)
	require.NoError(t, err)
	tbl := NewTable(st, mem)
	base := richSnapshot(50)
	base.Version = 0
	require.NoError(t, tbl.Commit(ctx, 0, []Action{{Protocol: base.Protocol}, {MetaData: base.Metadata}}))
	require.NoError(t, tbl.WriteCheckpoint(ctx, base)) // "version 0": the whole rich state
	lean, err := tbl.LeanSnapshot(ctx)
	require.NoError(t, err)
	for _, a := range lean.Files {
		require.Empty(t, a.Stats, "a lean snapshot keeps no stats")
	}
	require.Empty(t, lean.Tombstones, "nor the checkpoint's tombstones")
	now := time.Now().UnixMilli()
	commit := func(v int64, acts []Action) {
		require.NoError(t, tbl.Commit(ctx, v, acts))
		require.NoError(t, lean.Apply(v, acts))
	}
	commit(1, []Action{{Add: &Add{Path: "new-1", PartitionValues: NullStrMap{}, Size: 9, ModificationTime: 5, DataChange: true, Stats: soakStats}},
		{Remove: &Remove{Path: "part-000000.parquet", DeletionTimestamp: &now, DataChange: false}}})
	require.NoError(t, tbl.WriteCheckpoint(ctx, lean))
	commit(2, []Action{{Remove: &Remove{Path: "new-1", DeletionTimestamp: &now}},
		{Add: &Add{Path: "new-2", PartitionValues: NullStrMap{}, Size: 3, ModificationTime: 6, DataChange: true, Stats: `{"numRecords":3}`}}})
	require.NoError(t, tbl.WriteCheckpoint(ctx, lean))
	require.Empty(t, lean.Tombstones)

	full, err := tbl.Snapshot(ctx) // from lean's checkpoint of version 2
	require.NoError(t, err)
	require.Equal(t, int64(2), full.CheckpointVersion)
	want := base.Clone()
	delete(want.Files, "part-000000.parquet")
	want.Files["new-2"] = &Add{Path: "new-2", PartitionValues: NullStrMap{}, Size: 3, ModificationTime: 6, Stats: `{"numRecords":3}`}
	require.Len(t, full.Files, len(want.Files))
	for p, a := range want.Files {
		require.Contains(t, full.Files, p)
		require.Equal(t, a.Stats, full.Files[p].Stats, p)
		require.Equal(t, a.Size, full.Files[p].Size, p)
		require.Equal(t, len(a.PartitionValues), len(full.Files[p].PartitionValues), p)
	}
	require.ElementsMatch(t, []string{"gone-1", "gone-2", "part-000000.parquet", "new-1"}, keys(full.Tombstones))
	require.Equal(t, int64(5), *full.Tombstones["gone-2"].Size)
	require.Equal(t, base.Txns, full.Txns)
	require.Equal(t, base.Domains, full.Domains)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSnapshotBytesPerFile measures the live heap per active file of a
// snapshot loaded from a checkpoint of 100,000 files with the soak's stats
// (plus as many tombstones), full and lean (20 s):
//
//	FLIGHTLINE_DELTA_FILECOST=1 go test -run TestSnapshotBytesPerFile -v ./internal/deltalog/
func TestSnapshotBytesPerFile(t *testing.T) {
	if os.Getenv("FLIGHTLINE_DELTA_FILECOST") == "" {
		t.Skip("set FLIGHTLINE_DELTA_FILECOST=1 to measure a 100,000-file snapshot's heap per file")
	}
	ctx := context.Background()
	st, err := objstore.Open(ctx, t.TempDir(), nil)
	require.NoError(t, err)
	tbl := NewTable(st, nil)
	const files = 100_000
	s := richSnapshot(0)
	s.Version = 0
	now := time.Now().UnixMilli()
	for i := range files {
		p := fmt.Sprintf("part-00000-%08d-0000-0000-0000-000000000000-c000.snappy.parquet", i)
		s.Files[p] = &Add{Path: p, PartitionValues: NullStrMap{}, Size: 4000, ModificationTime: now, Stats: soakStats}
		r := "gone-" + p
		s.Tombstones[r] = &Remove{Path: r, DeletionTimestamp: &now, Size: ptr(int64(4000))}
	}
	require.NoError(t, tbl.WriteCheckpoint(ctx, s))
	s = nil
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := live()
	full, err := tbl.Snapshot(ctx)
	require.NoError(t, err)
	fullPer := float64(live()-base) / files
	require.Len(t, full.Files, files)
	full = nil
	base = live()
	lean, err := tbl.LeanSnapshot(ctx)
	require.NoError(t, err)
	leanPer := float64(live()-base) / files
	require.Len(t, lean.Files, files)
	t.Logf("live heap per active file (and one tombstone each) of a %d-file snapshot: full %.0f B, lean %.0f B", files, fullPer, leanPer)
	require.Less(t, leanPer, fullPer/2)
	runtime.KeepAlive(lean)
}

// A lean snapshot whose checkpoint a cleanup deleted still checkpoints:
// its files without the stats that were left in it.
func TestLeanCheckpointWithoutPrevious(t *testing.T) {
	ctx := context.Background()
	st, err := objstore.Open(ctx, t.TempDir(), nil)
	require.NoError(t, err)
	tbl := NewTable(st, nil)
	base := richSnapshot(10)
	base.Version = 0
	require.NoError(t, tbl.Commit(ctx, 0, []Action{{Protocol: base.Protocol}, {MetaData: base.Metadata}}))
	require.NoError(t, tbl.WriteCheckpoint(ctx, base))
	lean, err := tbl.LeanSnapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, tbl.Commit(ctx, 1, []Action{{Add: &Add{Path: "new", PartitionValues: NullStrMap{}, Size: 1, Stats: soakStats}}}))
	require.NoError(t, lean.Apply(1, []Action{{Add: &Add{Path: "new", PartitionValues: NullStrMap{}, Size: 1, Stats: soakStats}}}))
	require.NoError(t, st.Delete(ctx, checkpointKey(0)))
	require.NoError(t, tbl.WriteCheckpoint(ctx, lean))
	full, err := tbl.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), full.CheckpointVersion)
	require.Len(t, full.Files, 11)
	require.Equal(t, soakStats, full.Files["new"].Stats)
	require.Equal(t, base.Txns, full.Txns)
}
