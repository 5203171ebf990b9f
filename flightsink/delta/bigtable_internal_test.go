package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/deltalog"
)

// bigStats is an add's stats of the soak's Kafka-shaped batches.
const bigStats = `{"numRecords":500,"minValues":{"topic":"soak","partition":0,"offset":123456,"timestamp":"2026-12-03T15:00:00.000Z","value":"{\"n\":123456}"},` +
	`"maxValues":{"topic":"soak","partition":3,"offset":123955,"timestamp":"2026-12-03T15:00:00.500Z","value":"{\"n\":123955}"},` +
	`"nullCount":{"topic":0,"partition":0,"offset":0,"timestamp":0,"key":0,"value":0}}`

// goMemory samples what the Go runtime holds from the OS (mapped, less
// what it returned): the process's memory but for the binary and C.
type goMemory struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	peak  uint64
	total uint64
	live  uint64 // the heap the last GC marked live
}

func sampleGoMemory() *goMemory {
	g := &goMemory{stop: make(chan struct{})}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}, {Name: "/gc/heap/live:bytes"}}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			g.mu.Lock()
			g.peak = max(g.peak, s[0].Value.Uint64()-s[1].Value.Uint64())
			g.live = max(g.live, s[2].Value.Uint64())
			g.mu.Unlock()
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return g
}

// phase returns the peak since the last phase and starts a new one.
func (g *goMemory) phase() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, l := g.peak, g.live
	g.total = max(g.total, p)
	g.peak, g.live = 0, 0
	return fmt.Sprintf("%.1f MiB (live heap %.1f MiB)", float64(p)/(1<<20), float64(l)/(1<<20))
}

func (g *goMemory) end() uint64 {
	close(g.stop)
	g.wg.Wait()
	return max(g.total, g.peak)
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The Delta sink over a table of many active files (50,000; 1,000,000
// with FLIGHTLINE_DELTA_FILECOST=1, about a minute), each with the soak's
// stats, half of them small: its Open keeps nothing per file of the
// checkpoint (the live heap grows by less than 4 MiB), and its appends,
// a checkpoint that rewrites every file, a compaction's planning over
// them and a cleanup all run within the 96 MiB that --memory-limit auto
// sets (the Go runtime's memory, sampled, with that limit on):
//
//	FLIGHTLINE_DELTA_FILECOST=1 go test -count=1 -run TestDeltaSinkMemoryOverLargeTable -v ./flightsink/delta/
func TestDeltaSinkMemoryOverLargeTable(t *testing.T) {
	files := 50_000
	if os.Getenv("FLIGHTLINE_DELTA_FILECOST") != "" {
		files = 1_000_000
	}
	ctx := context.Background()
	dir := t.TempDir()
	s, err := New(ctx, Config{URI: dir, Compaction: "off", Vacuum: "off", TargetFileSize: 1 << 20})
	require.NoError(t, err)
	p := flightsink.Pipeline{ID: "big"}
	write := func(w flightsink.Writer, i int64) {
		rec := sinktest.Batch(memory.DefaultAllocator, i*10, i*10+10)
		defer rec.Release()
		require.NoError(t, w.WriteBatch(ctx, rec, checkpoint.Positions{"big/0": i*10 + 10}.Encode()))
	}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	write(w, 0)
	require.NoError(t, w.Close(ctx))

	// The table's state with files synthetic files, checkpointed as
	// version 1998: the writer's checkpoints come every 1,000 versions
	// from 1,000,000 files on (every 50 at 50,000), so its commits of
	// 1999 and 2000 write one.
	tbl, err := s.table(p.Target)
	require.NoError(t, err)
	start := time.Now()
	func() {
		full, err := tbl.Snapshot(ctx)
		require.NoError(t, err)
		full.Version = 1998
		now := time.Now().UnixMilli()
		for i := range files {
			path := fmt.Sprintf("part-00000-%08d-0000-4000-8000-000000000000-c000.snappy.parquet", i)
			size := int64(4000) // small
			if i%2 == 1 {
				size = 64 << 20
			}
			full.Files[path] = &deltalog.Add{Path: path, PartitionValues: deltalog.NullStrMap{}, Size: size, ModificationTime: now, Stats: bigStats}
		}
		require.NoError(t, tbl.WriteCheckpoint(ctx, full))
	}()
	t.Logf("a checkpoint of %d files written in %v", files, time.Since(start).Round(time.Millisecond))
	debug.FreeOSMemory()
	before := liveHeap()
	t.Logf("live heap before: %.1f MiB", float64(before)/(1<<20))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(96 << 20))
	g := sampleGoMemory()

	start = time.Now()
	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, checkpoint.Positions{"big/0": 10}.Encode(), cp)
	wr := w.(*writer)
	grown := int64(liveHeap()) - int64(before)
	t.Logf("Open over %d files: %v, live heap %+d B (%.1f B per file), peak %s", files, time.Since(start).Round(time.Millisecond), grown, float64(grown)/float64(files), g.phase())
	require.Less(t, grown, int64(4<<20), "Open keeps nothing per file of the checkpoint")
	require.Equal(t, int64(files+1), wr.snap.FileCount())

	start = time.Now()
	for i := int64(1); wr.snap.Version < 2000; i++ {
		write(w, i)
	}
	t.Logf("appends up to version 2000, its checkpoint included: %v, peak %s", time.Since(start).Round(time.Millisecond), g.phase())
	require.Equal(t, int64(2000), wr.snap.CheckpointVersion, "the commit of version 2000 checkpointed")
	var lc struct{ NumOfAddFiles int64 }
	b, err := tbl.Store().Get(ctx, "_delta_log/_last_checkpoint")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &lc))
	require.Equal(t, wr.snap.FileCount(), lc.NumOfAddFiles)

	start = time.Now()
	wr.bg.mu.Lock()
	view := wr.snap.Clone()
	wr.bg.mu.Unlock()
	inputs, found, err := planStreamed(ctx, wr.t, view, s.o.target, 50)
	require.NoError(t, err)
	require.GreaterOrEqual(t, found, files/2)
	require.NotEmpty(t, inputs)
	t.Logf("a compaction's plan over them: %v, %d small files, %d inputs, peak %s", time.Since(start).Round(time.Millisecond), found, len(inputs), g.phase())

	start = time.Now()
	_, err = vacuumTable(ctx, wr.t, time.Now(), time.Hour, time.Hour, true)
	require.NoError(t, err)
	t.Logf("a cleanup (dry run): %v, peak %s", time.Since(start).Round(time.Millisecond), g.phase())
	require.NoError(t, w.Close(ctx))
	peak := g.end()
	t.Logf("the Go runtime's memory at its peak: %.1f MiB (limit 96 MiB)", float64(peak)/(1<<20))
	require.Less(t, peak, uint64(96<<20))
}
