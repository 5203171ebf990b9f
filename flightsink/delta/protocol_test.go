package delta_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// consistentAtEveryVersion loads every version of the table at dir and
// requires its protocol to support every feature its metadata uses (what
// Spark checks before any operation: DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH).
func consistentAtEveryVersion(t *testing.T, dir string) *deltalog.Snapshot {
	t.Helper()
	ctx := context.Background()
	st, err := objstore.NewLocal(dir)
	require.NoError(t, err)
	tbl := deltalog.NewTable(st, nil)
	last, err := tbl.Snapshot(ctx)
	require.NoError(t, err)
	for v := int64(0); v <= last.Version; v++ {
		snap, err := tbl.SnapshotAt(ctx, v)
		require.NoError(t, err)
		miss, err := snap.MissingFeatures()
		require.NoError(t, err)
		require.Emptyf(t, miss, "version %d: protocol %+v lacks features its metadata uses", v, *snap.Protocol)
	}
	return last
}

// A table created from batches with a NOT NULL column lists the invariants
// writer feature (the demo's and the generator's tables: Spark refused
// them without it).
func TestProtocolListsInvariantsForNotNull(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s, err := delta.New(ctx, delta.Config{URI: dir}, delta.Allocator(mem))
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "nn"})
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 10) // id is NOT NULL
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(10)))
	rec.Release()
	snap := consistentAtEveryVersion(t, dir)
	require.Equal(t, 1, snap.Protocol.MinReaderVersion)
	require.Equal(t, 7, snap.Protocol.MinWriterVersion)
	require.ElementsMatch(t, []string{"invariants", "domainMetadata"}, snap.Protocol.WriterFeatures)
	require.Empty(t, snap.Protocol.ReaderFeatures)
}

// Schema evolution that brings a timestamp without time zone and a NOT
// NULL nested field upgrades the protocol in the same commit as the
// metaData: reader 3 with timestampNtz, writer features timestampNtz and
// invariants.
func TestProtocolUpgradedWithEvolvedSchema(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s, err := delta.New(ctx, delta.Config{URI: dir, SchemaEvolution: true}, delta.Allocator(mem))
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "ev"})
	require.NoError(t, err)

	plain := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	rec, _, err := array.RecordFromJSON(mem, plain, strings.NewReader(`[{"id":1}]`))
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(1)))
	rec.Release()
	snap := consistentAtEveryVersion(t, dir)
	require.Equal(t, []string{"domainMetadata"}, snap.Protocol.WriterFeatures, "nothing else is used yet")

	evolved := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "local_ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "addr", Type: arrow.StructOf(arrow.Field{Name: "zip", Type: arrow.PrimitiveTypes.Int32}), Nullable: true},
	}, nil)
	rec, _, err = array.RecordFromJSON(mem, evolved, strings.NewReader(`[{"id":2,"local_ts":1767225600123456,"addr":{"zip":7}}]`))
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(2)))
	rec.Release()
	snap = consistentAtEveryVersion(t, dir)
	require.Equal(t, 3, snap.Protocol.MinReaderVersion)
	require.Equal(t, 7, snap.Protocol.MinWriterVersion)
	require.Equal(t, []string{"timestampNtz"}, snap.Protocol.ReaderFeatures)
	require.ElementsMatch(t, []string{"domainMetadata", "timestampNtz", "invariants"}, snap.Protocol.WriterFeatures)

	st, _ := objstore.NewLocal(dir)
	acts, err := deltalog.NewTable(st, nil).ReadVersion(ctx, snap.Version)
	require.NoError(t, err)
	var proto, md bool
	for _, a := range acts {
		proto = proto || a.Protocol != nil
		md = md || a.MetaData != nil
	}
	require.True(t, proto && md, "the protocol is upgraded in the commit that evolves the schema")
}

// writeLog commits versions by hand (a table another writer, or an older
// Flightline, made).
func writeLog(t *testing.T, dir string, versions ...[]deltalog.Action) {
	t.Helper()
	st, err := objstore.NewLocal(dir)
	require.NoError(t, err)
	for v, acts := range versions {
		require.NoError(t, deltalog.NewTable(st, nil).Commit(context.Background(), int64(v), acts))
	}
}

func notNullMetadata(t *testing.T, conf map[string]string) *deltalog.Metadata {
	sc, err := deltalog.FromArrowSchema(sinktest.Schema)
	require.NoError(t, err)
	b, err := json.Marshal(sc)
	require.NoError(t, err)
	return &deltalog.Metadata{ID: "4bd7d0b4-3a4e-4c8f-9b1f-0d2b8d0c0a11", Format: deltalog.Format{Provider: "parquet", Options: deltalog.StrMap{}},
		SchemaString: string(b), PartitionColumns: []string{}, Configuration: conf}
}

// A table an older Flightline created (NOT NULL column, protocol without
// invariants) is repaired by the next commit, the claim of Open; a legacy
// (1, 2) table keeps the features its writer version implied.
func TestProtocolRepairedOnOpen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto deltalog.Protocol
		want  []string
	}{
		{"old flightline", deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"domainMetadata"}},
			[]string{"domainMetadata", "invariants"}},
		{"legacy 1/2", deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2},
			[]string{"appendOnly", "invariants", "domainMetadata"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			p := tc.proto
			writeLog(t, dir, []deltalog.Action{{Protocol: &p}, {MetaData: notNullMetadata(t, map[string]string{})}})
			s, err := delta.New(ctx, delta.Config{URI: dir})
			require.NoError(t, err)
			w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "old"})
			require.NoError(t, err)
			require.NoError(t, w.Close(ctx))
			st, _ := objstore.NewLocal(dir)
			snap, err := deltalog.NewTable(st, nil).Snapshot(ctx)
			require.NoError(t, err)
			miss, err := snap.MissingFeatures()
			require.NoError(t, err)
			require.Empty(t, miss)
			require.Equal(t, 7, snap.Protocol.MinWriterVersion)
			require.Equal(t, tc.want, snap.Protocol.WriterFeatures)
		})
	}
}

// A table with a v2 checkpoint (written by Spark, see
// internal/deltalog/testdata) is refused by name at Open, and nothing is
// written to it.
func TestV2CheckpointTableRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../internal/deltalog/testdata/v2checkpoint")))
	before := listDir(t, dir)
	s, err := delta.New(ctx, delta.Config{URI: dir})
	require.NoError(t, err)
	_, _, err = s.Open(ctx, flightsink.Pipeline{ID: "v2"})
	require.ErrorIs(t, err, deltalog.ErrUnsupportedFeature)
	require.ErrorContains(t, err, "v2Checkpoint")
	_, err = s.Checkpoint(ctx, flightsink.Pipeline{ID: "v2"})
	require.ErrorContains(t, err, "v2Checkpoint")
	require.Equal(t, before, listDir(t, dir), "nothing written")
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		out = append(out, p)
		return err
	}))
	return out
}
