package deltalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
)

// jsonCheckpointRecord is how this package built checkpoint rows before
// cpBuilder: each action marshalled to JSON, maps rewritten as key/value
// lists, and the lot read by Arrow's JSON reader. It is the reference the
// direct builder must match row for row.
func jsonCheckpointRecord(t *testing.T, mem memory.Allocator, acts []Action) arrow.RecordBatch {
	t.Helper()
	mapPaths := [][]string{{"add", "partitionValues"}, {"add", "tags"}, {"remove", "partitionValues"},
		{"metaData", "configuration"}, {"metaData", "format", "options"}}
	var js bytes.Buffer
	for _, a := range acts {
		b, err := json.Marshal(a)
		require.NoError(t, err)
		var row map[string]any
		require.NoError(t, json.Unmarshal(b, &row))
		for _, p := range mapPaths {
			cur := row
			for i, k := range p {
				v, ok := cur[k]
				if !ok || v == nil {
					break
				}
				if i < len(p)-1 {
					next, ok := v.(map[string]any)
					if !ok {
						break
					}
					cur = next
					continue
				}
				if m, ok := v.(map[string]any); ok {
					kvs := make([]map[string]any, 0, len(m))
					for _, mk := range sortedKeys(m) {
						kvs = append(kvs, map[string]any{"key": mk, "value": m[mk]})
					}
					cur[k] = kvs
				}
			}
		}
		b, err = json.Marshal(row)
		require.NoError(t, err)
		js.Write(b)
		js.WriteByte('\n')
	}
	rec, _, err := array.RecordFromJSON(mem, checkpointSchema, &js, array.WithMultipleDocs())
	require.NoError(t, err)
	return rec
}

func ptr[T any](v T) *T { return &v }

// richSnapshot has every field a checkpoint row can carry, set and unset.
func richSnapshot(files int) *Snapshot {
	s := newSnapshot()
	s.Version = 41
	s.Protocol = &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"},
		WriterFeatures: []string{"timestampNtz", "domainMetadata"}}
	s.Metadata = &Metadata{ID: "id-1", Name: ptr("t"), Format: Format{Provider: "parquet", Options: StrMap{"b": "2", "a": "1"}},
		SchemaString: `{"type":"struct","fields":[]}`, PartitionColumns: []string{}, Configuration: StrMap{"delta.appendOnly": "true"},
		CreatedTime: ptr(int64(7))}
	s.Txns["app"] = Txn{AppID: "app", Version: 3, LastUpdated: ptr(int64(9))}
	s.Txns["bare"] = Txn{AppID: "bare", Version: 1}
	s.Domains["d/1"] = DomainMetadata{Domain: "d/1", Configuration: `{"x":1}`}
	for i := range files {
		a := &Add{Path: fmt.Sprintf("part-%06d.parquet", i), PartitionValues: NullStrMap{}, Size: int64(100 + i),
			ModificationTime: int64(1000 + i), DataChange: true, Stats: `{"numRecords":1}`}
		switch i % 4 {
		case 1:
			a.Stats = ""
			a.PartitionValues = NullStrMap{"p": ptr("x"), "q": nil}
		case 2:
			a.Tags = StrMap{"k": "v"}
		case 3:
			a.PartitionValues = nil
		}
		s.Files[a.Path] = a
	}
	now := time.Now().UnixMilli()
	s.Tombstones["gone-1"] = &Remove{Path: "gone-1", DeletionTimestamp: ptr(now), DataChange: true}
	s.Tombstones["gone-2"] = &Remove{Path: "gone-2", DeletionTimestamp: ptr(now), ExtendedFileMetadata: ptr(true),
		PartitionValues: NullStrMap{"p": nil}, Size: ptr(int64(5))}
	s.Tombstones["expired"] = &Remove{Path: "expired", DeletionTimestamp: ptr(int64(1))}
	return s
}

// The direct builder writes the very rows the JSON route wrote.
func TestCheckpointBuilderMatchesJSON(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := richSnapshot(12)
	var acts []Action
	require.NoError(t, s.CheckpointActions(time.Now(), func(a *Action) error {
		c := *a
		if a.Add != nil {
			c.Add = ptr(*a.Add)
		}
		if a.Remove != nil {
			c.Remove = ptr(*a.Remove)
		}
		acts = append(acts, c)
		return nil
	}))
	require.Len(t, acts, 2+2+1+12+2, "protocol, metadata, txns, domain, files and the unexpired tombstones")
	want := jsonCheckpointRecord(t, mem, acts)
	defer want.Release()
	cb := newCPBuilder(mem)
	defer cb.release()
	for i := range acts {
		cb.append(&acts[i])
	}
	got := cb.record()
	defer got.Release()
	var wj, gj strings.Builder
	require.NoError(t, array.RecordToJSON(want, &wj))
	require.NoError(t, array.RecordToJSON(got, &gj))
	require.Equal(t, wj.String(), gj.String())
	require.True(t, array.RecordEqual(want, got), "the records differ beyond their JSON")
}

// A checkpoint of more files than one row group holds reads back as the
// same snapshot.
func TestCheckpointRoundTripChunks(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	st, err := objstore.Open(ctx, t.TempDir(), nil)
	require.NoError(t, err)
	tbl := NewTable(st, mem)
	s := richSnapshot(2*checkpointChunk + 17)
	require.NoError(t, tbl.WriteCheckpoint(ctx, s))
	got := newSnapshot()
	require.NoError(t, tbl.readCheckpoint(ctx, got, s.Version, 0))
	require.Equal(t, s.Version, got.Version)
	require.Equal(t, s.Protocol, got.Protocol)
	require.Equal(t, s.Metadata, got.Metadata)
	require.Equal(t, s.Txns, got.Txns)
	require.Equal(t, s.Domains, got.Domains)
	require.Len(t, got.Files, len(s.Files))
	for p, a := range s.Files {
		w := *a
		w.DataChange = false
		if w.Tags == nil {
			w.Tags = got.Files[p].Tags // null and empty read back alike
		}
		require.Equal(t, &w, got.Files[p], p)
	}
	require.Len(t, got.Tombstones, 2)
	var lc lastCheckpoint
	b, err := st.Get(ctx, logDir+"_last_checkpoint")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &lc))
	require.Equal(t, int64(2+2+1+len(s.Files)+2), lc.Size)
	require.Equal(t, int64(len(s.Files)), lc.NumOfAddFiles)
}

// BenchmarkWriteCheckpoint50k and 1k write the checkpoint of a table of
// 50,000 and 1,000 files with stats of the soak's shape (ns/op and B/op
// are per checkpoint).
func BenchmarkWriteCheckpoint50k(b *testing.B) { benchCheckpoint(b, 50_000) }

func BenchmarkWriteCheckpoint1k(b *testing.B) { benchCheckpoint(b, 1_000) }

func benchCheckpoint(b *testing.B, files int) {
	ctx := context.Background()
	st, err := objstore.Open(ctx, b.TempDir(), nil)
	require.NoError(b, err)
	tbl := NewTable(st, nil)
	s := richSnapshot(files)
	stats := `{"numRecords":500,"minValues":{"topic":"soak","partition":0,"offset":123456,"timestamp":"2026-12-03T15:00:00.000Z","value":"{\"n\":123456}"},` +
		`"maxValues":{"topic":"soak","partition":3,"offset":123955,"timestamp":"2026-12-03T15:00:00.500Z","value":"{\"n\":123955}"},` +
		`"nullCount":{"topic":0,"partition":0,"offset":0,"timestamp":0,"key":0,"value":0}}`
	for _, a := range s.Files {
		a.Stats = stats
	}
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, tbl.WriteCheckpoint(ctx, s))
	}
}
