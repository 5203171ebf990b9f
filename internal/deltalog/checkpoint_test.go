package deltalog

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
)

// checkpointRemoves reads the remove rows of the checkpoint of version v
// straight from its Parquet file.
func checkpointRemoves(t *testing.T, st objstore.Store, v int64) []string {
	t.Helper()
	ctx := context.Background()
	b, err := st.Get(ctx, checkpointKey(v))
	require.NoError(t, err)
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	require.NoError(t, err)
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	require.NoError(t, err)
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	require.NoError(t, err)
	defer rr.Release()
	var paths []string
	for rr.Next() {
		var js bytes.Buffer
		require.NoError(t, array.RecordToJSON(rr.RecordBatch(), &js))
		for _, line := range bytes.Split(bytes.TrimSpace(js.Bytes()), []byte("\n")) {
			var row struct {
				Remove *struct {
					Path              string `json:"path"`
					DeletionTimestamp int64  `json:"deletionTimestamp"`
					DataChange        bool   `json:"dataChange"`
				} `json:"remove"`
			}
			require.NoError(t, json.Unmarshal(line, &row))
			if row.Remove != nil && row.Remove.Path != "" {
				require.False(t, row.Remove.DataChange)
				paths = append(paths, row.Remove.Path)
			}
		}
	}
	return paths
}

// Checkpoints keep remove tombstones until the table's retention
// (delta.deletedFileRetentionDuration, default one week) expires.
func TestCheckpointKeepsTombstones(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf StrMap
		want []string
	}{
		{"default week", StrMap{}, []string{"a.parquet"}},
		{"ten days", StrMap{"delta.deletedFileRetentionDuration": "interval 10 days"}, []string{"a.parquet", "b.parquet"}},
		{"not understood: keep all", StrMap{"delta.deletedFileRetentionDuration": "interval 1 fortnight"}, []string{"a.parquet", "b.parquet", "c.parquet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := objstore.NewLocal(t.TempDir())
			require.NoError(t, err)
			tbl := NewTable(st, nil)
			now := time.Now()
			ms := func(d time.Duration) *int64 { v := now.Add(-d).UnixMilli(); return &v }
			size := int64(10)
			add := func(p string) Action {
				return Action{Add: &Add{Path: p, PartitionValues: NullStrMap{}, Size: size, ModificationTime: now.UnixMilli(), DataChange: true}}
			}
			require.NoError(t, tbl.Commit(ctx, 0, []Action{
				{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
				{MetaData: &Metadata{ID: "x", Format: Format{Provider: "parquet"}, PartitionColumns: []string{}, Configuration: tc.conf,
					SchemaString: `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`}},
				add("a.parquet"), add("b.parquet"), add("c.parquet"), add("d.parquet"), add("e.parquet"),
			}))
			require.NoError(t, tbl.Commit(ctx, 1, []Action{
				{Remove: &Remove{Path: "a.parquet", DeletionTimestamp: ms(time.Minute), DataChange: true, Size: &size}},
				{Remove: &Remove{Path: "b.parquet", DeletionTimestamp: ms(8 * 24 * time.Hour), DataChange: true}},
				{Remove: &Remove{Path: "c.parquet", DataChange: true}},
				{Remove: &Remove{Path: "e.parquet", DeletionTimestamp: ms(time.Minute), DataChange: true}},
			}))
			require.NoError(t, tbl.Commit(ctx, 2, []Action{add("e.parquet")})) // re-added: no longer a tombstone
			snap, err := tbl.Snapshot(ctx)
			require.NoError(t, err)
			require.NoError(t, tbl.WriteCheckpoint(ctx, snap))
			require.Equal(t, tc.want, checkpointRemoves(t, st, 2))

			// Read back from the checkpoint alone: the tombstones survive.
			for v := int64(0); v <= 2; v++ {
				require.NoError(t, st.Delete(ctx, CommitKey(v)))
			}
			again, err := tbl.Snapshot(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2), again.CheckpointVersion)
			require.Len(t, again.Files, 2)
			require.Len(t, again.Tombstones, len(tc.want))
			require.Equal(t, *ms(time.Minute), *again.Tombstones["a.parquet"].DeletionTimestamp)
			require.Equal(t, size, *again.Tombstones["a.parquet"].Size)
		})
	}
}
