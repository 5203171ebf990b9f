package arrowmem

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

func TestCountingFollowsBuffers(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer checked.AssertSize(t, 0)
	c := NewCounting(checked)

	b := array.NewInt64Builder(c)
	for i := range 10000 {
		b.Append(int64(i)) // grows by Reallocate
	}
	require.Equal(t, int64(checked.CurrentAlloc()), c.Outstanding())
	require.Positive(t, c.Outstanding())
	arr := b.NewInt64Array()
	b.Release()
	require.Equal(t, int64(checked.CurrentAlloc()), c.Outstanding())
	require.GreaterOrEqual(t, c.Outstanding(), int64(8*10000))
	arr.Release()
	require.Zero(t, c.Outstanding())
}

func TestInstallWrapsTheDefault(t *testing.T) {
	prev := memory.DefaultAllocator
	c := Install()
	require.Same(t, c, Installed())
	require.Same(t, c, Install())
	require.Equal(t, memory.Allocator(c), memory.DefaultAllocator)
	if p, ok := prev.(*Counting); !ok || p != c {
		require.Equal(t, prev, c.mem)
	}
	before := c.Outstanding()
	buf := memory.NewResizableBuffer(memory.DefaultAllocator)
	buf.Resize(1 << 20)
	require.Equal(t, before+1<<20, c.Outstanding())
	buf.Release()
	require.Equal(t, before, c.Outstanding())
}

// A buffer dropped without Free (as arrow-go's Parquet encoder drops the
// pooled buffers a collection empties) is uncounted once collected, so the
// gauge does not rise for ever with a flat heap.
func TestCountingForgetsCollectedBuffers(t *testing.T) {
	c := NewCounting(memory.NewGoAllocator())
	var held [][]byte
	for range 100 {
		held = append(held, c.Allocate(1<<20))
	}
	require.EqualValues(t, 100<<20, c.Outstanding())
	runtime.KeepAlive(held)
	held = nil // dropped, never freed
	kept := c.Allocate(1 << 10)
	deadline := time.Now().Add(30 * time.Second)
	for c.Outstanding() != 1<<10 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	require.EqualValues(t, 1<<10, c.Outstanding(), "the dropped buffers are still counted")
	c.Free(kept)
	require.Zero(t, c.Outstanding())
	runtime.KeepAlive(kept)
	c.Free(kept) // a second free is not counted twice
	require.Zero(t, c.Outstanding())
}

// The cost of counting, per allocation and free (a 10k-row batch of the
// Kafka source allocates some tens of buffers).
func BenchmarkAllocateFree(b *testing.B) {
	for _, tc := range []struct {
		name string
		mem  memory.Allocator
	}{{"go", memory.NewGoAllocator()}, {"counting", NewCounting(memory.NewGoAllocator())}} {
		for _, size := range []int{64, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%d", tc.name, size), func(b *testing.B) {
				for b.Loop() {
					tc.mem.Free(tc.mem.Allocate(size))
				}
			})
		}
	}
}
