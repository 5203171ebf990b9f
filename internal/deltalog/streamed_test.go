package deltalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// requireSameState compares every field a checkpoint carries of two
// snapshots: files, unexpired tombstones, transactions, domains,
// protocol, metadata.
func requireSameState(t *testing.T, want, got *Snapshot) {
	t.Helper()
	require.Equal(t, want.Version, got.Version)
	require.Equal(t, want.Protocol, got.Protocol)
	require.Equal(t, want.Metadata, got.Metadata)
	require.Equal(t, want.Txns, got.Txns)
	require.Equal(t, want.Domains, got.Domains)
	require.ElementsMatch(t, keys(want.Files), keys(got.Files))
	for p, a := range want.Files {
		g := got.Files[p]
		require.Equal(t, a.Size, g.Size, p)
		require.Equal(t, a.ModificationTime, g.ModificationTime, p)
		require.Equal(t, a.Stats, g.Stats, p)
		require.Equal(t, len(a.Tags), len(g.Tags), p)
		for k, v := range a.Tags {
			require.Equal(t, v, g.Tags[k], p)
		}
		require.Equal(t, a.PartitionValues == nil, g.PartitionValues == nil, p)
		require.Equal(t, len(a.PartitionValues), len(g.PartitionValues), p)
		for k, v := range a.PartitionValues {
			require.Equal(t, v == nil, g.PartitionValues[k] == nil, p)
			if v != nil {
				require.Equal(t, *v, *g.PartitionValues[k], p)
			}
		}
	}
	exp := want.expiredBefore(time.Now())
	var live []string
	for p, r := range want.Tombstones {
		if !exp(r) {
			live = append(live, p)
		}
	}
	require.ElementsMatch(t, live, keys(got.Tombstones))
	for _, p := range live {
		require.Equal(t, want.Tombstones[p].Size, got.Tombstones[p].Size, p)
		require.Equal(t, want.Tombstones[p].DeletionTimestamp, got.Tombstones[p].DeletionTimestamp, p)
		require.Equal(t, want.Tombstones[p].ExtendedFileMetadata, got.Tombstones[p].ExtendedFileMetadata, p)
	}
}

// A streamed snapshot keeps none of its checkpoint's files, yet its
// checkpoints hold what a full snapshot's hold (files with every field,
// tombstones, state), across row groups and two checkpoints of its own;
// it counts the files and the small ones, lists them with EachFile, and
// tracks removals for a compaction.
func TestStreamedCheckpointsMatchFull(t *testing.T) {
	st, err := objstore.Open(context.Background(), t.TempDir(), nil)
	require.NoError(t, err)
	testStreamedCheckpoints(t, st)
}

// The same on S3, its checkpoints read in blocks of 2 KiB: the Parquet
// reader's reads span and straddle blocks.
func TestIntegrationStreamedCheckpointsS3(t *testing.T) {
	st, err := objstore.NewS3(context.Background(), s3test.Bucket, fmt.Sprintf("deltalog-streamed-%d", time.Now().UnixNano()), s3test.Options(t))
	require.NoError(t, err)
	defer objstore.SetS3ReadBlock(2048)()
	testStreamedCheckpoints(t, st)
}

func testStreamedCheckpoints(t *testing.T, st objstore.Store) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	defer SetCheckpointRowGroupRows(7)()
	tbl := NewTable(st, mem)
	base := richSnapshot(50) // sizes 100..149
	base.Version = 0
	require.NoError(t, tbl.Commit(ctx, 0, []Action{{Protocol: base.Protocol}, {MetaData: base.Metadata}}))
	require.NoError(t, tbl.WriteCheckpoint(ctx, base))

	s, err := tbl.StreamedSnapshot(ctx, 120)
	require.NoError(t, err)
	require.Empty(t, s.Files, "nothing per file of the checkpoint")
	require.Empty(t, s.Tombstones)
	require.Equal(t, int64(50), s.FileCount())
	require.Equal(t, int64(20), s.SmallFiles())
	require.Equal(t, base.Txns, s.Txns)
	require.Equal(t, base.Domains, s.Domains)
	require.Equal(t, base.Metadata, s.Metadata)

	now := time.Now().UnixMilli()
	size := int64(100)
	commits := [][]Action{
		{{Add: &Add{Path: "new-1", PartitionValues: NullStrMap{}, Size: 9, ModificationTime: 5, DataChange: true, Stats: soakStats}},
			{Remove: &Remove{Path: "part-000000.parquet", DeletionTimestamp: &now, Size: &size}},
			{Txn: &Txn{AppID: "app", Version: 4}}},
		{{Remove: &Remove{Path: "new-1", DeletionTimestamp: &now}},
			{Remove: &Remove{Path: "part-000030.parquet", DeletionTimestamp: &now}},
			{Add: &Add{Path: "new-2", PartitionValues: NullStrMap{}, Size: 3, ModificationTime: 6, DataChange: true, Stats: `{"numRecords":3}`}},
			{DomainMetadata: &DomainMetadata{Domain: "d/2", Configuration: "{}"}}},
	}
	s.Track()
	for i, acts := range commits {
		v := int64(i + 1)
		require.NoError(t, tbl.Commit(ctx, v, acts))
		_, err := s.Update(ctx, tbl)
		require.NoError(t, err)
		want, err := tbl.SnapshotAt(ctx, v) // the JSON commits on checkpoint 0
		require.NoError(t, err)
		require.Equal(t, int64(len(want.Files)), s.FileCount())
		var small int64
		for _, a := range want.Files {
			if a.Size < 120 {
				small++
			}
		}
		// Version 2 removes new-1, a small file of checkpoint 1, without
		// its size: counted until the next checkpoint.
		require.Equal(t, small+map[int64]int64{2: 1}[v], s.SmallFiles())
		var seen []string
		require.NoError(t, tbl.EachFile(ctx, s.Clone(), func(a *Add) error {
			seen = append(seen, a.Path)
			require.Equal(t, want.Files[a.Path].Size, a.Size)
			return nil
		}))
		require.ElementsMatch(t, keys(want.Files), seen)

		require.NoError(t, tbl.WriteCheckpoint(ctx, s))
		require.Empty(t, s.Files, "the files are the checkpoint's now")
		require.Equal(t, int64(len(want.Files)), s.FileCount())
		require.Equal(t, small, s.SmallFiles())
		got, err := tbl.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, v, got.CheckpointVersion)
		requireSameState(t, want, got)
	}
	for p, want := range map[string]bool{"part-000000.parquet": true, "new-1": true, "part-000030.parquet": true, "part-000001.parquet": false} {
		removed, ok := s.Removed(p)
		require.True(t, ok)
		require.Equal(t, want, removed, p)
	}
	s.Untrack()
	_, ok := s.Removed("new-1")
	require.False(t, ok)

	// Its checkpoint deleted, a streamed snapshot cannot checkpoint: it
	// does not know the files.
	require.NoError(t, tbl.Commit(ctx, 3, []Action{{Txn: &Txn{AppID: "app", Version: 5}}}))
	_, err = s.Update(ctx, tbl)
	require.NoError(t, err)
	require.NoError(t, st.Delete(ctx, checkpointKey(2)))
	require.Error(t, tbl.WriteCheckpoint(ctx, s))
}
