package delta_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// readIDs reads the id column of every active file of the table at uri
// with plain pqarrow, from the log as our deltalog reads it. (The delta-rs
// interop tests in integration/ read the same tables independently.)
func readIDs(t *testing.T, uri string, opts objstore.Options) []int64 {
	t.Helper()
	ctx := context.Background()
	st, err := objstore.Open(ctx, uri, opts)
	require.NoError(t, err)
	snap, err := deltalog.NewTable(st, nil).Snapshot(ctx)
	require.NoError(t, err)
	var ids []int64
	for _, f := range snap.SortedFiles() {
		b, err := st.Get(ctx, f.Path)
		require.NoError(t, err)
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		require.NoError(t, err)
		tbl, err := fr.ReadTable(ctx)
		require.NoError(t, err)
		idx := tbl.Schema().FieldIndices("id")[0]
		for _, c := range tbl.Column(idx).Data().Chunks() {
			ids = append(ids, c.(*array.Int64).Int64Values()...)
		}
		tbl.Release()
		pf.Close()
	}
	return ids
}

// harness runs the suite on the table at uri, with cfg's other fields
// (CheckpointInterval 3 unless cfg sets it).
func harness(uri string, opts objstore.Options, cfg delta.Config) sinktest.Harness {
	cfg.URI, cfg.Storage = uri, opts
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = 3
	}
	return sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
		Parallel:  true,
		NewSink: func(t *testing.T) flightsink.Sink {
			s, err := delta.New(context.Background(), cfg)
			require.NoError(t, err)
			return s
		},
		NewInstance: func(t *testing.T, name string) flightsink.Sink {
			c := cfg
			c.Instance = name
			s, err := delta.New(context.Background(), c)
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			return readIDs(t, uri+"/"+p.Target, opts)
		},
	}
}

func TestConformanceLocal(t *testing.T) {
	sinktest.Run(t, harness(t.TempDir(), nil, delta.Config{}))
}

func TestIntegrationConformanceS3(t *testing.T) {
	opts := s3test.Options(t)
	uri := fmt.Sprintf("s3://%s/conformance-%d", s3test.Bucket, time.Now().UnixNano())
	sinktest.Run(t, harness(uri, opts, delta.Config{}))
}

func TestCheckpointsBoundTheLog(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s, err := delta.New(ctx, delta.Config{URI: dir, CheckpointInterval: 5}, delta.Allocator(mem))
	require.NoError(t, err)
	p := flightsink.Pipeline{ID: "cp"}
	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
	for i := int64(0); i < 23; i++ {
		rec := sinktest.Batch(mem, i*10, i*10+10)
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(i*10+10)))
		rec.Release()
	}
	require.NoError(t, w.Close(ctx))
	st, _ := objstore.NewLocal(dir)
	snap, err := deltalog.NewTable(st, nil).Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(20), snap.CheckpointVersion, "loaded from the newest checkpoint")
	require.Equal(t, int64(22), snap.Version, "the first batch created the table at version 0")
	require.Len(t, snap.Files, 23)
	// Delete the JSON commits a checkpoint covers: resume must not need them.
	for v := int64(0); v <= 20; v++ {
		require.NoError(t, st.Delete(ctx, deltalog.CommitKey(v)))
	}
	got, err := s.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(230)), string(got))
	require.Len(t, readIDs(t, dir, nil), 230)
	txn := snap.Txns["cp"]
	require.Equal(t, int64(23), txn.Version, "txn(appId=pipeline) counts the pipeline's commits")
	require.Equal(t, int64(230), snap.Txns["cp/sinktest/0"].Version, "txn per partition holds its position")
}

// Two instances of one pipeline write disjoint partitions of one table:
// they do not fence each other, and resume returns the per-partition max.
func TestMultiInstanceMergesPositions(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	p := flightsink.Pipeline{ID: "multi"}
	open := func(inst string) flightsink.Writer {
		s, err := delta.New(ctx, delta.Config{URI: dir, Instance: inst}, delta.Allocator(mem))
		require.NoError(t, err)
		w, _, err := s.Open(ctx, p)
		require.NoError(t, err)
		return w
	}
	a, b := open("a"), open("b")
	write := func(w flightsink.Writer, part string, from, to int64) error {
		rec := sinktest.Batch(mem, from, to)
		defer rec.Release()
		return w.WriteBatch(ctx, rec, []byte(fmt.Sprintf(`{"positions":{"t/%s":%d}}`, part, to)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	na, nb := int64(0), int64(1000)
	for range 20 { // interleaved; each conflict is a retry, not a fence
		if rng.IntN(2) == 0 {
			require.NoError(t, write(a, "0", na, na+5))
			na += 5
		} else {
			require.NoError(t, write(b, "1", nb, nb+5))
			nb += 5
		}
	}
	// A rebalance: partition 1 moves to instance a, which resumes from the
	// merged checkpoint.
	s, err := delta.New(ctx, delta.Config{URI: dir, Instance: "a"})
	require.NoError(t, err)
	a2, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf(`{"positions":{"t/0":%d,"t/1":%d}}`, na, nb), string(cp))
	require.Error(t, write(a, "0", na, na+5), "the old instance-a writer is fenced by the new one")
	require.NoError(t, write(b, "1", nb, nb+5), "instance b is not fenced by a's reopen")
	nb += 5
	// A replay of partition 1 by the new owner is a no-op.
	require.NoError(t, write(a2, "1", nb-5, nb))
	// b moved partition 1 after a2's Open: a2's batch past it is refused
	// (ErrConflict, TestInstancesZombieHandOver); a2 re-opens and resumes.
	require.ErrorIs(t, write(a2, "1", nb, nb+5), flightline.ErrConflict)
	a3, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf(`{"positions":{"t/0":%d,"t/1":%d}}`, na, nb), string(cp))
	require.NoError(t, write(a3, "1", nb, nb+5))
	nb += 5
	got, err := s.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf(`{"positions":{"t/0":%d,"t/1":%d}}`, na, nb), string(got))
	require.Len(t, readIDs(t, dir, nil), int(na+nb-1000))
}
