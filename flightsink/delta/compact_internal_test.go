package delta

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/deltalog"
)

func parquetFiles(t *testing.T, dir string) int {
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".parquet") {
			n++
		}
	}
	return n
}

func logOps(t *testing.T, tb *deltalog.Table) []string {
	var ops []string
	for v := int64(0); ; v++ {
		acts, err := tb.ReadVersion(context.Background(), v)
		if err != nil {
			return ops
		}
		ops = append(ops, acts[0].CommitInfo["operation"].(string))
	}
}

// A background compaction that loses its version to another process
// neither reads the log itself nor makes the writer's append fail: the
// append reconciles and commits as always, and the compaction commits on
// top of it. When the newer commit removed one of its inputs, it yields.
func TestCompactionYieldsToOtherCommits(t *testing.T) {
	for _, removeInput := range []bool{false, true} {
		t.Run(map[bool]string{false: "retries", true: "yields"}[removeInput], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s, err := New(ctx, Config{URI: dir, Compaction: "off", Vacuum: "off", TargetFileSize: 1 << 20})
			require.NoError(t, err)
			wr, _, err := s.Open(ctx, flightsink.Pipeline{ID: "y"})
			require.NoError(t, err)
			w := wr.(*writer)
			write := func(i int64) {
				rec := sinktest.Batch(memory.DefaultAllocator, i*10, i*10+10)
				defer rec.Release()
				require.NoError(t, w.WriteBatch(ctx, rec, checkpoint.Positions{"y/0": i*10 + 10}.Encode()))
			}
			for i := range int64(4) {
				write(i)
			}
			inputs := planCompaction(w.snap, s.o.target, 2, nil)
			require.Len(t, inputs, 4)
			// Another process takes the next version first.
			other := []deltalog.Action{{CommitInfo: map[string]any{"operation": "OTHER"}}}
			if removeInput {
				ts := time.Now().UnixMilli()
				other = append(other, deltalog.Action{Remove: &deltalog.Remove{Path: inputs[0].Path, DeletionTimestamp: &ts}})
			}
			require.NoError(t, w.t.Commit(ctx, w.snap.Version+1, other))
			before := parquetFiles(t, dir)
			w.bg.mu.Lock()
			w.bg.compacting = true
			w.snap.Track() // as afterCommit does: the inputs were live as of now
			w.bg.wg.Add(1)
			w.bg.mu.Unlock()
			go w.compact(inputs)
			// Its file written, its first commit attempt loses (give it a
			// moment); the log holds no OPTIMIZE yet.
			require.Eventually(t, func() bool { return parquetFiles(t, dir) > before }, 10*time.Second, 5*time.Millisecond)
			time.Sleep(100 * time.Millisecond)
			require.NotContains(t, logOps(t, w.t), "OPTIMIZE")
			write(4) // conflicts with OTHER, reconciles, commits; wakes the compaction
			require.Eventually(t, func() bool {
				w.bg.mu.Lock()
				defer w.bg.mu.Unlock()
				return !w.bg.compacting
			}, 10*time.Second, 5*time.Millisecond, "the compaction ends (Close would stop it)")
			require.NoError(t, wr.Close(ctx))
			ops := logOps(t, w.t)
			n := len(ops)
			if removeInput {
				require.NotContains(t, ops, "OPTIMIZE", "an input is gone: the compaction yields")
			} else {
				require.Equal(t, []string{"OTHER", "WRITE", "OPTIMIZE"}, ops[n-3:], "the append first, then the compaction on top")
			}
			w2, cp, err := s.Open(ctx, flightsink.Pipeline{ID: "y"})
			require.NoError(t, err)
			require.Equal(t, checkpoint.Positions{"y/0": 50}.Encode(), cp)
			require.NoError(t, w2.Close(ctx))
		})
	}
}
