package delta_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/internal/testkit/heaptest"
)

// kafkaLike is the shape of the soak's Kafka → Delta batches.
var kafkaLike = arrow.NewSchema([]arrow.Field{
	{Name: "topic", Type: arrow.BinaryTypes.String},
	{Name: "partition", Type: arrow.PrimitiveTypes.Int32},
	{Name: "offset", Type: arrow.PrimitiveTypes.Int64},
	{Name: "timestamp", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
	{Name: "key", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "value", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// tinyBatch returns a batch of rows rows at offset off (the caller
// releases it).
func tinyBatch(mem memory.Allocator, off int64, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, kafkaLike)
	defer b.Release()
	for i := range int64(rows) {
		b.Field(0).(*array.StringBuilder).Append("soak")
		b.Field(1).(*array.Int32Builder).Append(int32(i % 4))
		b.Field(2).(*array.Int64Builder).Append(off + i)
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000 + off + i))
		b.Field(4).(*array.BinaryBuilder).Append([]byte("k" + strconv.FormatInt(off+i, 10)))
		b.Field(5).(*array.StringBuilder).Append(`{"n":` + strconv.FormatInt(off+i, 10) + `}`)
	}
	return b.NewRecordBatch()
}

// fileCost is what one file count costs the Delta writer.
type fileCost struct {
	files          int
	heapPerFile    float64       // live heap bytes per data file in the table
	allocPerCommit float64       // bytes allocated per one-file commit, checkpoints included
	perCommit      time.Duration // wall time per one-file commit, checkpoints included
}

// measureFileCost grows a table through the Delta sink, one file per
// batch and groups of group batches per commit, and at each file count of
// at measures the live heap per file (against the heap of the open writer
// of an empty table) and the cost of commits of one one-row file each:
// commits of them, a multiple of the effective checkpoint interval so the
// average includes its share of checkpoints. Arrow memory comes from a
// checked allocator that must end at zero. Compaction is off: the files
// stay. With
// FLIGHTLINE_HEAP_PROFILE_DIR set it writes a heap profile at each count.
func measureFileCost(t *testing.T, at []int, group, commits int, interval int) []fileCost {
	t.Helper()
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := delta.New(ctx, delta.Config{URI: t.TempDir(), CheckpointInterval: interval, Compaction: "off", Vacuum: "off"}, delta.Allocator(mem))
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "files"})
	require.NoError(t, err)
	defer w.Close(ctx)
	var off int64
	files := 0
	write := func(n int) {
		batches := make([]flightsink.Batch, n)
		for i := range batches {
			batches[i] = flightsink.Batch{Rec: tinyBatch(mem, off, 1), CP: checkpoint.Positions{"t/0": off}.Encode()}
			off++
		}
		err := w.(flightsink.GroupWriter).WriteBatches(ctx, batches)
		for _, b := range batches {
			b.Rec.Release()
		}
		require.NoError(t, err)
		files += n
	}
	write(1) // creates the table: the baseline holds its schema and state
	base := heaptest.Live()
	var out []fileCost
	for _, target := range at {
		for files < target {
			write(min(group, target-files))
		}
		live := heaptest.Live()
		if dir := os.Getenv("FLIGHTLINE_HEAP_PROFILE_DIR"); dir != "" {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("delta-files-%d.pprof", files)))
			require.NoError(t, err)
			require.NoError(t, pprof.Lookup("heap").WriteTo(f, 0))
			f.Close()
		}
		var before, after runtime.MemStats
		if dir := os.Getenv("FLIGHTLINE_HEAP_PROFILE_DIR"); dir != "" {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("delta-commits-%d.cpu", files)))
			require.NoError(t, err)
			require.NoError(t, pprof.StartCPUProfile(f))
			defer f.Close()
		}
		runtime.ReadMemStats(&before)
		start := time.Now()
		for range commits {
			write(1)
		}
		el := time.Since(start)
		runtime.ReadMemStats(&after)
		if os.Getenv("FLIGHTLINE_HEAP_PROFILE_DIR") != "" {
			pprof.StopCPUProfile()
		}
		c := fileCost{files: target, heapPerFile: (float64(live) - float64(base)) / float64(target),
			allocPerCommit: float64(after.TotalAlloc-before.TotalAlloc) / float64(commits), perCommit: el / time.Duration(commits)}
		t.Logf("%6d files: live heap %.0f B/file; one-file commit %.1f KiB allocated, %.2f ms (average of %d, checkpoints included)",
			c.files, c.heapPerFile, c.allocPerCommit/1024, float64(c.perCommit.Microseconds())/1000, commits)
		out = append(out, c)
	}
	runtime.KeepAlive(w)
	return out
}

// TestDeltaSinkFileCostProfile measures the writer's cost per data file at
// 1k, 10k and 50k files (FLIGHTLINE_DELTA_FILECOST=1; a minute or more):
//
//	FLIGHTLINE_DELTA_FILECOST=1 go test -count=1 -run TestDeltaSinkFileCostProfile -v ./flightsink/delta/
func TestDeltaSinkFileCostProfile(t *testing.T) {
	if os.Getenv("FLIGHTLINE_DELTA_FILECOST") == "" {
		t.Skip("set FLIGHTLINE_DELTA_FILECOST=1 to measure the Delta writer's cost per file at 1k, 10k and 50k files")
	}
	measureFileCost(t, []int{1_000, 10_000, 50_000}, 500, 100, 10)
}

// A commit's cost does not grow with the table: with CheckpointInterval 1
// a table of 500 files checkpoints at every commit and one of 2,000 files
// every second, so the bytes allocated per commit (checkpoints included)
// stay within twice each other (they would grow fourfold if every commit
// rewrote every file), and a checkpoint allocates a few KiB per file, not
// tens. Allocation counts, not time: the machine may be loaded. The live
// heap per file is bounded too. (Before the fix: 7.4 MiB per commit at
// 500 files and 25 MiB at 2,000; after it 3.5–4 and 5.1–5.3 MiB; with
// the lean snapshot 5.5 and 8.0 MiB, and 290–410 B of live heap per file
// instead of 630–740; with the streamed snapshot 5.5 and 7.9 MiB, and 128
// and 33 B per file: only the files since the last checkpoint.)
func TestDeltaSinkCommitCostFlat(t *testing.T) {
	c := measureFileCost(t, []int{500, 2_000}, 500, 4, 1)
	small, large := c[0], c[1]
	require.Less(t, large.allocPerCommit, 2*small.allocPerCommit,
		"bytes allocated per commit grew with the table: %.0f KiB at %d files, %.0f KiB at %d", small.allocPerCommit/1024, small.files, large.allocPerCommit/1024, large.files)
	// A checkpoint of 2,000 files every second commit, plus the commits.
	// The writer's snapshot is streamed (deltalog.StreamedSnapshot): a
	// checkpoint reads the files back from the previous one, which costs
	// about 1.3 KiB per file more (7.9 MiB per commit here, against 5.3
	// with every file in memory).
	require.Less(t, large.allocPerCommit, float64(12<<20), "a checkpoint allocates more than about 12 KiB per file")
	for _, x := range c {
		require.Less(t, x.heapPerFile, 1024.0, "live heap per file at %d files", x.files)
	}
	// Nothing per file of the last checkpoint (a lean snapshot's 290 B
	// per file would fail this).
	require.Less(t, large.heapPerFile, 200.0, "live heap per file at %d files", large.files)
}
