package delta_test

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	delta "github.com/flightline/flightline/flightsrc/delta"
)

func fill(t *testing.T, dir string, from, to, step int64) {
	ctx := context.Background()
	s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: dir, CheckpointInterval: 4})
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "fill"})
	require.NoError(t, err)
	for i := from; i < to; i += step {
		rec := flightsrc.GenerateOrders(memory.DefaultAllocator, i, i+step)
		require.NoError(t, w.WriteBatch(ctx, rec, []byte(`{"positions":{"orders/0":`+itoa(i+step)+`}}`)))
		rec.Release()
	}
}

func itoa(i int64) string { return string(append([]byte(nil), []byte(formatInt(i))...)) }

func formatInt(i int64) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// drain reads until EOF (or until n rows in tail mode) and returns the ids
// and the last checkpoint.
func drain(t *testing.T, r flightsrc.Reader, limit int) ([]int64, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids []int64
	var last []byte
	for limit < 0 || len(ids) < limit {
		rec, cp, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		last = cp
		rec.Release()
	}
	return ids, last
}

func TestSourceOnceTailResume(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	fill(t, dir, 0, 1000, 100) // versions 0..9, checkpoint at 8

	once, err := delta.New(ctx, delta.Config{URI: dir, Once: true, BatchRows: 64}, delta.Allocator(mem))
	require.NoError(t, err)
	streams, err := once.Streams(ctx)
	require.NoError(t, err)
	require.Equal(t, "id", streams[0].Schema.Field(0).Name)
	r, err := once.Read(ctx, flightsrc.ReadRequest{Stream: streams[0].Name})
	require.NoError(t, err)
	ids, _ := drain(t, r, -1)
	require.NoError(t, r.Close())
	require.ElementsMatch(t, seq(0, 1000), ids)

	// Resume mid-snapshot from the checkpoint after 384 rows.
	r, err = once.Read(ctx, flightsrc.ReadRequest{Stream: streams[0].Name})
	require.NoError(t, err)
	first, cp := drain(t, r, 300)
	require.NoError(t, r.Close())
	r, err = once.Read(ctx, flightsrc.ReadRequest{Stream: streams[0].Name, After: cp})
	require.NoError(t, err)
	rest, _ := drain(t, r, -1)
	require.NoError(t, r.Close())
	all := append(first, rest...)
	require.ElementsMatch(t, seq(0, 1000), all, "snapshot, resumed mid-file, has every row once")

	// Tail mode from the end of the snapshot follows new commits.
	tail, err := delta.New(ctx, delta.Config{URI: dir, PollInterval: 20 * time.Millisecond}, delta.Allocator(mem))
	require.NoError(t, err)
	r, err = tail.Read(ctx, flightsrc.ReadRequest{Stream: streams[0].Name, After: cp})
	require.NoError(t, err)
	_, cp = drain(t, r, len(rest))
	go fill(t, dir, 1000, 1300, 100)
	more, cp2 := drain(t, r, 300)
	require.NoError(t, r.Close())
	require.ElementsMatch(t, seq(1000, 1300), more)
	pos, err := delta.ParsePosition(cp2)
	require.NoError(t, err)
	require.False(t, pos.Snapshot)
	require.GreaterOrEqual(t, pos.Version, int64(10))
}

func seq(from, to int64) []int64 {
	out := make([]int64, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// A table with a v2 checkpoint (written by Spark, see
// internal/deltalog/testdata) is refused by name, not with "no such object".
func TestV2CheckpointTableRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../internal/deltalog/testdata/v2checkpoint")))
	src, err := delta.New(ctx, delta.Config{URI: dir, Once: true})
	require.NoError(t, err)
	_, err = src.Streams(ctx)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.ErrorContains(t, err, "v2Checkpoint")
}
